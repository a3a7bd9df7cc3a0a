/* FNV-1a, 32 bits: the hash of the per-worker caches keyed by path (the
 * open-file cache, FastCGI's script kinds). Paths come from clients, but
 * each cache is bounded and per worker, so what colliding paths can cost
 * is bounded too. */
#ifndef HERD_CORE_FNV_H
#define HERD_CORE_FNV_H

#include <stddef.h>
#include <stdint.h>

#define FNV_SEED 2166136261u

/* Continues h over p[0..len): fnv_more(fnv_more(FNV_SEED, a, n), b, m)
 * hashes a and b as one string. */
static inline uint32_t fnv_more(uint32_t h, const char *p, size_t len)
{
    for (size_t i = 0; i < len; i++)
        h = (h ^ (uint8_t)p[i]) * 16777619u;
    return h;
}

#endif

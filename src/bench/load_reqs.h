/* The request bytes herd load sends, built once and shared by its threads:
 * the request of the flags (URL, --method, -H, --body), or the requests of
 * a --requests file (bench/load_script.h) in order, each with the flags'
 * headers it does not set itself. */
#ifndef HERD_BENCH_LOAD_REQS_H
#define HERD_BENCH_LOAD_REQS_H

#include <stddef.h>
#include <stdint.h>

#include "bench/load_run.h"

/* The n requests back to back, then the first pipeline - 1 again (wrapping
 * round as often as needed), so a batch of up to --pipeline requests from
 * any position i < n is the one run buf[offs[i] .. offs[i + k]). */
struct load_reqs {
    char *buf;
    size_t *offs;
    uint32_t n;
};

/* 0, or -1 when out of memory (or over 4 GiB of request bytes). */
int load_reqs_build(const struct load_config *cfg, struct load_reqs *out);
void load_reqs_free(struct load_reqs *r);

#endif

/* herd load --timeline: per-slice counts and latency bins (see the header). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bench/load_timeline.h"

#define TL_MAX_VALUE ((1ULL << 43) - 1)

uint32_t tl_bin(uint64_t v)
{
    if (v > TL_MAX_VALUE)
        v = TL_MAX_VALUE;
    if (v < (1u << TL_SUB_BITS))
        return (uint32_t)v;
    int msb = 63 - __builtin_clzll(v);
    int e = msb - TL_SUB_BITS;
    return (uint32_t)((e + 1) << TL_SUB_BITS) + (uint32_t)((v >> e) & ((1u << TL_SUB_BITS) - 1));
}

uint64_t tl_bin_value(uint32_t bin)
{
    if (bin < (1u << TL_SUB_BITS))
        return bin;
    int e = (int)(bin >> TL_SUB_BITS) - 1;
    uint64_t sub = bin & ((1u << TL_SUB_BITS) - 1);
    uint64_t low = ((1ULL << TL_SUB_BITS) + sub) << e;
    return low + ((1ULL << e) >> 1);
}

int tl_init(struct load_timeline *tl, int64_t origin_ns, int64_t slice_ns, int64_t span_ns)
{
    memset(tl, 0, sizeof *tl);
    tl->origin_ns = origin_ns;
    tl->slice_ns = slice_ns > 0 ? slice_ns : 100000000;
    int64_t n = span_ns / tl->slice_ns + 2;
    tl->nslices = (uint32_t)(n > TL_MAX_SLICES ? TL_MAX_SLICES : n);
    tl->s = calloc(tl->nslices, sizeof *tl->s);
    return tl->s ? 0 : -ENOMEM;
}

void tl_free(struct load_timeline *tl)
{
    free(tl->s);
    tl->s = NULL;
    tl->nslices = 0;
}

static struct tl_slice *slice_at(struct load_timeline *tl, int64_t now)
{
    int64_t i = now > tl->origin_ns ? (now - tl->origin_ns) / tl->slice_ns : 0;
    if (i >= tl->nslices) {
        tl->late++;
        return NULL;
    }
    return &tl->s[i];
}

void tl_response(struct load_timeline *tl, int64_t now, uint64_t latency_ns)
{
    struct tl_slice *s = slice_at(tl, now);
    if (!s)
        return;
    if (!s->responses || latency_ns < s->lat_min)
        s->lat_min = latency_ns;
    if (latency_ns > s->lat_max)
        s->lat_max = latency_ns;
    s->responses++;
    s->lat_sum += latency_ns;
    s->bins[tl_bin(latency_ns)]++;
}

void tl_error(struct load_timeline *tl, int64_t now, enum load_err kind)
{
    struct tl_slice *s = slice_at(tl, now);
    if (s)
        s->errors[kind]++;
}

void tl_merge(struct load_timeline *dst, const struct load_timeline *src)
{
    dst->late += src->late;
    for (uint32_t i = 0; i < dst->nslices && i < src->nslices; i++) {
        struct tl_slice *d = &dst->s[i];
        const struct tl_slice *s = &src->s[i];
        if (!s->responses && !d->responses) {
            d->lat_min = 0;
        } else if (s->responses && (!d->responses || s->lat_min < d->lat_min)) {
            d->lat_min = s->lat_min;
        }
        if (s->lat_max > d->lat_max)
            d->lat_max = s->lat_max;
        d->responses += s->responses;
        d->lat_sum += s->lat_sum;
        for (int k = 0; k < LOAD_NERR; k++)
            d->errors[k] += s->errors[k];
        for (uint32_t b = 0; b < TL_BINS; b++)
            d->bins[b] += s->bins[b];
    }
}

static int slice_used(const struct tl_slice *s)
{
    if (s->responses)
        return 1;
    for (int k = 0; k < LOAD_NERR; k++)
        if (s->errors[k])
            return 1;
    return 0;
}

static void write_slice(const struct load_timeline *tl, uint32_t i, FILE *f)
{
    const struct tl_slice *s = &tl->s[i];
    fprintf(f, "      {\"t_ms\": %lld, \"responses\": %llu, \"errors\": {",
            (long long)(i * tl->slice_ns / 1000000), (unsigned long long)s->responses);
    int any = 0;
    for (int k = 0; k < LOAD_NERR; k++)
        if (s->errors[k]) {
            fprintf(f, "%s\"%s\": %u", any ? ", " : "", load_err_names[k], s->errors[k]);
            any = 1;
        }
    fprintf(f, "}, \"latency\": {\"unit\": \"ns\", \"count\": %llu, \"min\": %llu, "
               "\"max\": %llu, \"sum\": %llu, \"buckets\": [",
            (unsigned long long)s->responses, (unsigned long long)s->lat_min,
            (unsigned long long)s->lat_max, (unsigned long long)s->lat_sum);
    any = 0;
    for (uint32_t b = 0; b < TL_BINS; b++)
        if (s->bins[b]) {
            fprintf(f, "%s[%llu, %u]", any ? ", " : "", (unsigned long long)tl_bin_value(b),
                    s->bins[b]);
            any = 1;
        }
    fputs("]}}", f);
}

void tl_write_json(const struct load_timeline *tl, FILE *f)
{
    uint32_t used = 0;
    for (uint32_t i = 0; i < tl->nslices; i++)
        if (slice_used(&tl->s[i]))
            used = i + 1;
    fprintf(f, "{\"slice_ms\": %lld, \"origin_monotonic_ns\": %lld, \"late\": %llu,\n"
               "    \"slices\": [",
            (long long)(tl->slice_ns / 1000000), (long long)tl->origin_ns,
            (unsigned long long)tl->late);
    for (uint32_t i = 0; i < used; i++) {
        fputs(i ? ",\n" : "\n", f);
        write_slice(tl, i, f);
    }
    fputs(used ? "\n    ]}" : "]}", f);
}

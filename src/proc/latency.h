/* Request latency per worker slot: log-scale buckets (4 per power of two,
 * so a percentile read back is within 25% of the truth) for the status
 * page's percentiles, plus a small fixed bucket set for Prometheus, whose
 * histograms need the same bounds everywhere and few of them. One writer
 * (the slot's worker) with plain relaxed stores; readers sum the slots. */
#ifndef HERD_PROC_LATENCY_H
#define HERD_PROC_LATENCY_H

#include <stdint.h>

#define LAT_BUCKETS 128     /* the last one also takes everything past 2^33 us */
#define LAT_PROM_BOUNDS 16  /* plus one past the last bound (+Inf) */

struct sb_latency {
    uint64_t sum_us;
    uint64_t prom[LAT_PROM_BOUNDS + 1]; /* not cumulative */
    uint64_t log[LAT_BUCKETS];
};

/* The Prometheus bucket bounds, in microseconds, ascending. */
extern const uint32_t lat_prom_bounds_us[LAT_PROM_BOUNDS];

/* Bucket index of a duration: exact below 4 us, then 4 per power of two. */
static inline unsigned lat_bucket(uint64_t us)
{
    if (us < 4)
        return (unsigned)us;
    unsigned e = 63u - (unsigned)__builtin_clzll(us);
    unsigned i = 4 * (e - 1) + (unsigned)((us >> (e - 2)) & 3);
    return i < LAT_BUCKETS ? i : LAT_BUCKETS - 1;
}

/* The largest duration bucket i holds. */
uint64_t lat_bucket_high(unsigned i);

/* Single-writer update: relaxed stores readers can load whole. Most
 * requests are fast, so the scan of the Prometheus bounds stops early. */
static inline void lat_record(struct sb_latency *h, uint64_t us)
{
    unsigned p = 0;
    while (p < LAT_PROM_BOUNDS && us > lat_prom_bounds_us[p])
        p++;
    __atomic_store_n(&h->prom[p], h->prom[p] + 1, __ATOMIC_RELAXED);
    unsigned i = lat_bucket(us);
    __atomic_store_n(&h->log[i], h->log[i] + 1, __ATOMIC_RELAXED);
    __atomic_store_n(&h->sum_us, h->sum_us + us, __ATOMIC_RELAXED);
}

/* Adds one slot's histogram into a reader's copy. */
void lat_merge(struct sb_latency *into, const struct sb_latency *from);

/* Number of durations in a merged histogram. */
uint64_t lat_count(const struct sb_latency *h);

/* A quantile (per_mille 500 = p50, 999 = p99.9) of a histogram in
 * microseconds: the high end of the bucket holding it (so "p99 <= X");
 * 0 when the histogram is empty. */
uint64_t lat_quantile(const struct sb_latency *h, unsigned per_mille);

#endif

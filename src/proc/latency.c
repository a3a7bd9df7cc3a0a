#include "proc/latency.h"

/* 100 us .. 10 s in 1-2.5-5 steps: the bounds most exporters use, few
 * enough that a scrape stays small. */
const uint32_t lat_prom_bounds_us[LAT_PROM_BOUNDS] = {
    100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000,
    1000000, 2500000, 5000000, 10000000,
};

uint64_t lat_bucket_high(unsigned i)
{
    if (i < 4)
        return i;
    if (i >= LAT_BUCKETS - 1)
        return UINT64_MAX;
    unsigned e = i / 4 + 1, sub = i % 4;
    uint64_t width = (uint64_t)1 << (e - 2);
    return (uint64_t)(4 + sub) * width + width - 1;
}

void lat_merge(struct sb_latency *into, const struct sb_latency *from)
{
    into->sum_us += __atomic_load_n(&from->sum_us, __ATOMIC_RELAXED);
    for (unsigned p = 0; p <= LAT_PROM_BOUNDS; p++)
        into->prom[p] += __atomic_load_n(&from->prom[p], __ATOMIC_RELAXED);
    for (unsigned i = 0; i < LAT_BUCKETS; i++)
        into->log[i] += __atomic_load_n(&from->log[i], __ATOMIC_RELAXED);
}

uint64_t lat_count(const struct sb_latency *h)
{
    uint64_t n = 0;
    for (unsigned i = 0; i < LAT_BUCKETS; i++)
        n += h->log[i];
    return n;
}

uint64_t lat_quantile(const struct sb_latency *h, unsigned per_mille)
{
    uint64_t n = lat_count(h);
    if (n == 0)
        return 0;
    /* integer rank: 0.9 * 10 in doubles is 9.000000000000002 */
    uint64_t rank = (n * per_mille + 999) / 1000, seen = 0;
    if (rank < 1)
        rank = 1;
    for (unsigned i = 0; i < LAT_BUCKETS; i++) {
        seen += h->log[i];
        if (seen >= rank)
            return lat_bucket_high(i);
    }
    return lat_bucket_high(LAT_BUCKETS - 1);
}

/* proc/latency.c: bucket bounds are contiguous and within 25%, quantiles
 * land in the bucket holding the rank, Prometheus buckets split at their
 * bounds. */
#include "unit.h"

#include "proc/latency.h"

TEST(buckets_contiguous_and_monotonic)
{
    for (unsigned i = 1; i < LAT_BUCKETS - 1; i++) {
        uint64_t lo = lat_bucket_high(i - 1) + 1, hi = lat_bucket_high(i);
        if (!CHECK(lat_bucket(lo) == i && lat_bucket(hi) == i)) {
            UNIT_NOTE("bucket %u: [%llu, %llu]", i, (unsigned long long)lo,
                      (unsigned long long)hi);
            break;
        }
        /* the relative width stays at most 1/4 past the exact range */
        if (i >= 4 && !CHECK((hi - lo + 1) * 4 <= lo))
            break;
    }
    CHECK(lat_bucket(0) == 0 && lat_bucket(3) == 3 && lat_bucket(4) == 4);
    CHECK(lat_bucket(UINT64_MAX) == LAT_BUCKETS - 1);
}

TEST(quantiles)
{
    static struct sb_latency h;
    memset(&h, 0, sizeof h);
    CHECK(lat_quantile(&h, 500) == 0);
    for (int k = 0; k < 90; k++)
        lat_record(&h, 100);
    for (int k = 0; k < 9; k++)
        lat_record(&h, 300000);
    lat_record(&h, 2000000);
    CHECK(lat_count(&h) == 100);
    uint64_t p50 = lat_quantile(&h, 500), p90 = lat_quantile(&h, 900);
    uint64_t p99 = lat_quantile(&h, 990), p999 = lat_quantile(&h, 999);
    CHECK(p50 >= 100 && p50 < 125);
    CHECK(p90 >= 100 && p90 < 125);  /* rank 90 is the last fast one */
    CHECK(p99 >= 300000 && p99 < 375000);
    CHECK(p999 >= 2000000 && p999 < 2500000);
    CHECK(h.sum_us == 90 * 100 + 9 * 300000 + 2000000);
}

TEST(prometheus_bounds_inclusive)
{
    static struct sb_latency h;
    memset(&h, 0, sizeof h);
    lat_record(&h, 100);            /* le=0.0001 */
    lat_record(&h, 101);            /* le=0.00025 */
    lat_record(&h, 10000000);       /* le=10 */
    lat_record(&h, 10000001);       /* +Inf */
    CHECK(h.prom[0] == 1 && h.prom[1] == 1);
    CHECK(h.prom[LAT_PROM_BOUNDS - 1] == 1 && h.prom[LAT_PROM_BOUNDS] == 1);
}

TEST(merge_adds)
{
    static struct sb_latency a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    lat_record(&a, 5);
    lat_record(&b, 5);
    lat_record(&b, 700);
    lat_merge(&a, &b);
    CHECK(lat_count(&a) == 3 && a.sum_us == 710 && a.log[lat_bucket(5)] == 2);
}


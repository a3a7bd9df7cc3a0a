#include "bench/rate.h"

#include <math.h>

void rate_init(struct rate *r, double per_sec, int64_t t0_ns)
{
    r->t0_ns = t0_ns;
    r->interval_ns = 1e9 / per_sec;
    r->taken = 0;
}

void rate_init_share(struct rate *r, double total_per_sec, uint32_t i_conn,
                     uint32_t n_conns, int64_t t0_ns)
{
    rate_init(r, total_per_sec / n_conns, t0_ns + (int64_t)(1e9 * i_conn / total_per_sec));
}

uint64_t rate_due(const struct rate *r, int64_t now_ns)
{
    if (now_ns < r->t0_ns)
        return 0;
    /* Index of the last request due by now, from the inverse of rate_at;
     * the floating-point guess is corrected against rate_at itself so the
     * two never disagree at a boundary. */
    uint64_t last = (uint64_t)floor((double)(now_ns - r->t0_ns) / r->interval_ns);
    while (last > 0 && rate_at(r, last) > now_ns)
        last--;
    while (rate_at(r, last + 1) <= now_ns)
        last++;
    return last + 1 > r->taken ? last + 1 - r->taken : 0;
}

int64_t rate_take(struct rate *r)
{
    return rate_at(r, r->taken++);
}

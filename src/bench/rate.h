/* The open-loop schedule of `herd load --rate`: request k of a connection
 * is due at t0 + k * interval, whatever happened to the requests before it.
 * A late send does not move later ones, and latency is measured from the
 * due time, so a server that stalls shows the stall in every request that
 * waited for it (coordinated-omission correction, as in wrk2). */
#ifndef HERD_BENCH_RATE_H
#define HERD_BENCH_RATE_H

#include <stdint.h>

struct rate {
    int64_t t0_ns;       /* when request 0 is due */
    double interval_ns;  /* between two requests */
    uint64_t taken;      /* requests handed out so far */
};

/* per_sec > 0. Request 0 is due at t0_ns. */
void rate_init(struct rate *r, double per_sec, int64_t t0_ns);

/* Request i of connection i_conn among n_conns sharing total_per_sec:
 * each connection gets total/n, and connection i starts i/total seconds
 * after t0 so that the sends of all connections interleave evenly. */
void rate_init_share(struct rate *r, double total_per_sec, uint32_t i_conn,
                     uint32_t n_conns, int64_t t0_ns);

/* When request k is due. */
static inline int64_t rate_at(const struct rate *r, uint64_t k)
{
    return r->t0_ns + (int64_t)((double)k * r->interval_ns);
}

/* When the next request not yet taken is due. */
static inline int64_t rate_next(const struct rate *r)
{
    return rate_at(r, r->taken);
}

/* How many requests not yet taken are due at now_ns (0 when none). */
uint64_t rate_due(const struct rate *r, int64_t now_ns);

/* Takes the next request and returns its due time: the time its latency
 * is measured from. */
int64_t rate_take(struct rate *r);

#endif

/* Timeout queues for timeouts that are all equal (header, keep-alive, send):
 * a FIFO per timeout, so arming or re-arming a timer is an O(1) move to the
 * tail and expiry scans only the entries that are due (the lwan-tq idea).
 * Nodes are embedded in their owner; get back with container_of. */
#ifndef HERD_TIMERQ_H
#define HERD_TIMERQ_H

#include <stddef.h>
#include <stdint.h>

struct tq_node {
    struct tq_node *prev, *next; /* NULL when not queued */
    int64_t deadline_ms;
};

struct timerq {
    struct tq_node head; /* sentinel of a circular list */
    int64_t timeout_ms;
};

#define container_of(ptr, type, member) \
    ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

void tq_init(struct timerq *q, int64_t timeout_ms);

static inline int tq_linked(const struct tq_node *n) { return n->next != NULL; }

static inline int tq_empty(const struct timerq *q) { return q->head.next == &q->head; }

void tq_unlink(struct tq_node *n);

/* Arms n to expire timeout_ms after now, moving it from any queue it is in. */
void tq_arm(struct timerq *q, struct tq_node *n, int64_t now_ms);

/* Arms n to expire at deadline_ms, which must be no later than now plus
 * the queue's timeout (so tq_arm still appends in order). It walks back
 * from the tail past the entries due later: for re-queueing an owner that
 * extended its own deadline (a request body that kept its rate). */
void tq_arm_at(struct timerq *q, struct tq_node *n, int64_t deadline_ms);

/* How much of a timeout_ms wait that ends at deadline_ms has passed at
 * now_ms, in [0, timeout_ms] (a connection that moves to another process
 * keeps it), and the deadline of such a wait that has passed waited_ms. */
static inline uint32_t tq_waited_of(int64_t timeout_ms, int64_t deadline_ms, int64_t now_ms)
{
    int64_t w = timeout_ms - (deadline_ms - now_ms);
    return w <= 0 ? 0 : w >= timeout_ms ? (uint32_t)timeout_ms : (uint32_t)w;
}

static inline int64_t tq_deadline_after(int64_t timeout_ms, uint32_t waited_ms, int64_t now_ms)
{
    return now_ms + timeout_ms - ((int64_t)waited_ms < timeout_ms ? (int64_t)waited_ms
                                                                  : timeout_ms);
}

/* How long n has waited in q (0 when it is not queued). */
static inline uint32_t tq_waited(const struct timerq *q, const struct tq_node *n,
                                 int64_t now_ms)
{
    return tq_linked(n) ? tq_waited_of(q->timeout_ms, n->deadline_ms, now_ms) : 0;
}

/* Arms n in q as if it had been armed waited_ms ago. */
static inline void tq_arm_waited(struct timerq *q, struct tq_node *n, uint32_t waited_ms,
                                 int64_t now_ms)
{
    tq_arm(q, n, now_ms);
    if (waited_ms)
        tq_arm_at(q, n, tq_deadline_after(q->timeout_ms, waited_ms, now_ms));
}

/* Unlinks and returns the oldest node whose deadline is <= now, or NULL.
 * The caller handles it and calls again; the owner may be freed meanwhile. */
struct tq_node *tq_pop_expired(struct timerq *q, int64_t now_ms);

/* Deadline of the oldest entry, or -1 when empty. */
int64_t tq_next_deadline(const struct timerq *q);

#endif

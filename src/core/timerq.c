#include "core/timerq.h"

void tq_init(struct timerq *q, int64_t timeout_ms)
{
    q->head.prev = q->head.next = &q->head;
    q->head.deadline_ms = 0;
    q->timeout_ms = timeout_ms;
}

void tq_unlink(struct tq_node *n)
{
    if (!n->next)
        return;
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->prev = n->next = NULL;
}

void tq_arm(struct timerq *q, struct tq_node *n, int64_t now_ms)
{
    tq_unlink(n);
    n->deadline_ms = now_ms + q->timeout_ms;
    n->prev = q->head.prev;
    n->next = &q->head;
    q->head.prev->next = n;
    q->head.prev = n;
}

void tq_arm_at(struct timerq *q, struct tq_node *n, int64_t deadline_ms)
{
    tq_unlink(n);
    n->deadline_ms = deadline_ms;
    struct tq_node *after = q->head.prev;
    while (after != &q->head && after->deadline_ms > deadline_ms)
        after = after->prev;
    n->prev = after;
    n->next = after->next;
    after->next->prev = n;
    after->next = n;
}

struct tq_node *tq_pop_expired(struct timerq *q, int64_t now_ms)
{
    struct tq_node *n = q->head.next;
    if (n == &q->head || n->deadline_ms > now_ms)
        return NULL;
    tq_unlink(n);
    return n;
}

int64_t tq_next_deadline(const struct timerq *q)
{
    const struct tq_node *n = q->head.next;
    return n == &q->head ? -1 : n->deadline_ms;
}

/* The timer heap: a binary min-heap of parked coroutines by deadline, one
 * per kernel thread; each coroutine knows its index, so removal is
 * O(log n) and a wait costs no timer syscall. */
#include <errno.h>
#include <stdlib.h>

#include "coro/sched_internal.h"

static void heap_set(struct kthread *t, int i, struct coro *co)
{
    t->heap[i] = co;
    co->heap_idx = i;
}

static void heap_up(struct kthread *t, int i)
{
    struct coro *co = t->heap[i];
    while (i > 0) {
        int p = (i - 1) / 2;
        if (t->heap[p]->deadline <= co->deadline)
            break;
        heap_set(t, i, t->heap[p]);
        i = p;
    }
    heap_set(t, i, co);
}

static void heap_down(struct kthread *t, int i)
{
    struct coro *co = t->heap[i];
    for (;;) {
        int c = 2 * i + 1;
        if (c >= t->nheap)
            break;
        if (c + 1 < t->nheap && t->heap[c + 1]->deadline < t->heap[c]->deadline)
            c++;
        if (t->heap[c]->deadline >= co->deadline)
            break;
        heap_set(t, i, t->heap[c]);
        i = c;
    }
    heap_set(t, i, co);
}

int coro__heap_insert(struct kthread *t, struct coro *co)
{
    if (t->nheap == t->heap_cap) {
        int cap = t->heap_cap ? t->heap_cap * 2 : 256;
        struct coro **h = realloc(t->heap, (size_t)cap * sizeof *h);
        if (!h)
            return -ENOMEM;
        t->heap = h;
        t->heap_cap = cap;
    }
    heap_set(t, t->nheap++, co);
    heap_up(t, t->nheap - 1);
    return 0;
}

void coro__heap_remove(struct kthread *t, struct coro *co)
{
    int i = co->heap_idx;
    if (i < 0)
        return;
    co->heap_idx = -1;
    struct coro *last = t->heap[--t->nheap];
    if (i == t->nheap)
        return;
    heap_set(t, i, last);
    heap_up(t, i);
    heap_down(t, last->heap_idx);
}

/* Coroutine stacks: mmap'd, with an inaccessible guard area below each, so
 * an overflow faults instead of corrupting the neighbour. Only the pages a
 * coroutine touches cost memory. Freed stacks are kept in a pool for reuse.
 *
 * A fault on a guard page is reported by a SIGSEGV handler running on an
 * alternate signal stack (the faulting stack has no room left) with the
 * line "herd: coroutine stack overflow (guard page hit at ADDR)". */
#ifndef HERD_CORO_STACK_H
#define HERD_CORO_STACK_H

#include <stddef.h>

#define CORO_STACK_DEFAULT (64 * 1024)
#define CORO_STACK_MIN (16 * 1024)

struct coro_stack {
    void *lo;      /* usable stack: [lo, lo + size); the guard page is below lo */
    size_t size;
};

/* Tests only: the next this many coro_stack_get calls fail as out of
 * memory would (the scheduler's retry path). */
extern int coro_stack_fail_next;

/* Gets a stack of size bytes (rounded up to pages) from the pool or a new
 * mapping. Returns 0 or -errno. */
int coro_stack_get(struct coro_stack *st, size_t size);
/* Returns a stack to the pool (or unmaps it when the pool is full). */
void coro_stack_put(struct coro_stack *st);

/* Installs the SIGSEGV reporter (once per process) and an alternate signal
 * stack for the calling thread (once per thread). Returns 0 or -errno. */
int coro_stack_guard_thread(void);

/* Tells the reporter which stack the calling thread is running (NULL for
 * its own), so a fault just below it is named an overflow. */
void coro_stack_running(const struct coro_stack *st);

#endif

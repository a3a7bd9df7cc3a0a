/* Drepper's "Futexes Are Tricky" mutex 3: an uncontended lock and unlock
 * are one atomic each, and only a contended unlock makes a syscall. */
#include "coro/kmutex.h"

#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

static void futex_wait(uint32_t *addr, uint32_t val)
{
    syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(uint32_t *addr, int n)
{
    syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

static uint32_t cas(uint32_t *p, uint32_t expect, uint32_t want)
{
    __atomic_compare_exchange_n(p, &expect, want, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
    return expect;
}

int kmutex_trylock(struct kmutex *m)
{
    return cas(&m->state, 0, 1) == 0;
}

void kmutex_lock(struct kmutex *m)
{
    uint32_t c = cas(&m->state, 0, 1);
    if (c == 0)
        return;
    /* A short spin first: critical sections here are a few instructions. */
    for (int i = 0; i < 100 && c == 1; i++) {
        c = __atomic_load_n(&m->state, __ATOMIC_RELAXED);
        if (c == 0 && (c = cas(&m->state, 0, 1)) == 0)
            return;
    }
    if (c != 2)
        c = __atomic_exchange_n(&m->state, 2, __ATOMIC_ACQUIRE);
    while (c != 0) {
        futex_wait(&m->state, 2);
        c = __atomic_exchange_n(&m->state, 2, __ATOMIC_ACQUIRE);
    }
}

void kmutex_unlock(struct kmutex *m)
{
    if (__atomic_exchange_n(&m->state, 0, __ATOMIC_RELEASE) == 2)
        futex_wake(&m->state, 1);
}

void kcond_wait(struct kcond *c, struct kmutex *m)
{
    uint32_t seq = __atomic_load_n(&c->seq, __ATOMIC_RELAXED);
    kmutex_unlock(m);
    futex_wait(&c->seq, seq);
    kmutex_lock(m);
}

void kcond_signal(struct kcond *c)
{
    __atomic_add_fetch(&c->seq, 1, __ATOMIC_RELEASE);
    futex_wake(&c->seq, 1);
}

void kcond_broadcast(struct kcond *c)
{
    __atomic_add_fetch(&c->seq, 1, __ATOMIC_RELEASE);
    futex_wake(&c->seq, INT_MAX);
}

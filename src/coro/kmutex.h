/* A futex-based mutex and condition for the few places kernel threads must
 * wait for each other (run queues, the stack pool, the end of a scheduler).
 * Zero-initialised means unlocked / no waiters. Coroutines never sleep on
 * these for long: a coroutine that waits parks instead (coro_join). */
#ifndef HERD_CORO_KMUTEX_H
#define HERD_CORO_KMUTEX_H

#include <stdint.h>

struct kmutex {
    uint32_t state; /* 0 free, 1 locked, 2 locked with waiters */
};

struct kcond {
    uint32_t seq;
};

void kmutex_lock(struct kmutex *m);
int kmutex_trylock(struct kmutex *m); /* 1 when taken */
void kmutex_unlock(struct kmutex *m);

/* Unlocks m, sleeps until signalled (or spuriously), locks m again. */
void kcond_wait(struct kcond *c, struct kmutex *m);
void kcond_signal(struct kcond *c);
void kcond_broadcast(struct kcond *c);

#endif

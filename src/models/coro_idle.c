/* The coro model's idle connections, oldest first (models/coro_idle.h). */
#include "models/coro_idle.h"

#include <stddef.h>
#include <sys/socket.h>

#include "core/clock.h"
#include "coro/kmutex.h"
#include "models/linger.h"

static struct {
    struct kmutex lock;
    struct coro_idle_link head; /* sentinel; empty while head.next is NULL or &head */
    uint64_t shutting;          /* atomic */
} I;

static void init_locked(void)
{
    if (!I.head.next)
        I.head.next = I.head.prev = &I.head;
}

void coro_idle_add(struct coro_idle_link *l, int fd)
{
    kmutex_lock(&I.lock);
    init_locked();
    l->fd = fd;
    l->since = clock_now_ms();
    l->next = &I.head;
    l->prev = I.head.prev;
    I.head.prev->next = l;
    I.head.prev = l;
    kmutex_unlock(&I.lock);
}

static void unlink_locked(struct coro_idle_link *l)
{
    l->prev->next = l->next;
    l->next->prev = l->prev;
    l->prev = l->next = NULL;
}

void coro_idle_remove(struct coro_idle_link *l)
{
    kmutex_lock(&I.lock);
    if (l->next)
        unlink_locked(l);
    kmutex_unlock(&I.lock);
}

void coro_idle_closed(struct coro_idle_link *l)
{
    if (__atomic_load_n(&l->shut, __ATOMIC_ACQUIRE))
        __atomic_sub_fetch(&I.shutting, 1, __ATOMIC_ACQ_REL);
}

int coro_idle_make_room(void)
{
    int done = 0;
    int64_t now = clock_now_ms();
    kmutex_lock(&I.lock);
    init_locked();
    struct coro_idle_link *l = I.head.next;
    for (int i = 0; i < IDLE_VICTIM_LOOKS && l != &I.head; i++, l = l->next) {
        /* the ones after it turned idle later still (the acceptor looks
         * again in 10 ms) */
        int64_t idle = now - l->since;
        if (idle_victim_from(idle <= 0 ? 0 : idle > UINT32_MAX ? UINT32_MAX : (uint32_t)idle, now))
            break;
        /* its next request already sent: closing would lose it for a
         * client that does not retry */
        if (linger_input_waiting(l->fd))
            continue;
        __atomic_add_fetch(&I.shutting, 1, __ATOMIC_ACQ_REL);
        __atomic_store_n(&l->shut, 1, __ATOMIC_RELEASE);
        shutdown(l->fd, SHUT_RDWR);
        unlink_locked(l);
        done = 1;
        break;
    }
    kmutex_unlock(&I.lock);
    return done;
}

uint64_t coro_idle_shutting(void)
{
    return __atomic_load_n(&I.shutting, __ATOMIC_ACQUIRE);
}

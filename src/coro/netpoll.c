/* The netpoll: each kernel thread's epoll instance watches the fds its
 * coroutines wait on (edge-triggered, registered once, moved when a
 * stolen coroutine waits on another thread), wakes the waiters, and ends
 * waits whose deadline passed or that a stop cancels. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "core/clock.h"
#include "coro/sched_internal.h"

/* co, woken through one of its fds, waits on the other no more. Both fds
 * belong to t's epoll, so no event for the other can be handled between
 * the wake and this. */
static void drop_other_wait(struct kthread *t, struct coro *co, int woke_fd)
{
    int other = co->wait_fd == woke_fd ? co->wait_fd2 : co->wait_fd;
    if (other < 0 || co->wait_fd2 < 0)
        return;
    struct pollent *pe = &t->s->pe[other];
    spin_lock(&pe->lock);
    if (pe->waiter == co)
        pe->waiter = NULL;
    spin_unlock(&pe->lock);
}

static void fd_event(struct kthread *t, int fd, uint32_t events)
{
    struct pollent *pe = &t->s->pe[fd];
    spin_lock(&pe->lock);
    if (pe->owner != t->index) {
        /* the fd moved to another thread's epoll since this was queued */
        spin_unlock(&pe->lock);
        return;
    }
    pe->ready |= events;
    struct coro *co = pe->waiter;
    if (co && (events & pe->wanted)) {
        pe->waiter = NULL;
        /* The waiter consumes the data edge; a hang-up or error stays
         * noted, since a read that drains the data will see no new edge. */
        pe->ready &= ~(pe->wanted & (EPOLLIN | EPOLLOUT));
    } else {
        co = NULL;
    }
    spin_unlock(&pe->lock);
    if (co) {
        drop_other_wait(t, co, fd);
        coro__heap_remove(t, co);
        coro__wake(co, 0);
    }
}

static void unwait(struct kthread *t, struct coro *co, int result)
{
    coro__heap_remove(t, co);
    if (co->stack_retry) { /* sched.c run(): its own result stands */
        co->stack_retry = 0;
        result = co->wait_result;
    }
    if (co->wake) {
        co->wake->waiter = NULL;
        co->wake = NULL;
    }
    int fds[2] = {co->wait_fd, co->wait_fd2};
    for (int i = 0; i < 2; i++) {
        if (fds[i] < 0)
            continue;
        struct pollent *pe = &t->s->pe[fds[i]];
        spin_lock(&pe->lock);
        if (pe->waiter == co)
            pe->waiter = NULL;
        spin_unlock(&pe->lock);
    }
    coro__wake(co, result);
}

static void expire(struct kthread *t)
{
    int64_t now = clock_now_ms();
    while (t->nheap && t->heap[0]->deadline <= now)
        unwait(t, t->heap[0], -ETIMEDOUT);
}

static void cancel_waits(struct kthread *t, int level)
{
    if (!t->nheap)
        return;
    struct coro **copy = malloc((size_t)t->nheap * sizeof *copy);
    if (!copy)
        return;
    int n = t->nheap;
    memcpy(copy, t->heap, (size_t)n * sizeof *copy);
    for (int i = 0; i < n; i++)
        if (copy[i]->heap_idx >= 0 && coro_stop_ends(level, copy[i]->interruptible))
            unwait(t, copy[i], -ECANCELED);
    free(copy);
}

void coro__poll(struct kthread *t, int timeout)
{
    struct epoll_event ev[MAX_EVENTS];
    if (timeout) {
        __atomic_store_n(&t->sleeping, 1, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&t->count, __ATOMIC_SEQ_CST) ||
            (t->s->started && !__atomic_load_n(&t->s->nlive, __ATOMIC_SEQ_CST)))
            timeout = 0;
    }
    int n = epoll_wait(t->epfd, ev, MAX_EVENTS, timeout);
    __atomic_store_n(&t->sleeping, 0, __ATOMIC_SEQ_CST);
    clock_update();
    for (int i = 0; i < n; i++) {
        if (ev[i].data.u64 == WAKE_TAG) {
            uint64_t v;
            if (read(t->evfd, &v, sizeof v) < 0) {
                /* already drained */
            }
            continue;
        }
        if (ev[i].data.u64 == WATCH_TAG) {
            t->watch_fn(t->watch_arg);
            continue;
        }
        fd_event(t, (int)ev[i].data.u64, ev[i].events);
    }
    int level = __atomic_load_n(&t->s->stop_level, __ATOMIC_ACQUIRE);
    if (level != t->seen_stop) {
        t->seen_stop = level;
        cancel_waits(t, level);
    }
    expire(t);
}

int coro__next_timeout(struct kthread *t)
{
    if (!t->nheap)
        return MAX_SLEEP_MS;
    int64_t w = t->heap[0]->deadline - clock_now_ms();
    /* The coarse clock ticks every few ms: round up, never spin early. */
    return w <= 0 ? 0 : w > MAX_SLEEP_MS ? MAX_SLEEP_MS : (int)w + 2;
}

struct wait_arg {
    struct pollent *pe;
    int fd;
    uint32_t mask;
    int64_t deadline;
    int flags;
    struct pollent *pe2;         /* a second fd, or NULL */
    int fd2;
    uint32_t mask2;
};

/* Ready already (the edge is consumed): 1. Else co waits on pe. */
static int take_or_wait(struct pollent *pe, uint32_t mask, struct coro *co)
{
    spin_lock(&pe->lock);
    if (pe->ready & mask) {
        pe->ready &= ~mask;
        spin_unlock(&pe->lock);
        return 1;
    }
    pe->waiter = co;
    pe->wanted = mask;
    spin_unlock(&pe->lock);
    return 0;
}

static int wait_commit(struct coro *co, void *arg)
{
    struct wait_arg *w = arg;
    struct kthread *t = co->thread;
    co->wait_result = 0;
    if (w->pe && take_or_wait(w->pe, w->mask, co))
        return 1;
    if (w->pe2 && take_or_wait(w->pe2, w->mask2, co)) {
        spin_lock(&w->pe->lock);
        if (w->pe->waiter == co)
            w->pe->waiter = NULL;
        spin_unlock(&w->pe->lock);
        return 1;
    }
    co->wait_fd2 = w->pe2 ? w->fd2 : -1;
    co->wait_fd = w->pe ? w->fd : -1;
    co->interruptible = (uint8_t)(w->flags & (CORO_INTERRUPTIBLE | CORO_DRAINING));
    co->deadline = w->deadline < 0 ? INT64_MAX : w->deadline;
    /* Every wait sits in the heap, even without a deadline: a stop finds
     * them all there. */
    if (coro__heap_insert(t, co) < 0) {
        unwait(t, co, -ENOMEM);
        return 0;
    }
    return 0;
}

static int stop_applies(struct sched *s, int flags)
{
    return coro_stop_ends(__atomic_load_n(&s->stop_level, __ATOMIC_ACQUIRE), flags);
}

/* Makes t's epoll the one that watches fd. */
static int fd_claim(struct kthread *t, int fd)
{
    struct sched *s = t->s;
    struct pollent *pe = &s->pe[fd];
    spin_lock(&pe->lock);
    int old = pe->owner;
    if (old != t->index) {
        pe->owner = t->index;
        pe->ready = 0;
        pe->waiter = NULL;
    }
    spin_unlock(&pe->lock);
    if (old == t->index)
        return 0;
    /* First wait here (or the coroutine was stolen): move the fd to this
     * thread's epoll. ADD reports readiness that is already there. */
    if (old >= 0)
        epoll_ctl(s->t[old].epfd, EPOLL_CTL_DEL, fd, NULL);
    struct epoll_event e = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
                            .data.u64 = (uint64_t)fd};
    if (epoll_ctl(t->epfd, EPOLL_CTL_ADD, fd, &e) < 0) {
        int err = errno;
        coro_fd_forget(fd);
        return -err;
    }
    return 0;
}

static uint32_t wait_mask(uint32_t events)
{
    uint32_t mask = events | EPOLLERR | EPOLLHUP;
    if (events & EPOLLIN)
        mask |= EPOLLRDHUP;
    return mask;
}

int coro_wait_fd(int fd, uint32_t events, int64_t deadline_ms, int flags)
{
    struct kthread *t = coro__self();
    struct sched *s = t->s;
    if (fd < 0 || fd >= s->max_fds)
        return -EBADF;
    if (stop_applies(s, flags))
        return -ECANCELED;
    int err = fd_claim(t, fd);
    if (err < 0)
        return err;
    struct wait_arg w = {&s->pe[fd], fd, wait_mask(events), deadline_ms, flags, NULL, -1, 0};
    return coro__park(wait_commit, &w);
}

int coro_wait_fd2(int fd, uint32_t events, int fd2, uint32_t events2, int64_t deadline_ms,
                  int flags)
{
    struct kthread *t = coro__self();
    struct sched *s = t->s;
    if (fd < 0 || fd >= s->max_fds || fd2 < 0 || fd2 >= s->max_fds || fd == fd2)
        return -EBADF;
    if (stop_applies(s, flags))
        return -ECANCELED;
    int err = fd_claim(t, fd);
    if (err == 0)
        err = fd_claim(t, fd2);
    if (err < 0)
        return err;
    struct wait_arg w = {&s->pe[fd], fd, wait_mask(events), deadline_ms, flags,
                         &s->pe[fd2], fd2, wait_mask(events2)};
    return coro__park(wait_commit, &w);
}

struct coro *coro_spawn_on_ready(int fd, uint32_t events, int64_t deadline_ms, int flags,
                                 coro_fn *fn, void *arg)
{
    struct kthread *t = coro__self();
    struct sched *s = t->s;
    if (fd < 0 || fd >= s->max_fds)
        return NULL;
    struct coro *co = coro__new(fn, arg, 0);
    if (!co)
        return NULL;
    if (fd_claim(t, fd) < 0) {
        coro__free(co);
        return NULL;
    }
    co->thread = t;
    __atomic_add_fetch(&s->nlive, 1, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&t->load, 1, __ATOMIC_RELAXED);
    if (stop_applies(s, flags)) {
        co->wait_result = -ECANCELED;
        coro__runq_push(t, co);
        return co;
    }
    struct wait_arg w = {&s->pe[fd], fd, wait_mask(events), deadline_ms, flags, NULL, -1, 0};
    if (wait_commit(co, &w))
        coro__runq_push(t, co);
    return co;
}

int coro_start_result(void) { return coro__self()->current->wait_result; }

void coro_fd_forget(int fd)
{
    struct kthread *t = coro__self();
    struct sched *s = t->s;
    if (fd < 0 || fd >= s->max_fds)
        return;
    struct pollent *pe = &s->pe[fd];
    spin_lock(&pe->lock);
    int old = pe->owner;
    pe->owner = -1;
    pe->ready = 0;
    pe->waiter = NULL;
    spin_unlock(&pe->lock);
    if (old >= 0)
        epoll_ctl(s->t[old].epfd, EPOLL_CTL_DEL, fd, NULL);
}

uint32_t coro_fd_take_unwaited(int fd)
{
    struct kthread *t = coro__self();
    struct sched *s = t->s;
    if (fd < 0 || fd >= s->max_fds)
        return EPOLLIN;
    struct pollent *pe = &s->pe[fd];
    const uint32_t input = EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR;
    spin_lock(&pe->lock);
    uint32_t r = pe->owner != t->index ? EPOLLIN : pe->waiter ? 0 : pe->ready & input;
    if (pe->owner == t->index && !pe->waiter)
        pe->ready &= ~input;
    spin_unlock(&pe->lock);
    return r;
}

int coro_sleep(int64_t ms)
{
    struct kthread *t = coro__self();
    if (stop_applies(t->s, CORO_INTERRUPTIBLE))
        return -ECANCELED;
    struct wait_arg w = {NULL, -1, 0, clock_now_ms() + ms, CORO_INTERRUPTIBLE};
    int r = coro__park(wait_commit, &w);
    return r == -ETIMEDOUT ? 0 : r;
}

struct wake_arg {
    struct coro_wake *w;
    int64_t deadline;
    int flags;
};

static int wake_commit(struct coro *co, void *arg)
{
    struct wake_arg *a = arg;
    if (a->w->fired) {
        co->wait_result = a->w->result;
        return 1;
    }
    co->wait_result = 0;
    co->wait_fd = -1;
    co->wait_fd2 = -1;
    co->interruptible = (uint8_t)(a->flags & (CORO_INTERRUPTIBLE | CORO_DRAINING));
    co->deadline = a->deadline < 0 ? INT64_MAX : a->deadline;
    a->w->waiter = co;
    co->wake = a->w;
    /* in the heap even without a deadline: a stop finds it there */
    if (coro__heap_insert(co->thread, co) < 0)
        unwait(co->thread, co, -ENOMEM);
    return 0;
}

int coro_wait_wake(struct coro_wake *w, int64_t deadline_ms, int flags)
{
    struct kthread *t = coro__self();
    if (w->fired)
        return w->result;
    if (stop_applies(t->s, flags))
        return -ECANCELED;
    struct wake_arg a = {w, deadline_ms, flags};
    return coro__park(wake_commit, &a);
}

void coro_wake_fire(struct coro_wake *w, int result)
{
    w->fired = 1;
    w->result = result;
    struct coro *co = w->waiter;
    if (!co)
        return;
    w->waiter = NULL;
    co->wake = NULL;
    coro__heap_remove(co->thread, co);
    coro__wake(co, result);
}

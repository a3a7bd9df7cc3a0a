#include "coro/sched.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/clock.h"
#include "coro/stack.h"
#include "coro/switch.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CORO_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define CORO_ASAN 1
#endif
#ifdef CORO_ASAN
#include <sanitizer/common_interface_defs.h>
#define ASAN_START(fake, lo, size) __sanitizer_start_switch_fiber(fake, lo, size)
#define ASAN_FINISH(fake, lo, size) __sanitizer_finish_switch_fiber(fake, lo, size)
#else
#define ASAN_START(fake, lo, size) ((void)(fake), (void)(lo), (void)(size))
#define ASAN_FINISH(fake, lo, size) ((void)(fake), (void)(lo), (void)(size))
#endif

#define WAKE_TAG UINT64_MAX
#define MAX_EVENTS 256
#define POLL_EVERY 64      /* runs between non-blocking polls of a busy thread */
#define MAX_SLEEP_MS 1000

struct kthread;
typedef int commit_fn(struct coro *co, void *arg);

struct coro {
    struct coro_ctx ctx;
    struct coro_stack stack;
    struct coro *next;          /* run queue link */
    struct kthread *thread;     /* running on, or parked on */
    coro_fn *fn;
    void *arg, *result;
    commit_fn *commit;          /* decides, once switched out, whether to park */
    void *commit_arg;
    int64_t deadline;
    int heap_idx;               /* -1 when not in a timer heap */
    int wait_fd;                /* -1 unless parked on an fd */
    int wait_result;
    uint8_t interruptible, pinned, joinable, exiting;
    uint32_t lock;              /* guards done and joiner */
    uint8_t done;
    struct coro *joiner;
    void *asan_fake;
};

struct kthread {
    struct sched *s;
    int index;
    pthread_t tid;
    struct coro_ctx ctx;        /* the scheduler loop's own context */
    struct coro *current;
    struct coro *pending;       /* yielded directly to another: queue it once switched out */
    uint32_t lock;              /* spin lock: guards head, tail, count */
    struct coro *head, *tail;
    uint32_t count;
    int sleeping;
    int epfd, evfd;
    struct coro **heap;
    int nheap, heap_cap;
    int64_t load;
    int seen_stop;
    uint64_t ticks;
    void *asan_fake;
    const void *asan_lo;
    size_t asan_size;
} __attribute__((aligned(64)));

/* Per fd: which thread's epoll has it, what it reported, who waits. */
struct pollent {
    uint32_t lock;
    int owner;                  /* thread index, -1 when not registered */
    uint32_t ready;             /* events seen and not yet consumed by a wait */
    uint32_t wanted;
    struct coro *waiter;
};

struct sched {
    struct sched_opts o;
    int n;
    struct kthread *t;
    struct pollent *pe;
    int max_fds;
    int64_t nlive;
    int started, stop_level, threads_started;
    int done_fd;
    uint64_t steals;
};

static __thread struct kthread *cur;

/* Not inlined: a coroutine may resume on another kernel thread, and the
 * compiler must not keep an old thread's TLS address across a switch. */
__attribute__((noinline)) static struct kthread *self(void)
{
    struct kthread *t = cur;
    __asm__ volatile("" ::: "memory");
    return t;
}

/* Run queues and poll entries are held for a few instructions: a spin
 * lock whose unlock is a plain store beats a futex mutex's two atomics. */
static void spin_lock(uint32_t *l)
{
    while (__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE))
        while (__atomic_load_n(l, __ATOMIC_RELAXED))
#if defined(__x86_64__)
            __builtin_ia32_pause();
#else
            __asm__ volatile("" ::: "memory");
#endif
}

static void spin_unlock(uint32_t *l) { __atomic_store_n(l, 0, __ATOMIC_RELEASE); }

/* ---- timer heap (per thread, touched only by its thread) ---- */

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

static int heap_insert(struct kthread *t, struct coro *co)
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

static void heap_remove(struct kthread *t, struct coro *co)
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

/* ---- run queues ---- */

static void poke(struct kthread *t)
{
    uint64_t one = 1;
    if (write(t->evfd, &one, sizeof one) < 0) {
        /* the counter is full: the thread is awake anyway */
    }
}

static void runq_push(struct kthread *t, struct coro *co)
{
    co->next = NULL;
    spin_lock(&t->lock);
    if (t->tail)
        t->tail->next = co;
    else
        t->head = co;
    t->tail = co;
    uint32_t count = t->count + 1;
    if (t == cur) {
        /* Our own queue: we are awake, no need to order against sleeping. */
        __atomic_store_n(&t->count, count, __ATOMIC_RELAXED);
        spin_unlock(&t->lock);
    } else {
        __atomic_store_n(&t->count, count, __ATOMIC_SEQ_CST);
        spin_unlock(&t->lock);
        if (__atomic_load_n(&t->sleeping, __ATOMIC_SEQ_CST)) {
            poke(t);
            return;
        }
    }
    /* Work is piling up here: wake a sleeping thread so it can steal. */
    struct sched *s = t->s;
    if (count >= 2 && s->n > 1)
        for (int i = 0; i < s->n; i++)
            if (&s->t[i] != t && __atomic_load_n(&s->t[i].sleeping, __ATOMIC_SEQ_CST)) {
                poke(&s->t[i]);
                break;
            }
}

static struct coro *runq_pop(struct kthread *t)
{
    if (!__atomic_load_n(&t->count, __ATOMIC_SEQ_CST))
        return NULL;
    spin_lock(&t->lock);
    struct coro *co = t->head;
    if (co) {
        t->head = co->next;
        if (!t->head)
            t->tail = NULL;
        __atomic_store_n(&t->count, t->count - 1, __ATOMIC_RELAXED);
    }
    spin_unlock(&t->lock);
    return co;
}

/* Takes half of the longest other queue (pinned coroutines stay). */
static struct coro *steal(struct kthread *t)
{
    struct sched *s = t->s;
    struct kthread *v = NULL;
    uint32_t best = 0;
    for (int i = 0; i < s->n; i++) {
        uint32_t c = __atomic_load_n(&s->t[i].count, __ATOMIC_RELAXED);
        if (&s->t[i] != t && c > best) {
            best = c;
            v = &s->t[i];
        }
    }
    if (!v)
        return NULL;
    struct coro *got = NULL, *last = NULL;
    int took = 0;
    spin_lock(&v->lock);
    int want = (int)(v->count + 1) / 2;
    struct coro **pp = &v->head, *prev = NULL;
    while (*pp && took < want) {
        struct coro *co = *pp;
        if (co->pinned) {
            prev = co;
            pp = &co->next;
            continue;
        }
        *pp = co->next;
        co->next = NULL;
        if (last)
            last->next = co;
        else
            got = co;
        last = co;
        took++;
    }
    if (!v->head)
        v->tail = NULL;
    else if (!*pp)
        v->tail = prev;
    __atomic_store_n(&v->count, v->count - (uint32_t)took, __ATOMIC_SEQ_CST);
    spin_unlock(&v->lock);
    if (!got)
        return NULL;
    __atomic_add_fetch(&v->load, -took, __ATOMIC_RELAXED);
    __atomic_add_fetch(&t->load, took, __ATOMIC_RELAXED);
    __atomic_add_fetch(&s->steals, (uint64_t)took, __ATOMIC_RELAXED);
    struct coro *first = got;
    for (struct coro *co = got->next; co;) {
        struct coro *next = co->next;
        co->thread = t;
        runq_push(t, co);
        co = next;
    }
    first->thread = t;
    return first;
}

/* Makes a parked coroutine runnable on the thread it parked on. */
static void wake(struct coro *co, int result)
{
    co->wait_result = result;
    co->wait_fd = -1;
    runq_push(co->thread, co);
}

/* ---- switching ---- */

/* Runs on whatever was switched to: queues a coroutine that yielded
 * straight to another, now that its stack is no longer in use. */
static void after_switch(struct kthread *t)
{
    struct coro *p = t->pending;
    if (p) {
        t->pending = NULL;
        runq_push(t, p);
    }
}

static void to_scheduler(struct coro *co)
{
    struct kthread *t = co->thread;
    ASAN_START(co->exiting ? NULL : &co->asan_fake, t->asan_lo, t->asan_size);
    coro_ctx_switch(&co->ctx, &t->ctx);
    /* Resumed, perhaps by another kernel thread. */
    t = co->thread;
    ASAN_FINISH(co->asan_fake, &t->asan_lo, &t->asan_size);
    after_switch(t);
}

static void coro_main(void *arg)
{
    struct coro *co = arg;
    struct kthread *t = co->thread;
    ASAN_FINISH(NULL, &t->asan_lo, &t->asan_size);
    after_switch(t);
    co->result = co->fn(co->arg);
    co->exiting = 1;
    to_scheduler(co);
}

static int park(commit_fn *fn, void *arg)
{
    struct coro *co = self()->current;
    co->commit = fn;
    co->commit_arg = arg;
    to_scheduler(co);
    return co->wait_result;
}

static void finish(struct kthread *t, struct coro *co)
{
    struct sched *s = t->s;
    __atomic_add_fetch(&t->load, -1, __ATOMIC_RELAXED);
    if (co->joinable) {
        spin_lock(&co->lock);
        co->done = 1;
        struct coro *j = co->joiner;
        spin_unlock(&co->lock);
        if (j)
            wake(j, 0);
    } else {
        coro_stack_put(&co->stack);
        free(co);
    }
    if (__atomic_add_fetch(&s->nlive, -1, __ATOMIC_SEQ_CST) == 0 && s->started) {
        uint64_t one = 1;
        if (write(s->done_fd, &one, sizeof one) < 0) {
            /* cannot fail short of a full counter */
        }
        for (int i = 0; i < s->n; i++)
            poke(&s->t[i]);
    }
}

static int give_stack(struct sched *s, struct coro *co)
{
    if (coro_stack_get(&co->stack, s->o.stack_size) < 0)
        return -1;
    coro_ctx_init(&co->ctx, co->stack.lo, co->stack.size, coro_main, co);
    return 0;
}

static void run(struct kthread *t, struct coro *co)
{
    if (!co->stack.lo && give_stack(t->s, co) < 0) {
        /* Out of memory for a stack: try again in a while. */
        co->deadline = clock_now_ms() + 10;
        if (heap_insert(t, co) < 0)
            runq_push(t, co);
        return;
    }
    co->thread = t;
    t->current = co;
    coro_stack_running(&co->stack);
    ASAN_START(&t->asan_fake, co->stack.lo, co->stack.size);
    coro_ctx_switch(&t->ctx, &co->ctx);
    ASAN_FINISH(t->asan_fake, NULL, NULL);
    /* Coroutines may have yielded straight to each other since: the one
     * switching back here is the current one. */
    co = t->current;
    after_switch(t);
    coro_stack_running(NULL);
    t->current = NULL;
    if (co->exiting) {
        finish(t, co);
        return;
    }
    commit_fn *fn = co->commit;
    co->commit = NULL;
    if (fn(co, co->commit_arg))
        runq_push(t, co);
}

/* ---- netpoll ---- */

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
        heap_remove(t, co);
        wake(co, 0);
    }
}

static void unwait(struct kthread *t, struct coro *co, int result)
{
    heap_remove(t, co);
    if (co->wait_fd >= 0) {
        struct pollent *pe = &t->s->pe[co->wait_fd];
        spin_lock(&pe->lock);
        if (pe->waiter == co)
            pe->waiter = NULL;
        spin_unlock(&pe->lock);
    }
    wake(co, result);
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
        if (copy[i]->heap_idx >= 0 && (level >= 2 || copy[i]->interruptible))
            unwait(t, copy[i], -ECANCELED);
    free(copy);
}

static void poll_once(struct kthread *t, int timeout)
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
        fd_event(t, (int)ev[i].data.u64, ev[i].events);
    }
    int level = __atomic_load_n(&t->s->stop_level, __ATOMIC_ACQUIRE);
    if (level != t->seen_stop) {
        t->seen_stop = level;
        cancel_waits(t, level);
    }
    expire(t);
}

static int next_timeout(struct kthread *t)
{
    if (!t->nheap)
        return MAX_SLEEP_MS;
    int64_t w = t->heap[0]->deadline - clock_now_ms();
    /* The coarse clock ticks every few ms: round up, never spin early. */
    return w <= 0 ? 0 : w > MAX_SLEEP_MS ? MAX_SLEEP_MS : (int)w + 2;
}

static void *thread_main(void *arg)
{
    struct kthread *t = arg;
    struct sched *s = t->s;
    cur = t;
    coro_stack_guard_thread();
    clock_update();
    if (s->o.thread_start)
        s->o.thread_start(t->index, s->o.arg);
    for (;;) {
        struct coro *co = runq_pop(t);
        if (!co && s->n > 1)
            co = steal(t);
        if (co) {
            run(t, co);
            if (++t->ticks % POLL_EVERY == 0)
                poll_once(t, 0);
            continue;
        }
        if (!__atomic_load_n(&s->nlive, __ATOMIC_SEQ_CST))
            break;
        if (s->o.thread_idle)
            s->o.thread_idle(t->index, s->o.arg);
        poll_once(t, next_timeout(t));
    }
    return NULL;
}

/* ---- public ---- */

struct sched *sched_create(const struct sched_opts *o)
{
    struct sched *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->o = *o;
    s->n = o->nthreads > 0 ? o->nthreads : 1;
    if (!s->o.stack_size)
        s->o.stack_size = CORO_STACK_DEFAULT;
#ifdef CORO_ASAN
    /* Redzones make ASan's frames several times larger. */
    s->o.stack_size *= 4;
#endif
    s->done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    s->max_fds = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 1 << 20 ? 1 << 20 : (int)rl.rlim_cur;
    s->pe = calloc((size_t)s->max_fds, sizeof *s->pe);
    s->t = aligned_alloc(64, (size_t)s->n * sizeof *s->t);
    if (s->done_fd < 0 || !s->pe || !s->t)
        goto fail;
    for (int i = 0; i < s->max_fds; i++)
        s->pe[i].owner = -1;
    memset(s->t, 0, (size_t)s->n * sizeof *s->t);
    for (int i = 0; i < s->n; i++) {
        struct kthread *t = &s->t[i];
        t->s = s;
        t->index = i;
        t->epfd = epoll_create1(EPOLL_CLOEXEC);
        t->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        struct epoll_event e = {.events = EPOLLIN, .data.u64 = WAKE_TAG};
        if (t->epfd < 0 || t->evfd < 0 || epoll_ctl(t->epfd, EPOLL_CTL_ADD, t->evfd, &e) < 0) {
            s->n = i + 1;
            goto fail;
        }
    }
    return s;
fail:
    sched_destroy(s);
    return NULL;
}

int sched_start(struct sched *s)
{
    __atomic_store_n(&s->started, 1, __ATOMIC_SEQ_CST);
    if (!__atomic_load_n(&s->nlive, __ATOMIC_SEQ_CST)) {
        uint64_t one = 1;
        if (write(s->done_fd, &one, sizeof one) < 0) {
            /* cannot fail */
        }
    }
    for (int i = 0; i < s->n; i++) {
        if (pthread_create(&s->t[i].tid, NULL, thread_main, &s->t[i]) != 0)
            return -EAGAIN;
        s->threads_started = i + 1;
    }
    return 0;
}

int sched_done_fd(const struct sched *s) { return s->done_fd; }

void sched_stop(struct sched *s, int level)
{
    int old = __atomic_load_n(&s->stop_level, __ATOMIC_ACQUIRE);
    if (level <= old)
        return;
    __atomic_store_n(&s->stop_level, level, __ATOMIC_RELEASE);
    for (int i = 0; i < s->n; i++)
        poke(&s->t[i]);
}

void sched_destroy(struct sched *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->threads_started; i++)
        pthread_join(s->t[i].tid, NULL);
    for (int i = 0; s->t && i < s->n; i++) {
        if (s->t[i].epfd > 0)
            close(s->t[i].epfd);
        if (s->t[i].evfd > 0)
            close(s->t[i].evfd);
        free(s->t[i].heap);
    }
    if (s->done_fd >= 0)
        close(s->done_fd);
    free(s->t);
    free(s->pe);
    free(s);
}

int64_t sched_load(const struct sched *s, int i)
{
    return __atomic_load_n(&s->t[i].load, __ATOMIC_RELAXED);
}

uint64_t sched_steals(const struct sched *s) { return __atomic_load_n(&s->steals, __ATOMIC_RELAXED); }

static struct coro *coro_new(coro_fn *fn, void *arg, int joinable)
{
    struct coro *co = calloc(1, sizeof *co);
    if (!co)
        return NULL;
    co->fn = fn;
    co->arg = arg;
    co->joinable = (uint8_t)joinable;
    co->heap_idx = -1;
    co->wait_fd = -1;
    return co;
}

struct coro *coro_spawn(struct sched *s, int thread, int joinable, coro_fn *fn, void *arg)
{
    struct coro *co = coro_new(fn, arg, joinable);
    if (!co)
        return NULL;
    if (give_stack(s, co) < 0) {
        free(co);
        return NULL;
    }
    if (thread < 0 || thread >= s->n) {
        thread = 0;
        for (int i = 1; i < s->n; i++)
            if (sched_load(s, i) < sched_load(s, thread))
                thread = i;
    }
    struct kthread *t = &s->t[thread];
    co->thread = t;
    __atomic_add_fetch(&s->nlive, 1, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&t->load, 1, __ATOMIC_RELAXED);
    runq_push(t, co);
    return co;
}

static int join_commit(struct coro *co, void *arg)
{
    struct coro *target = arg;
    spin_lock(&target->lock);
    int done = target->done;
    if (!done)
        target->joiner = co;
    spin_unlock(&target->lock);
    co->wait_result = 0;
    return done;
}

void *coro_join(struct coro *co)
{
    spin_lock(&co->lock);
    int done = co->done;
    spin_unlock(&co->lock);
    if (!done)
        park(join_commit, co);
    void *r = co->result;
    coro_stack_put(&co->stack);
    free(co);
    return r;
}

static int yield_commit(struct coro *co, void *arg)
{
    (void)arg;
    co->wait_result = 0;
    return 1;
}

void coro_yield(void)
{
#ifndef CORO_ASAN
    /* The fast path: switch straight to the next runnable coroutine, one
     * register swap instead of two. Every POLL_EVERY-th yield goes through
     * the scheduler so the netpoll and timers still run. (Under ASan every
     * switch goes through the scheduler, whose stack ASan must track.) */
    struct kthread *t = self();
    if (++t->ticks % POLL_EVERY) {
        struct coro *next = runq_pop(t);
        if (next && !next->stack.lo && give_stack(t->s, next) < 0) {
            runq_push(t, next); /* no stack for it yet: the scheduler retries */
            next = NULL;
        }
        if (next) {
            struct coro *co = t->current;
            t->pending = co;
            next->thread = t;
            t->current = next;
            coro_stack_running(&next->stack);
            coro_ctx_switch(&co->ctx, &next->ctx);
            after_switch(co->thread);
            return;
        }
    }
#endif
    park(yield_commit, NULL);
}

struct wait_arg {
    struct pollent *pe;
    int fd;
    uint32_t mask;
    int64_t deadline;
    int flags;
};

static int wait_commit(struct coro *co, void *arg)
{
    struct wait_arg *w = arg;
    struct kthread *t = co->thread;
    co->wait_result = 0;
    if (w->pe) {
        spin_lock(&w->pe->lock);
        if (w->pe->ready & w->mask) {
            w->pe->ready &= ~w->mask;
            spin_unlock(&w->pe->lock);
            return 1;
        }
        w->pe->waiter = co;
        w->pe->wanted = w->mask;
        spin_unlock(&w->pe->lock);
    }
    co->wait_fd = w->pe ? w->fd : -1;
    co->interruptible = (uint8_t)(w->flags & CORO_INTERRUPTIBLE);
    co->deadline = w->deadline < 0 ? INT64_MAX : w->deadline;
    /* Every wait sits in the heap, even without a deadline: a stop finds
     * them all there. */
    if (heap_insert(t, co) < 0) {
        unwait(t, co, -ENOMEM);
        return 0;
    }
    return 0;
}

static int stop_applies(struct sched *s, int flags)
{
    int level = __atomic_load_n(&s->stop_level, __ATOMIC_ACQUIRE);
    return level >= 2 || (level >= 1 && (flags & CORO_INTERRUPTIBLE));
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
    struct kthread *t = self();
    struct sched *s = t->s;
    if (fd < 0 || fd >= s->max_fds)
        return -EBADF;
    if (stop_applies(s, flags))
        return -ECANCELED;
    int err = fd_claim(t, fd);
    if (err < 0)
        return err;
    struct wait_arg w = {&s->pe[fd], fd, wait_mask(events), deadline_ms, flags};
    return park(wait_commit, &w);
}

struct coro *coro_spawn_on_ready(int fd, uint32_t events, int64_t deadline_ms, int flags,
                                 coro_fn *fn, void *arg)
{
    struct kthread *t = self();
    struct sched *s = t->s;
    if (fd < 0 || fd >= s->max_fds)
        return NULL;
    struct coro *co = coro_new(fn, arg, 0);
    if (!co)
        return NULL;
    if (fd_claim(t, fd) < 0) {
        free(co);
        return NULL;
    }
    co->thread = t;
    __atomic_add_fetch(&s->nlive, 1, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&t->load, 1, __ATOMIC_RELAXED);
    if (stop_applies(s, flags)) {
        co->wait_result = -ECANCELED;
        runq_push(t, co);
        return co;
    }
    struct wait_arg w = {&s->pe[fd], fd, wait_mask(events), deadline_ms, flags};
    if (wait_commit(co, &w))
        runq_push(t, co);
    return co;
}

int coro_start_result(void) { return self()->current->wait_result; }

void coro_fd_forget(int fd)
{
    struct kthread *t = self();
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

int coro_sleep(int64_t ms)
{
    struct kthread *t = self();
    if (stop_applies(t->s, CORO_INTERRUPTIBLE))
        return -ECANCELED;
    struct wait_arg w = {NULL, -1, 0, clock_now_ms() + ms, CORO_INTERRUPTIBLE};
    int r = park(wait_commit, &w);
    return r == -ETIMEDOUT ? 0 : r;
}

int coro_thread_index(void) { return self()->index; }

int coro_stopping(void) { return __atomic_load_n(&self()->s->stop_level, __ATOMIC_ACQUIRE) > 0; }

void coro_pin(int on) { self()->current->pinned = (uint8_t)on; }

#include "coro/sched.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/clock.h"
#include "coro/sched_internal.h"

__thread struct kthread *coro__cur;

struct kthread *coro__self(void)
{
    struct kthread *t = coro__cur;
    __asm__ volatile("" ::: "memory");
    return t;
}

/* ---- run queues ---- */

static void poke(struct kthread *t)
{
    uint64_t one = 1;
    if (write(t->evfd, &one, sizeof one) < 0) {
        /* the counter is full: the thread is awake anyway */
    }
}

void coro__runq_push(struct kthread *t, struct coro *co)
{
    co->next = NULL;
    spin_lock(&t->lock);
    if (t->tail)
        t->tail->next = co;
    else
        t->head = co;
    t->tail = co;
    uint32_t count = t->count + 1;
    if (t == coro__cur) {
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
        coro__runq_push(t, co);
        co = next;
    }
    first->thread = t;
    return first;
}

/* Makes a parked coroutine runnable on the thread it parked on. */
void coro__wake(struct coro *co, int result)
{
    co->wait_result = result;
    co->wait_fd = -1;
    co->wait_fd2 = -1;
    coro__runq_push(co->thread, co);
}

/* ---- switching ---- */

/* Runs on whatever was switched to: queues a coroutine that yielded
 * straight to another, now that its stack is no longer in use. */
static void after_switch(struct kthread *t)
{
    struct coro *p = t->pending;
    if (p) {
        t->pending = NULL;
        coro__runq_push(t, p);
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

int coro__park(commit_fn *fn, void *arg)
{
    struct coro *co = coro__self()->current;
    struct kthread *t = co->thread;
    t->commit = fn;
    t->commit_arg = arg;
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
            coro__wake(j, 0);
    } else {
        coro_stack_put(&co->stack);
        coro__free(co);
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
        /* Out of memory for a stack: try again in a while. The retry's
         * "timeout" is not its wait's: it starts with the result it was
         * woken with (an idle connection whose request came must not
         * read a timeout and close unanswered), and no stop ends it. */
        co->deadline = clock_now_ms() + 10;
        co->stack_retry = 1;
        co->interruptible = 0;
        if (coro__heap_insert(t, co) < 0)
            coro__runq_push(t, co);
        return;
    }
    co->stack_retry = 0;
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
    commit_fn *fn = t->commit;
    t->commit = NULL;
    if (fn(co, t->commit_arg))
        coro__runq_push(t, co);
}

static void *thread_main(void *arg)
{
    struct kthread *t = arg;
    struct sched *s = t->s;
    coro__cur = t;
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
            if (++t->ticks % POLL_EVERY == 0 || t->poll_now) {
                t->poll_now = 0;
                coro__poll(t, 0);
            }
            continue;
        }
        if (!__atomic_load_n(&s->nlive, __ATOMIC_SEQ_CST))
            break;
        if (s->o.thread_idle)
            s->o.thread_idle(t->index, s->o.arg);
        coro__poll(t, coro__next_timeout(t));
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

int sched_watch(struct sched *s, int i, int fd, void (*fn)(void *arg), void *arg)
{
    struct kthread *t = &s->t[i];
    struct epoll_event e = {.events = EPOLLIN | EPOLLET, .data.u64 = WATCH_TAG};
    if (t->watch_fn || epoll_ctl(t->epfd, EPOLL_CTL_ADD, fd, &e) < 0)
        return t->watch_fn ? -EBUSY : -errno;
    t->watch_fn = fn;
    t->watch_arg = arg;
    return 0;
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
        while (s->t[i].spare) {
            struct coro *co = s->t[i].spare;
            s->t[i].spare = co->next;
            free(co);
        }
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

#define SPARE_MAX 256 /* finished records a thread keeps */

/* Records are reused per thread: every keep-alive request on an idle
 * connection spawns a coroutine, and malloc there would be one per request.
 * A record freed on one thread and reused on another is fine: each list is
 * only touched by its own thread (or, outside the threads, not at all). */
void coro__free(struct coro *co)
{
    struct kthread *t = coro__self();
    if (t && t->nspare < SPARE_MAX) {
        co->next = t->spare;
        t->spare = co;
        t->nspare++;
        return;
    }
    free(co);
}

struct coro *coro__new(coro_fn *fn, void *arg, int joinable)
{
    struct kthread *t = coro__self();
    struct coro *co = t ? t->spare : NULL;
    if (co) {
        t->spare = co->next;
        t->nspare--;
        memset(co, 0, sizeof *co);
    } else if (!(co = calloc(1, sizeof *co))) {
        return NULL;
    }
    co->fn = fn;
    co->arg = arg;
    co->joinable = (uint8_t)joinable;
    co->heap_idx = -1;
    co->wait_fd = -1;
    co->wait_fd2 = -1;
    return co;
}

struct coro *coro_spawn(struct sched *s, int thread, int joinable, coro_fn *fn, void *arg)
{
    struct coro *co = coro__new(fn, arg, joinable);
    if (!co)
        return NULL;
    if (give_stack(s, co) < 0) {
        coro__free(co);
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
    coro__runq_push(t, co);
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
        coro__park(join_commit, co);
    void *r = co->result;
    coro_stack_put(&co->stack);
    coro__free(co);
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
    struct kthread *t = coro__self();
    if (++t->ticks % POLL_EVERY) {
        struct coro *next = runq_pop(t);
        if (next && !next->stack.lo && give_stack(t->s, next) < 0) {
            coro__runq_push(t, next); /* no stack for it yet: the scheduler retries */
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
    coro__park(yield_commit, NULL);
}

void coro_yield_polling(void)
{
    coro__self()->poll_now = 1;
    coro__park(yield_commit, NULL);
}

int coro_thread_index(void) { return coro__self()->index; }

int coro_stopping(void) { return __atomic_load_n(&coro__self()->s->stop_level, __ATOMIC_ACQUIRE) > 0; }

void coro_pin(int on) { coro__self()->current->pinned = (uint8_t)on; }

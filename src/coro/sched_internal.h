/* Private to src/coro/sched.c, netpoll.c and timerheap.c: the records of
 * coroutines, kernel threads and watched fds, and the calls between those
 * files (named coro__*). */
#ifndef HERD_CORO_SCHED_INTERNAL_H
#define HERD_CORO_SCHED_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "coro/sched.h"
#include "coro/stack.h"
#include "coro/switch.h"

#include "coro/asan.h"

#ifdef CORO_ASAN
#include <sanitizer/common_interface_defs.h>
#define ASAN_START(fake, lo, size) __sanitizer_start_switch_fiber(fake, lo, size)
#define ASAN_FINISH(fake, lo, size) __sanitizer_finish_switch_fiber(fake, lo, size)
#else
#define ASAN_START(fake, lo, size) do { } while (0)
#define ASAN_FINISH(fake, lo, size) do { } while (0)
#endif

#define WAKE_TAG UINT64_MAX
#define WATCH_TAG (UINT64_MAX - 1)  /* the fd of sched_watch */
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
    union {
        void *arg;              /* until fn starts */
        void *result;           /* once it returned */
    };
    int64_t deadline;
    int heap_idx;               /* -1 when not in a timer heap */
    int wait_fd;                /* -1 unless parked on an fd */
    int wait_fd2;               /* -1 unless parked on a second fd too */
    int wait_result;
    struct coro_wake *wake;     /* NULL unless parked in coro_wait_wake */
    uint8_t interruptible;      /* which stops end its wait: CORO_INTERRUPTIBLE, CORO_DRAINING */
    uint8_t pinned, joinable, exiting;
    uint8_t stack_retry;        /* in the heap only to retry for a stack: its wake keeps
                                 * the result it was woken with */
    uint32_t lock;              /* guards done and joiner */
    uint8_t done;
    struct coro *joiner;
#ifdef CORO_ASAN
    void *asan_fake;
#endif
};

struct kthread {
    struct sched *s;
    int index;
    pthread_t tid;
    struct coro_ctx ctx;        /* the scheduler loop's own context */
    struct coro *current;
    struct coro *pending;       /* yielded directly to another: queue it once switched out */
    commit_fn *commit;          /* set by a parking coroutine: decides, once it */
    void *commit_arg;           /* is switched out, whether it stays parked */
    uint32_t lock;              /* spin lock: guards head, tail, count */
    struct coro *head, *tail;
    uint32_t count;
    int sleeping;
    int epfd, evfd;
    struct coro **heap;
    int nheap, heap_cap;
    struct coro *spare;         /* finished coroutine records kept for reuse, */
    uint32_t nspare;            /* so a keep-alive request spawns without malloc */
    int64_t load;
    int seen_stop;
    uint64_t ticks;
    uint8_t poll_now;           /* coro_yield_polling: poll before the next run */
    void (*watch_fn)(void *);   /* sched_watch */
    void *watch_arg;
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

extern __thread struct kthread *coro__cur;

/* The kernel thread running the caller. Not inlined: a coroutine may
 * resume on another kernel thread, and the compiler must not keep an old
 * thread's TLS address across a switch. */
struct kthread *coro__self(void) __attribute__((noinline));

/* Run queues and poll entries are held for a few instructions: a spin
 * lock whose unlock is a plain store beats a futex mutex's two atomics. */
static inline void spin_lock(uint32_t *l)
{
    while (__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE))
        while (__atomic_load_n(l, __ATOMIC_RELAXED))
#if defined(__x86_64__)
            __builtin_ia32_pause();
#else
            __asm__ volatile("" ::: "memory");
#endif
}

static inline void spin_unlock(uint32_t *l) { __atomic_store_n(l, 0, __ATOMIC_RELEASE); }

/* sched.c */
/* A coroutine record from this thread's spares (or malloc), and back. */
void coro__free(struct coro *co);
struct coro *coro__new(coro_fn *fn, void *arg, int joinable);
void coro__runq_push(struct kthread *t, struct coro *co);
/* Makes a parked coroutine runnable on the thread it parked on. */
void coro__wake(struct coro *co, int result);
/* Switches to the scheduler, which calls fn(co, arg): nonzero requeues co
 * at once, zero leaves it parked. Returns co->wait_result once resumed. */
int coro__park(commit_fn *fn, void *arg);

/* timerheap.c: each thread's waits by deadline (touched by its thread only) */
int coro__heap_insert(struct kthread *t, struct coro *co);
void coro__heap_remove(struct kthread *t, struct coro *co);

/* netpoll.c */
/* One epoll_wait (timeout in ms), then the events, a stop, the deadlines. */
void coro__poll(struct kthread *t, int timeout);
/* How long the thread may sleep: until its nearest deadline. */
int coro__next_timeout(struct kthread *t);

#endif

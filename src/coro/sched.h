/* The M:N scheduler: coroutines (user threads) over N kernel threads.
 *
 * Each kernel thread has its own run queue, its own epoll instance (the
 * netpoll) and its own timer heap. A thread whose queue runs dry steals
 * half of the busiest queue; new coroutines go to the least-loaded thread.
 *
 * A coroutine that would block parks: coro_wait_fd registers interest in
 * its thread's epoll (once per fd, edge-triggered) and sleeps until the fd
 * is ready, its deadline passes, or a stop cancels the wait. Deadlines are
 * entries in the thread's heap: no timer syscall per wait. A parked
 * coroutine is woken on the thread it parked on; only runnable ones move.
 *
 * Functions named coro_* other than coro_spawn must run inside a
 * coroutine. Errors are -errno. */
#ifndef HERD_CORO_SCHED_H
#define HERD_CORO_SCHED_H

#include <stddef.h>
#include <stdint.h>

struct sched;
struct coro;

typedef void *coro_fn(void *arg);

struct sched_opts {
    int nthreads;
    size_t stack_size;                        /* 0: CORO_STACK_DEFAULT */
    void (*thread_start)(int index, void *arg); /* in each kernel thread, first */
    void (*thread_idle)(int index, void *arg);  /* before a thread sleeps in epoll */
    void *arg;
};

struct sched *sched_create(const struct sched_opts *o);
/* Starts the kernel threads. They run until every coroutine has ended. */
int sched_start(struct sched *s);
/* Readable (an eventfd) once every coroutine has ended after start. */
int sched_done_fd(const struct sched *s);
/* level 1: coro_stopping() turns true and interruptible waits end with
 * -ECANCELED; level 2: draining waits too; level 3: every wait. Safe from
 * any thread. */
void sched_stop(struct sched *s, int level);
/* Waits for the kernel threads to end, then frees everything. */
void sched_destroy(struct sched *s);
/* Coroutines queued on or running on thread i (a balance figure). */
int64_t sched_load(const struct sched *s, int i);
/* How many coroutines moved between threads by stealing. */
uint64_t sched_steals(const struct sched *s);

/* Creates a coroutine running fn(arg) on thread (-1: the least loaded).
 * A joinable one must be joined (that frees it); others free themselves.
 * NULL when no stack can be had. Callable from anywhere. */
struct coro *coro_spawn(struct sched *s, int thread, int joinable, coro_fn *fn, void *arg);
/* Waits for a joinable coroutine to end; returns what its fn returned. */
void *coro_join(struct coro *co);

void coro_yield(void);
/* Yields, and the thread polls for I/O before it runs another coroutine:
 * the coroutines that wait for I/O get a turn too. A plain yield polls
 * only every POLL_EVERY switches, so a busy coroutine yielding that way
 * would mostly run again at once. */
void coro_yield_polling(void);
/* Sleeps ms milliseconds: 0, or -ECANCELED when a stop interrupts. */
int coro_sleep(int64_t ms);

#define CORO_INTERRUPTIBLE 1 /* a stop at level 1 ends this wait */
#define CORO_DRAINING 2      /* ...at level 2: an idle connection a reload
                              * left behind, which a later stop closes */
/* Whether a stop at level ends a wait with these flags. */
static inline int coro_stop_ends(int level, int flags)
{
    return level >= 3 || (level >= 2 && (flags & CORO_DRAINING)) ||
           (level >= 1 && (flags & CORO_INTERRUPTIBLE));
}

/* Waits until fd may be ready for events (EPOLLIN / EPOLLOUT), until the
 * clock_now_ms() deadline (-1: none), or a stop. 0: retry the call (the fd
 * may still say EAGAIN: loop), -ETIMEDOUT, -ECANCELED, -EBADF for an fd
 * beyond the table. fd must be non-blocking. */
int coro_wait_fd(int fd, uint32_t events, int64_t deadline_ms, int flags);
/* As coro_wait_fd, for whichever of two fds is ready first (a proxy
 * exchange waits on its client and its upstream at once). */
int coro_wait_fd2(int fd, uint32_t events, int fd2, uint32_t events2, int64_t deadline_ms,
                  int flags);
/* A coroutine that starts only once fd is ready for events, its deadline
 * passes or a stop cancels the wait (as coro_wait_fd), and only then gets
 * a stack: a connection idle between requests costs a small record, not a
 * stack. It runs on the calling thread. fn learns why it started from
 * coro_start_result() (0, -ETIMEDOUT, -ECANCELED). NULL on failure. */
struct coro *coro_spawn_on_ready(int fd, uint32_t events, int64_t deadline_ms, int flags,
                                 coro_fn *fn, void *arg);
int coro_start_result(void);

/* A wait for news the coroutine's own kernel thread learns itself, such
 * as a completion its watch (sched_watch) reaps: the coroutine parks
 * until coro_wake_fire, its deadline (clock_now_ms(); -1: none) or a stop
 * (flags as for coro_wait_fd). Returns the fired result, -ETIMEDOUT or
 * -ECANCELED. The record must outlive the wait; a fire after a timeout
 * finds no waiter and only marks it fired. Start it zeroed. */
struct coro_wake {
    struct coro *waiter;
    int fired, result;
};
int coro_wait_wake(struct coro_wake *w, int64_t deadline_ms, int flags);
/* On the thread the waiter parked on: from its watch, or a coroutine
 * running there. */
void coro_wake_fire(struct coro_wake *w, int result);

/* Before sched_start: thread i's netpoll calls fn(arg) in the scheduler
 * (not in a coroutine) whenever fd turns readable. Edge-triggered, so fn
 * drains fd: an eventfd that signals completions. One per thread. */
int sched_watch(struct sched *s, int i, int fd, void (*fn)(void *arg), void *arg);

/* Call before closing an fd that was waited on. */
void coro_fd_forget(int fd);
/* For fds no coroutine waits on (a pool's idle connections): the input,
 * hang-up or error events the netpoll saw on fd since it was last asked
 * and no wait took, cleared as they are returned. An fd this thread does
 * not watch says EPOLLIN: the caller must look for itself. */
uint32_t coro_fd_take_unwaited(int fd);

int coro_thread_index(void);
int coro_stopping(void);
/* A pinned coroutine is never stolen (it holds per-thread state). */
void coro_pin(int on);

#endif

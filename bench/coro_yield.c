/* Context-switch cost: two coroutines on one kernel thread yield to each
 * other N times; each yield is a switch into the scheduler and one out of
 * it (two register swaps) plus a run-queue push and pop. Also times the
 * bare switch (coro_ctx_switch between two contexts, no scheduler).
 * Not a test: prints ns per operation. `make bench-coro`. */
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#include "coro/sched.h"
#include "coro/switch.h"

#define YIELDS 10000000L
#define SWITCHES 50000000L

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void *yielder(void *arg)
{
    (void)arg;
    for (long i = 0; i < YIELDS; i++)
        coro_yield();
    return NULL;
}

static struct coro_ctx main_ctx, other_ctx;

static void bouncer(void *arg)
{
    (void)arg;
    for (;;)
        coro_ctx_switch(&other_ctx, &main_ctx);
}

int main(void)
{
    /* The bare switch: main <-> a second context, SWITCHES round trips. */
    size_t size = 64 * 1024;
    void *stack = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    coro_ctx_init(&other_ctx, stack, size, bouncer, NULL);
    double t0 = now_ns();
    for (long i = 0; i < SWITCHES; i++)
        coro_ctx_switch(&main_ctx, &other_ctx);
    double bare = (now_ns() - t0) / (2.0 * SWITCHES);

    /* Through the scheduler: two coroutines taking turns on one thread. */
    struct sched_opts o = {.nthreads = 1};
    struct sched *s = sched_create(&o);
    coro_spawn(s, 0, 0, yielder, NULL);
    coro_spawn(s, 0, 0, yielder, NULL);
    t0 = now_ns();
    sched_start(s);
    struct pollfd p = {.fd = sched_done_fd(s), .events = POLLIN};
    poll(&p, 1, -1);
    double yield = (now_ns() - t0) / (2.0 * YIELDS);
    sched_destroy(s);
    printf("bare context switch: %.1f ns\n", bare);
    printf("coro_yield between two coroutines (run queue pop+push, one switch; every 64th through the scheduler): %.1f ns\n", yield);
    return 0;
}

/* The coroutine runtime: yield ping-pong at scale, join, stealing, netpoll
 * waits and timeouts, stop, the futex mutex, and the guard page. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "coro/kmutex.h"
#include "coro/sched.h"
#include "coro/stack.h"
#include "unit.h"

static struct sched *mk(int n)
{
    struct sched_opts o = {.nthreads = n};
    return sched_create(&o);
}

/* Runs until every coroutine has ended, then frees s. */
static void finish(struct sched *s)
{
    CHECK_EQ_INT(sched_start(s), 0);
    struct pollfd p = {.fd = sched_done_fd(s), .events = POLLIN};
    CHECK_EQ_INT(poll(&p, 1, 60000), 1);
    sched_destroy(s);
}

/* ---- 10,000 coroutines in 5,000 ping-pong pairs ---- */

#define PAIRS 5000
#define ROUNDS 20

struct pair {
    int turn;  /* 0: ping's move, 1: pong's */
    int hits;
};

static struct pair pairs[PAIRS];

static void *player(void *arg)
{
    uintptr_t v = (uintptr_t)arg;
    struct pair *p = &pairs[v >> 1];
    int me = (int)(v & 1);
    for (int r = 0; r < ROUNDS; r++) {
        while (__atomic_load_n(&p->turn, __ATOMIC_ACQUIRE) != me)
            coro_yield();
        __atomic_add_fetch(&p->hits, 1, __ATOMIC_RELAXED);
        __atomic_store_n(&p->turn, !me, __ATOMIC_RELEASE);
    }
    return NULL;
}

static void pingpong(int threads)
{
    memset(pairs, 0, sizeof pairs);
    struct sched *s = mk(threads);
    CHECK(s != NULL);
    for (uintptr_t i = 0; i < 2 * PAIRS; i++)
        CHECK(coro_spawn(s, -1, 0, player, (void *)i) != NULL);
    finish(s);
    long total = 0;
    for (int i = 0; i < PAIRS; i++)
        total += pairs[i].hits;
    CHECK_EQ_INT(total, 2L * PAIRS * ROUNDS);
}

TEST(pingpong_10000_one_thread) { pingpong(1); }
TEST(pingpong_10000_two_threads) { pingpong(2); }

/* ---- join ---- */

static void *square(void *arg)
{
    uintptr_t v = (uintptr_t)arg;
    coro_yield();
    return (void *)(v * v);
}

static long join_sum;

static struct sched *join_sched;

static void *parent_joins(void *arg)
{
    (void)arg;
    struct coro *kids[100];
    for (uintptr_t i = 0; i < 100; i++)
        kids[i] = coro_spawn(join_sched, -1, 1, square, (void *)i);
    long sum = 0;
    for (int i = 0; i < 100; i++)
        sum += (long)(uintptr_t)coro_join(kids[i]);
    join_sum = sum;
    return NULL;
}

TEST(join_returns_results)
{
    for (int threads = 1; threads <= 2; threads++) {
        join_sum = 0;
        join_sched = mk(threads);
        coro_spawn(join_sched, 0, 0, parent_joins, NULL);
        finish(join_sched);
        CHECK_EQ_INT(join_sum, 328350); /* sum of i*i for i < 100 */
    }
}

/* ---- stealing ---- */

static int ran_on[2];
static int thread1_up;

/* Thread 1 is running: the work below cannot all be done before it starts
 * (the machine may be loaded), so the split measures stealing. */
static void *mark_thread1(void *arg)
{
    (void)arg;
    __atomic_store_n(&thread1_up, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void *busy(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&thread1_up, __ATOMIC_ACQUIRE))
        coro_yield();
    for (int r = 0; r < 50; r++) {
        volatile unsigned x = 0;
        for (int i = 0; i < 20000; i++)
            x += (unsigned)i;
        __atomic_add_fetch(&ran_on[coro_thread_index()], 1, __ATOMIC_RELAXED);
        coro_yield();
    }
    return NULL;
}

TEST(stealing_balances_a_skewed_load)
{
    struct sched *s = mk(2);
    /* Every coroutine starts on thread 0; thread 1 has nothing of its own. */
    for (int i = 0; i < 200; i++)
        coro_spawn(s, 0, 0, busy, NULL);
    CHECK_EQ_INT(sched_load(s, 0), 200);
    CHECK_EQ_INT(sched_load(s, 1), 0);
    coro_spawn(s, 1, 0, mark_thread1, NULL);
    CHECK_EQ_INT(sched_start(s), 0);
    struct pollfd p = {.fd = sched_done_fd(s), .events = POLLIN};
    CHECK_EQ_INT(poll(&p, 1, 60000), 1);
    uint64_t steals = sched_steals(s);
    sched_destroy(s);
    CHECK(steals > 0);
    /* Each thread ran a real share of the work (not an even one: the OS
     * may give a loaded machine's CPUs unevenly). */
    int total = ran_on[0] + ran_on[1];
    CHECK_EQ_INT(total, 200 * 50);
    CHECK(ran_on[1] * 10 > total);
    CHECK(ran_on[0] * 10 > total);
}

TEST(new_coroutines_go_to_the_least_loaded_thread)
{
    struct sched *s = mk(3);
    for (int i = 0; i < 9; i++)
        coro_spawn(s, -1, 0, square, NULL);
    for (int i = 0; i < 3; i++)
        CHECK_EQ_INT(sched_load(s, i), 3);
    finish(s);
}

/* ---- netpoll ---- */

static int pipefd[2];
static int wait_rc, sleep_rc, timeout_rc;
static int64_t waited_ms;

static void *reader(void *arg)
{
    (void)arg;
    int64_t t0 = clock_now_ms();
    char c;
    for (;;) {
        ssize_t n = read(pipefd[0], &c, 1);
        if (n == 1) {
            wait_rc = 0;
            break;
        }
        int r = coro_wait_fd(pipefd[0], EPOLLIN, clock_now_ms() + 5000, 0);
        if (r < 0) {
            wait_rc = r;
            break;
        }
    }
    waited_ms = clock_now_ms() - t0;
    coro_fd_forget(pipefd[0]);
    return NULL;
}

static void *writer(void *arg)
{
    (void)arg;
    sleep_rc = coro_sleep(50);
    if (write(pipefd[1], "x", 1) != 1)
        sleep_rc = -EIO;
    return NULL;
}

static void *times_out(void *arg)
{
    int fd = *(int *)arg;
    timeout_rc = coro_wait_fd(fd, EPOLLIN, clock_now_ms() + 30, 0);
    coro_fd_forget(fd);
    return NULL;
}

TEST(wait_fd_wakes_on_data_and_times_out)
{
    int empty[2];
    CHECK_EQ_INT(pipe2(pipefd, O_NONBLOCK), 0);
    CHECK_EQ_INT(pipe2(empty, O_NONBLOCK), 0);
    struct sched *s = mk(2);
    coro_spawn(s, 0, 0, reader, NULL);
    coro_spawn(s, 1, 0, writer, NULL);
    coro_spawn(s, 1, 0, times_out, &empty[0]);
    finish(s);
    CHECK_EQ_INT(wait_rc, 0);
    CHECK_EQ_INT(sleep_rc, 0);
    CHECK(waited_ms >= 40);
    CHECK_EQ_INT(timeout_rc, -ETIMEDOUT);
    close(pipefd[0]);
    close(pipefd[1]);
    close(empty[0]);
    close(empty[1]);
}

/* coro_wait_fd2: woken by the second fd, then (that wake consumed, the
 * first fd's wait dropped) by the first; a data edge on the first fd while
 * nobody waits is kept for the next wait; with no data, the deadline. */
static int two[2][2];
static int wait2_rc[4];
static int64_t wait2_ms[4];

static void *wait_two(void *arg)
{
    (void)arg;
    for (int i = 0; i < 4; i++) {
        int64_t t0 = clock_now_ms();
        wait2_rc[i] = coro_wait_fd2(two[0][0], EPOLLIN, two[1][0], EPOLLIN,
                                    clock_now_ms() + (i == 3 ? 30 : 5000), 0);
        wait2_ms[i] = clock_now_ms() - t0;
        char c;
        while (read(two[0][0], &c, 1) == 1 || read(two[1][0], &c, 1) == 1) {
        }
        if (i == 1 && write(two[0][1], "z", 1) != 1) /* an edge while nobody waits */
            wait2_rc[i] = -EIO;
    }
    coro_fd_forget(two[0][0]);
    coro_fd_forget(two[1][0]);
    return NULL;
}

static void *feed_two(void *arg)
{
    (void)arg;
    coro_sleep(40);
    if (write(two[1][1], "x", 1) != 1) /* the second fd first */
        wait2_rc[0] = -EIO;
    coro_sleep(40);
    if (write(two[0][1], "y", 1) != 1)
        wait2_rc[1] = -EIO;
    return NULL;
}

TEST(wait_fd2_wakes_on_either_fd_once)
{
    CHECK_EQ_INT(pipe2(two[0], O_NONBLOCK), 0);
    CHECK_EQ_INT(pipe2(two[1], O_NONBLOCK), 0);
    struct sched *s = mk(1);
    coro_spawn(s, 0, 0, wait_two, NULL);
    coro_spawn(s, 0, 0, feed_two, NULL);
    finish(s);
    CHECK_EQ_INT(wait2_rc[0], 0);
    CHECK(wait2_ms[0] >= 30 && wait2_ms[0] < 2000);
    CHECK_EQ_INT(wait2_rc[1], 0);
    CHECK(wait2_ms[1] >= 30 && wait2_ms[1] < 2000);
    CHECK_EQ_INT(wait2_rc[2], 0);
    CHECK(wait2_ms[2] < 20); /* the edge that came while nobody waited */
    CHECK_EQ_INT(wait2_rc[3], -ETIMEDOUT);
    for (int i = 0; i < 2; i++) {
        close(two[i][0]);
        close(two[i][1]);
    }
}

/* coro_fd_take_unwaited (the proxy's idle-pool sweep): an edge on an fd
 * nobody waits on is told once and then cleared; a quiet fd tells nothing;
 * an fd the thread does not watch says EPOLLIN (look for yourself). */
static int unw[2];
static uint32_t unw_seen[4];
static int unw_write_rc;

static void *unwaited_watch(void *arg)
{
    (void)arg;
    /* a wait that times out puts the fd in this thread's epoll */
    coro_wait_fd(unw[0], EPOLLIN, clock_now_ms() + 10, 0);
    unw_seen[0] = coro_fd_take_unwaited(unw[0]);
    unw_write_rc = (int)write(unw[1], "x", 1);
    coro_sleep(30); /* the thread polls meanwhile: the edge finds no waiter */
    unw_seen[1] = coro_fd_take_unwaited(unw[0]);
    unw_seen[2] = coro_fd_take_unwaited(unw[0]);
    coro_fd_forget(unw[0]);
    unw_seen[3] = coro_fd_take_unwaited(unw[0]);
    return NULL;
}

TEST(unwaited_events_are_told_once)
{
    CHECK_EQ_INT(pipe2(unw, O_NONBLOCK), 0);
    struct sched *s = mk(1);
    coro_spawn(s, 0, 0, unwaited_watch, NULL);
    finish(s);
    CHECK_EQ_INT(unw_write_rc, 1);
    CHECK_EQ_INT((int)unw_seen[0], 0);
    CHECK(unw_seen[1] & EPOLLIN);
    CHECK_EQ_INT((int)unw_seen[2], 0);
    CHECK_EQ_INT((int)unw_seen[3], EPOLLIN);
    close(unw[0]);
    close(unw[1]);
}

static int cancel_rc;

static void *idle_waiter(void *arg)
{
    int fd = *(int *)arg;
    cancel_rc = coro_wait_fd(fd, EPOLLIN, -1, CORO_INTERRUPTIBLE);
    coro_fd_forget(fd);
    return NULL;
}

TEST(stop_cancels_interruptible_waits_first)
{
    int p[2];
    CHECK_EQ_INT(pipe2(p, O_NONBLOCK), 0);
    struct sched *s = mk(2);
    coro_spawn(s, 0, 0, idle_waiter, &p[0]);
    CHECK_EQ_INT(sched_start(s), 0);
    usleep(50000);
    sched_stop(s, 1);
    struct pollfd pf = {.fd = sched_done_fd(s), .events = POLLIN};
    CHECK_EQ_INT(poll(&pf, 1, 5000), 1);
    sched_destroy(s);
    CHECK_EQ_INT(cancel_rc, -ECANCELED);
    close(p[0]);
    close(p[1]);
}

/* Three waits, one of each class; each level of stop ends its own class
 * and the ones below it, never one above (a reload's stop leaves the
 * draining connections waiting; a TERM after it ends them; only the last
 * level ends a wait for a request that is on its way). */
static int level_rc[3] = {1, 1, 1};

struct level_wait {
    int fd, flags, slot;
};

static void *level_waiter(void *arg)
{
    struct level_wait *w = arg;
    level_rc[w->slot] = coro_wait_fd(w->fd, EPOLLIN, -1, w->flags);
    coro_fd_forget(w->fd);
    return NULL;
}

static int ended(int slot) { return __atomic_load_n(&level_rc[slot], __ATOMIC_ACQUIRE) != 1; }

TEST(stop_levels_end_their_own_waits)
{
    int p[3][2];
    struct level_wait w[3];
    int flags[3] = {CORO_INTERRUPTIBLE, CORO_DRAINING, 0};
    struct sched *s = mk(1);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_INT(pipe2(p[i], O_NONBLOCK), 0);
        w[i] = (struct level_wait){p[i][0], flags[i], i};
        coro_spawn(s, 0, 0, level_waiter, &w[i]);
    }
    CHECK_EQ_INT(sched_start(s), 0);
    usleep(50000);
    for (int level = 1; level <= 3; level++) {
        sched_stop(s, level);
        for (int t = 0; t < 500 && !ended(level - 1); t++)
            usleep(1000);
        usleep(50000); /* time for a wait of a higher class to end wrongly */
        for (int i = 0; i < 3; i++)
            CHECK_EQ_INT(ended(i), i < level);
    }
    struct pollfd pf = {.fd = sched_done_fd(s), .events = POLLIN};
    CHECK_EQ_INT(poll(&pf, 1, 5000), 1);
    sched_destroy(s);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_INT(level_rc[i], -ECANCELED);
        close(p[i][0]);
        close(p[i][1]);
    }
}

/* ---- kernel-thread mutex ---- */

static struct kmutex km;
static long kcount;

static void *kbump(void *arg)
{
    (void)arg;
    for (int i = 0; i < 200000; i++) {
        kmutex_lock(&km);
        kcount++;
        kmutex_unlock(&km);
    }
    return NULL;
}

static struct kcond kc;
static int kready;

static void *ksignal(void *arg)
{
    (void)arg;
    usleep(20000);
    kmutex_lock(&km);
    kready = 1;
    kcond_signal(&kc);
    kmutex_unlock(&km);
    return NULL;
}

TEST(futex_mutex_and_condition)
{
    pthread_t a, b;
    pthread_create(&a, NULL, kbump, NULL);
    pthread_create(&b, NULL, kbump, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    CHECK_EQ_INT(kcount, 400000);
    pthread_create(&a, NULL, ksignal, NULL);
    kmutex_lock(&km);
    while (!kready)
        kcond_wait(&kc, &km);
    kmutex_unlock(&km);
    pthread_join(a, NULL);
    CHECK_EQ_INT(kready, 1);
}

/* ---- the guard page ---- */

static int recurse(int n)
{
    volatile char pad[256];
    pad[0] = (char)n;
    return n == 0 ? pad[0] : recurse(n - 1) + pad[0];
}

static void *deep(void *arg)
{
    (void)arg;
    /* 256 bytes a frame, a million frames: far past a 16 KiB stack. */
    printf("%d\n", recurse(1000000));
    return NULL;
}

TEST(deep_recursion_dies_on_the_guard_page)
{
    int err[2];
    CHECK_EQ_INT(pipe(err), 0);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(err[1], 2);
        close(err[0]);
        struct sched_opts o = {.nthreads = 1, .stack_size = CORO_STACK_MIN};
        struct sched *s = sched_create(&o);
        coro_spawn(s, 0, 0, deep, NULL);
        sched_start(s);
        struct pollfd p = {.fd = sched_done_fd(s), .events = POLLIN};
        poll(&p, 1, 10000);
        _exit(0); /* reaching here means the overflow went unnoticed */
    }
    close(err[1]);
    char buf[4096];
    size_t len = 0;
    ssize_t n;
    struct pollfd p = {.fd = err[0], .events = POLLIN};
    while (len < sizeof buf - 1 && poll(&p, 1, 20000) == 1 &&
           (n = read(err[0], buf + len, sizeof buf - 1 - len)) > 0)
        len += (size_t)n;
    buf[len] = 0;
    close(err[0]);
    int status = 0;
    CHECK_EQ_INT(waitpid(pid, &status, 0), pid);
    CHECK(WIFSIGNALED(status));
    if (WIFSIGNALED(status))
        CHECK_EQ_INT(WTERMSIG(status), SIGSEGV);
    if (!CHECK(strstr(buf, "coroutine stack overflow (guard page hit") != NULL))
        fprintf(stderr, "child stderr: %s\n", buf);
}

/* ---- coroutines that get a stack only when their fd is ready ---- */

static int lazy_fds[2], lazy_empty[2];
static int lazy_rc = 99, lazy_got, lazy_timeout_rc = 99;

static void *lazy_reader(void *arg)
{
    (void)arg;
    lazy_rc = coro_start_result();
    char c;
    lazy_got = read(lazy_fds[0], &c, 1) == 1 && c == 'y';
    coro_fd_forget(lazy_fds[0]);
    return NULL;
}

static void *lazy_timed_out(void *arg)
{
    (void)arg;
    lazy_timeout_rc = coro_start_result();
    coro_fd_forget(lazy_empty[0]);
    return NULL;
}

static void *lazy_parent(void *arg)
{
    (void)arg;
    CHECK(coro_spawn_on_ready(lazy_fds[0], EPOLLIN, clock_now_ms() + 5000, 0, lazy_reader,
                              NULL) != NULL);
    CHECK(coro_spawn_on_ready(lazy_empty[0], EPOLLIN, clock_now_ms() + 30, 0, lazy_timed_out,
                              NULL) != NULL);
    /* Yield a lot: the woken coroutine may be switched to directly, and
     * must get its stack first. */
    for (int i = 0; i < 2000; i++) {
        if (i == 10 && write(lazy_fds[1], "y", 1) != 1)
            return NULL;
        coro_yield();
    }
    return NULL;
}

TEST(spawn_on_ready_starts_on_data_or_deadline)
{
    CHECK_EQ_INT(pipe2(lazy_fds, O_NONBLOCK), 0);
    CHECK_EQ_INT(pipe2(lazy_empty, O_NONBLOCK), 0);
    struct sched *s = mk(1);
    coro_spawn(s, 0, 0, lazy_parent, NULL);
    finish(s);
    CHECK_EQ_INT(lazy_rc, 0);
    CHECK_EQ_INT(lazy_got, 1);
    CHECK_EQ_INT(lazy_timeout_rc, -ETIMEDOUT);
    close(lazy_fds[0]);
    close(lazy_fds[1]);
    close(lazy_empty[0]);
    close(lazy_empty[1]);
}

/* Out of memory for the stack when its fd turns ready: the coroutine
 * retries for one a little later and still starts with 0 (ready), not
 * the retry's -ETIMEDOUT (an idle connection read that as its keep-alive
 * timeout and closed with its request unanswered: review 20). */
static int oom_fds[2], oom_rc = 99, oom_got;

static void *oom_reader(void *arg)
{
    (void)arg;
    oom_rc = coro_start_result();
    char c;
    oom_got = read(oom_fds[0], &c, 1) == 1 && c == 'z';
    coro_fd_forget(oom_fds[0]);
    return NULL;
}

static void *oom_parent(void *arg)
{
    (void)arg;
    CHECK(coro_spawn_on_ready(oom_fds[0], EPOLLIN, clock_now_ms() + 5000, CORO_INTERRUPTIBLE,
                              oom_reader, NULL) != NULL);
    coro_stack_fail_next = 1;
    CHECK_EQ_INT(write(oom_fds[1], "z", 1), 1);
    return NULL;
}

TEST(spawn_on_ready_out_of_stack_memory_keeps_its_result)
{
    CHECK_EQ_INT(pipe2(oom_fds, O_NONBLOCK), 0);
    struct sched *s = mk(1);
    coro_spawn(s, 0, 0, oom_parent, NULL);
    finish(s);
    CHECK_EQ_INT(coro_stack_fail_next, 0);
    CHECK_EQ_INT(oom_rc, 0);
    CHECK_EQ_INT(oom_got, 1);
    close(oom_fds[0]);
    close(oom_fds[1]);
}

/* coro_wait_wake and sched_watch: a completion signalled on an eventfd
 * that thread 0's netpoll watches wakes the coroutine parked on its
 * record with the fired result; a wait whose deadline passes first ends
 * with -ETIMEDOUT, and the late fire finds no waiter; a record fired
 * before the wait returns at once; a stop ends an interruptible wait. */
static int watch_efd;
static struct coro_wake wk_woken, wk_late, wk_early, wk_stopped;
static int wk_rc[4] = {1, 1, 1, 1};
static int64_t wk_waited_ms;
static int wk_watch_calls;

static void wk_watch(void *arg)
{
    (void)arg;
    uint64_t v;
    if (read(watch_efd, &v, sizeof v) != sizeof v)
        return;
    wk_watch_calls++;
    coro_wake_fire(&wk_woken, 7);
    coro_wake_fire(&wk_late, 8); /* its waiter gave up already */
}

static void *wk_wait(void *arg)
{
    int64_t t0 = clock_now_ms();
    wk_rc[0] = coro_wait_wake(&wk_woken, -1, 0);
    wk_waited_ms = clock_now_ms() - t0;
    (void)arg;
    return NULL;
}

static void *wk_times_out(void *arg)
{
    (void)arg;
    wk_rc[1] = coro_wait_wake(&wk_late, clock_now_ms() + 20, 0);
    coro_wake_fire(&wk_early, 9);
    wk_rc[2] = coro_wait_wake(&wk_early, -1, 0);
    return NULL;
}

static void *wk_signal(void *arg)
{
    (void)arg;
    coro_sleep(60);
    uint64_t one = 1;
    if (write(watch_efd, &one, sizeof one) != sizeof one)
        wk_watch_calls = -100;
    return NULL;
}

static void *wk_stop_waiter(void *arg)
{
    wk_rc[3] = coro_wait_wake(&wk_stopped, -1, CORO_INTERRUPTIBLE);
    (void)arg;
    return NULL;
}

TEST(wait_wake_fired_by_a_watched_eventfd)
{
    watch_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    CHECK(watch_efd >= 0);
    struct sched *s = mk(2);
    CHECK_EQ_INT(sched_watch(s, 0, watch_efd, wk_watch, NULL), 0);
    CHECK_EQ_INT(sched_watch(s, 0, watch_efd, wk_watch, NULL), -EBUSY);
    coro_spawn(s, 0, 0, wk_wait, NULL);
    coro_spawn(s, 0, 0, wk_times_out, NULL);
    coro_spawn(s, 1, 0, wk_signal, NULL);
    finish(s);
    CHECK_EQ_INT(wk_rc[0], 7);
    CHECK(wk_waited_ms >= 40);
    CHECK_EQ_INT(wk_rc[1], -ETIMEDOUT);
    CHECK(wk_late.fired && !wk_late.waiter);
    CHECK_EQ_INT(wk_rc[2], 9);
    CHECK_EQ_INT(wk_watch_calls, 1);

    s = mk(1);
    coro_spawn(s, 0, 0, wk_stop_waiter, NULL);
    CHECK_EQ_INT(sched_start(s), 0);
    usleep(30 * 1000);
    CHECK_EQ_INT(__atomic_load_n(&wk_rc[3], __ATOMIC_ACQUIRE), 1); /* still waiting */
    sched_stop(s, 1);
    struct pollfd p = {.fd = sched_done_fd(s), .events = POLLIN};
    CHECK_EQ_INT(poll(&p, 1, 10000), 1);
    sched_destroy(s);
    CHECK_EQ_INT(wk_rc[3], -ECANCELED);
    close(watch_efd);
}

/* The threads model: one process, one event loop per thread, each thread
 * with its own SO_REUSEPORT socket and scoreboard slot. Signals stay with
 * the main thread's signalfd; it forwards TERM/INT/QUIT to each loop
 * (and HUP: a reload, which hands idle connections over)
 * through a pipe that carries signalfd records, so a loop cannot tell a
 * forwarded signal from a real one. No fork happens after the threads
 * exist (the master forked this process before). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "core/log.h"
#include "core/signals.h"
#include "models/evloop.h"
#include "models/models.h"

struct loop_thread {
    const struct serve_config *cfg;
    struct worker_env env;
    int fds[CONFIG_MAX_LISTEN];
    int ctl[2];       /* [0]: the loop's "signal fd", [1]: main writes here */
    pthread_t tid;
    int started;
    int rc;
};

static void *loop_main(void *arg)
{
    struct loop_thread *t = arg;
    t->rc = evloop_run(t->cfg, &t->env);
    /* A loop that could not start (out of fds for its docroot or epoll)
     * leaves its own socket of the group unserved: the connections the
     * kernel hashes there would wait for good. The whole worker stops,
     * and the master starts another (with backoff); gracefully, so that
     * the other loops finish what they hold (connections handed over at
     * a reload among them) rather than reset it. */
    if (t->rc)
        kill(getpid(), SIGTERM);
    return NULL;
}

static void forward(struct loop_thread *ts, int n, int sig)
{
    struct signalfd_siginfo si;
    memset(&si, 0, sizeof si);
    si.ssi_signo = (uint32_t)sig;
    for (int i = 0; i < n; i++)
        if (ts[i].started && write(ts[i].ctl[1], &si, sizeof si) < 0)
            log_msg(LOG_ERROR, "thread %d: cannot forward signal: %s", i, strerror(errno));
}

int threads_run(const struct serve_config *cfg, const struct worker_env *env)
{
    int n = env->nthreads > 0 ? env->nthreads : 1;
    struct loop_thread *ts = calloc((size_t)n, sizeof *ts);
    if (!ts)
        return 1;
    int failed = 0;
    for (int i = 0; i < n; i++) {
        struct loop_thread *t = &ts[i];
        t->cfg = cfg;
        if (pipe2(t->ctl, O_CLOEXEC | O_NONBLOCK) < 0) {
            log_msg(LOG_CRIT, "pipe: %s", strerror(errno));
            forward(ts, i, SIGQUIT);
            n = i;
            failed = 1;
            break;
        }
        for (int l = 0; l < cfg->nlisten; l++) {
            t->fds[l] = env->listen_fds[l * env->nthreads + i];
            /* A socket the threads share (unix, or no reuseport sibling)
             * has one fd number for all: each loop gets its own, since a
             * stopping loop closes its fd while the others still accept
             * (a closed number is soon another socket's). */
            for (int j = 0; j < i; j++)
                if (env->listen_fds[l * env->nthreads + j] == t->fds[l]) {
                    int fd = fcntl(t->fds[l], F_DUPFD_CLOEXEC, 0);
                    if (fd < 0)
                        log_fatal("listen socket: dup: %s", strerror(errno));
                    t->fds[l] = fd;
                    break;
                }
        }
        t->env = *env;
        t->env.listen_fds = t->fds;
        t->env.nthreads = 1;
        t->env.loops_in_process = n;
        t->env.loop_index = i;
        t->env.signal_fd = t->ctl[0];
        t->env.slot = env->slot ? env->slot + i : NULL;
        /* Signals stay blocked in every thread: the mask is inherited. */
        if (pthread_create(&t->tid, NULL, loop_main, t) != 0) {
            log_msg(LOG_CRIT, "pthread_create failed");
            forward(ts, i, SIGQUIT);
            n = i;
            failed = 1;
            break;
        }
        t->started = 1;
    }
    /* A start that failed (out of fds for the threads' pipes: --threads
     * 128 under a limit of 256) told the loops it had started to quit:
     * waiting for a signal here kept a worker with no loop alive, serving
     * nobody, and the master saw no reason to start another. Exit, as a
     * worker that dies at start, for the master's respawn with backoff. */
    int running = failed ? 0 : n;
    while (running) {
        struct pollfd p = {.fd = env->signal_fd, .events = POLLIN};
        if (poll(&p, 1, 1000) < 0 && errno != EINTR)
            break;
        int sig;
        while ((sig = signals_read(env->signal_fd)) > 0)
            if (sig == SIGTERM || sig == SIGINT || sig == SIGQUIT || sig == SIGHUP) {
                forward(ts, n, sig);
                running = 0;
            }
    }
    int rc = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(ts[i].tid, NULL);
        rc |= ts[i].rc;
        close(ts[i].ctl[0]);
        close(ts[i].ctl[1]);
    }
    free(ts);
    return rc | failed;
}

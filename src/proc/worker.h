/* What the master hands a worker process besides the settings, and how a
 * concurrency model tells the master to lay out sockets and processes.
 * Models (src/models) fill a model_desc; the master only follows it. */
#ifndef HERD_PROC_WORKER_H
#define HERD_PROC_WORKER_H

#include "net/tls_ctx.h"
#include "proc/config.h"
#include "proc/scoreboard.h"

struct worker_env {
    const int *listen_fds;     /* [listen * nthreads + thread], non-blocking */
    int nthreads;              /* threads in this process (1 unless the model makes more) */
    int loops_in_process;      /* event loops sharing this process's fds and
                                * --max-connections (threads model); 0: one */
    int loop_index;            /* which of them (0..loops_in_process-1) */
    int signal_fd;             /* TERM/INT: graceful stop, QUIT: at once */
    int exclusive;             /* listen fds shared by workers: EPOLLEXCLUSIVE */
    int channel_fd;            /* dispatch: connections arrive here (SCM_RIGHTS), else -1 */
    int handover_fd;           /* to and from the master: connections handed over on
                                * a reload (proc/handover.h), or -1 */
    struct sb_slot *slot;      /* counters: nthreads consecutive slots, or NULL */
    struct scoreboard *sb;     /* for the status page, or NULL */
    int log_fd;                /* access-log datagram socket, or -1 */
    struct tls_server *tls;    /* TLS listeners' contexts (net/tls_ctx.h), or NULL */
};

/* A worker's main loop; returns its exit status. */
typedef int worker_main_fn(const struct serve_config *cfg, const struct worker_env *env);

enum socket_layout {
    LAYOUT_PER_WORKER,  /* SO_REUSEPORT: worker i always gets socket i */
    LAYOUT_SHARED,      /* one socket polled by every worker */
    LAYOUT_PER_THREAD,  /* one process; SO_REUSEPORT socket i for thread i */
    LAYOUT_DISPATCH,    /* the master accepts and passes each connection's fd */
};

struct model_desc {
    const char *name;
    worker_main_fn *worker_main;
    enum socket_layout layout;
    int one_process;    /* one worker process; --workers counts its threads */
    int single_worker;  /* one worker, one thread, whatever --workers says */
    int hands_over;     /* on HUP its workers hand idle connections to the new
                         * generation (proc/handover.h); others just drain */
    const char *summary;
};

#endif

/* What the master hands a worker process (or thread) besides the settings:
 * its listen sockets, its signal source, its scoreboard slot and the
 * access-log channel. A model's worker entry point takes this. */
#ifndef HERD_PROC_WORKER_H
#define HERD_PROC_WORKER_H

#include "proc/config.h"
#include "proc/scoreboard.h"

struct worker_env {
    const int *listen_fds;     /* one per cfg->listen, non-blocking */
    int signal_fd;             /* TERM/INT: graceful stop, QUIT: at once */
    int exclusive;             /* listen fds shared with other workers: EPOLLEXCLUSIVE */
    struct sb_slot *slot;      /* this worker's counters, or NULL */
    struct scoreboard *sb;     /* for the status page, or NULL */
    int log_fd;                /* access-log datagram socket, or -1 */
};

/* A worker's main loop; returns its exit status. */
typedef int worker_main_fn(const struct serve_config *cfg, const struct worker_env *env);

#endif

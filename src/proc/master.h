/* The master process: owns the listen sockets and the signals, carries no
 * traffic. It forks the workers and the access-log daemon, respawns them
 * when they die (with backoff for workers that die at start), reloads on
 * HUP with a new generation of workers on the same sockets, reopens logs on
 * USR1, execs a new binary on the same sockets on USR2 (proc/upgrade.h),
 * and stops gracefully on TERM/INT, at once on QUIT. Listen sockets passed
 * with LISTEN_FDS (systemd, or an upgrade) are used instead of binding. */
#ifndef HERD_PROC_MASTER_H
#define HERD_PROC_MASTER_H

#include <stddef.h>

#include "proc/config.h"
#include "proc/worker.h"

struct master_hooks {
    const struct model_desc *model;
    /* Re-reads the settings for a reload: 0, or -1 with a reason in err. */
    int (*reload)(void *arg, struct serve_config *out, char *err, size_t errlen);
    void *arg;
    /* The serve arguments (argv[0] is "serve"): a binary upgrade execs the
     * new binary with them. */
    int argc;
    char *const *argv;
};

/* Runs the master until it stops; returns the exit status. The listen
 * addresses in cfg are opened here (so a port in use exits 1 at once). */
int master_run(struct serve_config *cfg, const struct master_hooks *hooks);

#endif

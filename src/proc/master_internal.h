/* Private to the master's files: master.c (children, reload, signals, the
 * loop) and master_upgrade.c (the binary upgrade, both sides). Not for
 * use outside src/proc/master*.c. */
#ifndef HERD_PROC_MASTER_INTERNAL_H
#define HERD_PROC_MASTER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/loop.h"
#include "proc/dispatch.h"
#include "proc/health.h"
#include "proc/handover.h"
#include "proc/listeners.h"
#include "proc/master.h"
#include "proc/reload_answer.h"
#include "proc/scoreboard.h"
#include "proc/tls_setup.h"
#include "proc/upgrade.h"

#define MAX_WORKERS CONFIG_MAX_WORKERS
#define UPGRADE_EXIT_MS 3000   /* after its ready pipe closed, it must have exited */
/* A new master checks this often (/3) whether every worker reported ready. */
#define UPGRADE_SETTLE_MS 300
#define TAG_UPGRADE (1ULL << 60) /* the ready pipe's epoll tag; 0 is the signalfd */
#define TAG_HANDOVER (1ULL << 59) /* | slot: a worker's handover channel */
#define TAG_HANDOVER_PRED (TAG_HANDOVER | 0x10000) /* from the master we upgraded */
#define TAG_HANDOVER_SUCC (TAG_HANDOVER | 0x20000) /* to the master that upgraded us */
#define TAG_HEALTH (1ULL << 58) /* | check: an upstream health check's socket */

struct wproc {
    pid_t pid;          /* 0: slot unused; a threaded worker holds several slots */
    uint8_t first;      /* the first of its process's slots */
    int index;          /* worker number: picks its reuseport sockets */
    uint32_t gen;
    uint8_t draining;   /* told to stop (old generation or shutdown) */
    int64_t started_ms;
    int64_t shutdown_ms; /* its config's --shutdown-timeout */
    int64_t kill_at;     /* an old generation's: SIGKILL if still here then, or 0 */
};

/* A worker index waiting to be respawned. */
struct respawn {
    int64_t at_ms;      /* 0: none pending */
    int quick_deaths;
};

struct master {
    struct serve_config *cfg;
    const struct master_hooks *hooks;
    const struct model_desc *model;
    int nworkers;       /* worker processes */
    int nthreads;       /* threads per worker process */
    struct loop loop;
    struct dispatch *dispatch;
    int ho[SB_MAX_SLOTS];   /* handover channels, on a process's first slot, or -1 */
    uint32_t ho_owed[SB_MAX_SLOTS]; /* placed connections not yet acknowledged to it */
    struct ho_held *ho_held; /* connections no channel took yet (master_handover.c) */
    int nho_held, cap_ho_held;
    int pred_fd;            /* upgrade: connections from the old master come here, or -1 */
    int succ_fd;            /* upgraded: ours go to the new master here, or -1 */
    struct listeners ls;
    struct scoreboard *sb;
    struct wproc w[SB_MAX_SLOTS];           /* indexed by scoreboard slot */
    struct respawn rs[MAX_WORKERS];
    uint32_t gen;
    /* the upstream indexes (proc/upstream_index.h) each generation's
     * config uses, by generation % 16: more are never alive at once */
    uint32_t up_mask[16];
    int sfd;
    pid_t pid;
    int log_rx, log_tx;
    int log_out;        /* the access log as the last check opened it, for the next logger; or -1 */
    char log_path[1024];
    pid_t logger;
    int64_t logger_started_ms;
    int logger_quick_deaths; /* in a row, each within 10 s of its start: the backoff */
    int64_t logger_respawn_at;
    int logger_told;    /* the logger was asked to stop */
    pid_t logger_retired; /* a logger a reload stopped for a new access log: not a death */
    int stopping;       /* 1 graceful, 2 fast */
    int64_t stop_deadline;
    /* binary upgrade, old master's side */
    char *const *argv;  /* our serve arguments, for the new master */
    int argc;
    struct upgrade up;  /* the new master starting (up.pid 0: none) */
    int handed_over;    /* the new master serves: leave it the socket paths */
    /* binary upgrade, new master's side */
    int ready_fd;       /* tell the old master here once serving, else -1 */
    int64_t settle_at;  /* when to check that the workers still live */
    /* the outcome of a HUP, for `herd reload` (proc/reload_answer.h) */
    struct reload_answer answer;
    size_t answer_len;
    struct tls_setup tls;   /* contexts the workers inherit, ticket keys */
    struct health *health;  /* upstream health checks (proc/health.h), or NULL */
};

static inline int nslots(const struct master *m) { return (int)m->sb->nslots; }

/* master.c */
void master_begin_stop(struct master *m, int fast);

/* master_handover.c: a channel for the worker about to start in slot
 * (returns the worker's end or -errno); its events; closing it once the
 * worker has gone (what it sent is handled first); in a new child. */
int master_handover_open(struct master *m, int slot);
void master_handover_event(struct master *m, int slot);
void master_handover_close(struct master *m, int slot);
void master_handover_close_in_child(struct master *m);
/* Tries again what full channels refused (held connections, then the
 * acknowledgements owed); the ms until the next try while some are left,
 * else -1. */
int master_handover_retry(struct master *m);
/* Upgrade: what the old master sends us (pred), what the new one bounces
 * back (succ). */
void master_handover_pred_event(struct master *m);
void master_handover_succ_event(struct master *m);
/* Before a new master that is stopping exits: sends back what is queued. */
void master_handover_pred_end(struct master *m);

/* master_upgrade.c, old master: USR2 starts one; the ready pipe's events,
 * the deadline and the new master's death (from reap) end it. */
void master_start_upgrade(struct master *m);
void master_upgrade_event(struct master *m);
void master_upgrade_deadline(struct master *m);
void master_upgrade_failed(struct master *m, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* master_upgrade.c, new master: once its workers serve, tell the old one. */
void master_report_ready(struct master *m);

#endif

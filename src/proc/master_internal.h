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
#include "proc/listeners.h"
#include "proc/master.h"
#include "proc/reload_answer.h"
#include "proc/scoreboard.h"
#include "proc/tls_setup.h"
#include "proc/upgrade.h"

#define MAX_WORKERS CONFIG_MAX_WORKERS
#define UPGRADE_READY_MS 30000 /* a new master must report ready within this */
#define UPGRADE_EXIT_MS 3000   /* after its ready pipe closed, it must have exited */
/* A new master reports ready once all its workers have lived this long:
 * they serve by then, and one that fails at start has died. */
#define UPGRADE_SETTLE_MS 300
#define TAG_UPGRADE (1ULL << 60) /* the ready pipe's epoll tag; 0 is the signalfd */

struct wproc {
    pid_t pid;          /* 0: slot unused; a threaded worker holds several slots */
    uint8_t first;      /* the first of its process's slots */
    int index;          /* worker number: picks its reuseport sockets */
    uint32_t gen;
    uint8_t draining;   /* told to stop (old generation or shutdown) */
    int64_t started_ms;
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
    struct listeners ls;
    struct scoreboard *sb;
    struct wproc w[SB_MAX_SLOTS];           /* indexed by scoreboard slot */
    struct respawn rs[MAX_WORKERS];
    uint32_t gen;
    int sfd;
    pid_t pid;
    int log_rx, log_tx;
    char log_path[1024];
    pid_t logger;
    int64_t logger_respawn_at;
    int logger_told;    /* the logger was asked to stop */
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
};

static inline int nslots(const struct master *m) { return (int)m->sb->nslots; }

/* master.c */
void master_begin_stop(struct master *m, int fast);

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

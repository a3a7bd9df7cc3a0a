/* The scoreboard: counters in one shared memory region mapped by the master
 * before it forks, so `herd status` and the status page see every worker
 * without asking any of them. Each worker writes only its own slot (one
 * writer per cache line, plain stores, no locks); readers sum the slots and
 * accept that a sum mixes values from slightly different instants. */
#ifndef HERD_PROC_SCOREBOARD_H
#define HERD_PROC_SCOREBOARD_H

#include <stdint.h>
#include <sys/types.h>

#include "proc/latency.h"

#define SB_MAX_SLOTS 512
/* Upstream servers with an entry in the shared tables (health verdicts,
 * stall marks, the status page's pools; proc/upstream_index.h); the rest
 * are proxied as well, just not checked or shown. */
#define SB_UPSTREAMS 32
#define SB_UPSTREAM_NAME 128

/* An upstream server's last answer (first byte of a response): on which
 * connection (slot index << 32 | fd, plus one; 0: none), how many answers
 * in a row came on it, and when (monotonic ms). One connection answering
 * while a request waits on another is a server that serves one
 * connection at a time (models/upstream_stall.c). One per server, on one
 * cache line: every proxied answer writes it. */
struct sb_answer_run {
    uint64_t conn;
    int64_t ms;
    uint32_t run;
} __attribute__((aligned(32)));

/* One worker's (or coro thread's) pool for one upstream server. */
struct sb_upstream {
    uint32_t idle;            /* pooled connections */
    uint32_t busy;            /* exchanges on it now */
    uint64_t stalls;          /* times it was found serving one connection at a time */
};

enum sb_state { SB_FREE, SB_RUNNING, SB_DRAINING };

struct sb_slot {
    uint64_t requests;
    uint64_t bytes_in, bytes_out;
    uint64_t status[6];       /* [1..5]: 1xx..5xx */
    uint64_t accepted;
    uint64_t active;          /* open connections */
    uint64_t idle;            /* of which idle keep-alive */
    uint64_t empty_wakeups;   /* accept wakeups that found nothing */
    uint64_t log_dropped;     /* access-log records lost (logger too slow or gone) */
    uint64_t tls_handshakes;  /* TLS handshakes completed, */
    uint64_t tls_resumed;     /* ...of which resumed a session (ticket) */
    uint64_t tls_failed[4];   /* handshakes failed, by enum tls_fail (net/tls.h) */
    uint64_t file_reads;      /* file windows read into the page cache off the loop
                               * before their sendfile (models/file_window.h) */
    int64_t started;          /* unix seconds */
    int32_t pid;
    uint32_t generation;
    uint32_t index;           /* worker number within its generation */
    uint32_t state;           /* enum sb_state */
    struct sb_upstream up[SB_UPSTREAMS];
    struct sb_latency latency; /* request durations (models/step.c says which) */
    uint32_t ready;           /* its loop is set up and serves (an upgrade waits for it) */
    uint32_t full;            /* dispatch: at --max-connections, not taking from its
                               * channel (proc/dispatch.c passes what waits there on) */
} __attribute__((aligned(64)));

struct scoreboard {
    int64_t started;
    int32_t master_pid;
    int32_t logger_pid;
    uint32_t generation;
    uint32_t nslots;
    uint64_t logger_restarts;
    uint64_t worker_restarts;
    /* access-log lines the logger could not write (a full disk, EFBIG,
     * EIO); its one writer is the logger, and a restarted one goes on */
    uint64_t log_write_dropped;
    char model[16];
    /* The current config's servers for the status page: their indexes
     * in config order, and "GROUP SERVER" per index (proc/upstream_index.h:
     * an index keeps its server across reloads while any worker may use
     * it) */
    uint32_t nupstreams;
    uint8_t upstream_order[SB_UPSTREAMS];
    char upstream_names[SB_UPSTREAMS][SB_UPSTREAM_NAME];
    /* Shared by the workers (atomic updates): requests to the server past
     * --upstream-stall without a byte now, and until when (monotonic ms)
     * it gets no keep-alive pool in any worker. */
    uint32_t upstream_stalled[SB_UPSTREAMS];
    int64_t upstream_nopool_until[SB_UPSTREAMS];
    /* The server's last answer in any worker (atomic updates): the
     * connection it is on may be another worker's. */
    struct sb_answer_run upstream_answer[SB_UPSTREAMS];
    /* Written by the master's health checks (proc/health.h: HEALTH_*),
     * read by every worker's server choice. */
    uint8_t upstream_health[SB_UPSTREAMS];
    struct sb_slot slots[];
};

/* Maps a shared, zeroed scoreboard for nslots workers (MAP_SHARED, so it
 * survives fork); NULL on failure. */
struct scoreboard *sb_create(uint32_t nslots);
void sb_destroy(struct scoreboard *sb);

/* Single-writer counter update: a relaxed store readers can load whole. */
#define SB_ADD(field, n) __atomic_store_n(&(field), (field) + (n), __ATOMIC_RELAXED)
#define SB_SET(field, v) __atomic_store_n(&(field), (v), __ATOMIC_RELAXED)
#define SB_GET(field) __atomic_load_n(&(field), __ATOMIC_RELAXED)

#endif

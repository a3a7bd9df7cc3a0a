/* The scoreboard: counters in one shared memory region mapped by the master
 * before it forks, so `herd status` and the status page see every worker
 * without asking any of them. Each worker writes only its own slot (one
 * writer per cache line, plain stores, no locks); readers sum the slots and
 * accept that a sum mixes values from slightly different instants. */
#ifndef HERD_PROC_SCOREBOARD_H
#define HERD_PROC_SCOREBOARD_H

#include <stdint.h>
#include <sys/types.h>

#define SB_MAX_SLOTS 512

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
    int64_t started;          /* unix seconds */
    int32_t pid;
    uint32_t generation;
    uint32_t index;           /* worker number within its generation */
    uint32_t state;           /* enum sb_state */
    uint32_t ready;           /* its loop is set up and serves (an upgrade waits for it) */
} __attribute__((aligned(64)));

struct scoreboard {
    int64_t started;
    int32_t master_pid;
    int32_t logger_pid;
    uint32_t generation;
    uint32_t nslots;
    uint64_t logger_restarts;
    uint64_t worker_restarts;
    char model[16];
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

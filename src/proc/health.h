/* Active health checks of upstream servers (`--upstream-health`), run by
 * the master in its own loop: the master has no traffic, exists once
 * whatever the model and the worker count, and outlives reloads and
 * worker deaths, so each server gets one check per interval (not one per
 * worker or per generation) and no model needs a driver for it. Every
 * interval each server of a checked group gets `GET PATH` on a fresh
 * non-blocking connection; a final 2xx or 3xx status passes (interim 1xx
 * answers are skipped, within a bound on the bytes read), anything else (a
 * failed connect, another status, a 101, a malformed status line, a close
 * or no final status line within the interval or the bound) fails. The verdict goes into the scoreboard
 * (upstream_health[], by the server's index there: proc/upstream_index.h),
 * where the workers' server choice reads it (models/upstream_pool.c). */
#ifndef HERD_PROC_HEALTH_H
#define HERD_PROC_HEALTH_H

#include <stdint.h>

#include "core/loop.h"
#include "proc/config.h"
#include "proc/scoreboard.h"

/* A server's entry in scoreboard->upstream_health[]. */
enum { HEALTH_UNCHECKED, HEALTH_UP, HEALTH_DOWN };

struct health;

/* The checks cfg asks for, their sockets in loop l tagged tag | check
 * (tag has the low 16 bits free); NULL when none (or out of memory,
 * logged). Every server is checked at once; until then it keeps the
 * verdict in carry (by its scoreboard index; see health_carry). With
 * carry (a reload) every server of cfg gets its starting verdict, unchecked
 * when its group is not checked; the entries of servers cfg dropped are
 * left to the old workers still running. */
struct health *health_create(const struct serve_config *cfg, struct scoreboard *sb,
                             struct loop *l, uint64_t tag, const uint8_t *carry);
/* On a reload, before the old config goes and after next's scoreboard
 * indexes are assigned: the verdict each server of next had under old (the
 * same group name and address, checked before), by its index,
 * HEALTH_UNCHECKED for the rest. A server that was
 * down stays skipped until its first check passes, not taken for up to an
 * interval because its group was read again. */
void health_carry(const struct serve_config *old, const struct serve_config *next,
                  const struct scoreboard *sb, uint8_t carry[SB_UPSTREAMS]);
/* Closes its sockets; the scoreboard forgets every verdict. */
void health_destroy(struct health *h);
/* In a forked child: closes the sockets of checks in flight, frees h. */
void health_close_in_child(struct health *h);
/* The earliest check to start or to time out (clock_now_ms scale), or -1. */
int64_t health_next(const struct health *h);
/* Starts the checks that are due and fails the ones past their time. */
void health_tick(struct health *h);
/* Check i's socket raised events. */
void health_event(struct health *h, int i, uint32_t events);

#endif

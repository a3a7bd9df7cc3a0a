/* Where each upstream server sits in the scoreboard's per-server tables
 * (health verdicts, stall marks, last answers, the pools' counters).
 * Workers of two generations live side by side after a reload, each
 * reading the tables by its own config, so an index must mean one server
 * for as long as any worker may use it: a server the new config keeps
 * (the same group name and address) keeps its index, and a new one takes
 * an index no live generation uses. Numbered in config order at the
 * start; the master assigns them on each reload, before any worker of the
 * new config exists. */
#ifndef HERD_PROC_UPSTREAM_INDEX_H
#define HERD_PROC_UPSTREAM_INDEX_H

#include <stdint.h>

#include "proc/config.h"
#include "proc/scoreboard.h"

/* Config order over all groups: what config_finish gives a config. Past
 * SB_UPSTREAMS a server gets SB_UPSTREAMS, "no shared entry". */
void upindex_number(struct serve_config *cfg);

/* The indexes cfg's servers use, one bit each (SB_UPSTREAMS is 32). */
uint32_t upindex_mask(const struct serve_config *cfg);

/* The reload's: next's servers get their indexes, kept ones from cur,
 * new ones an index whose bit is clear in live (the masks of every
 * generation with a worker still running, cur's included); those are
 * cleared in sb's tables first. */
void upindex_assign(const struct serve_config *cur, struct serve_config *next, uint32_t live,
                    struct scoreboard *sb);

/* The status page's list: cfg's servers in config order, by name and
 * index. Written by the master on each reload and by each worker that
 * proxies at its start (the same bytes for the same config). */
void upindex_publish(struct scoreboard *sb, const struct serve_config *cfg);

#endif

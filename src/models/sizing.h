/* The sizes every driver derives from the config and the fd limit, in one
 * place so the models cannot drift apart: input and head buffers, the fd
 * table, connection limits that add up across a process's threads, and
 * the open-file cache. */
#ifndef HERD_MODELS_SIZING_H
#define HERD_MODELS_SIZING_H

#include <stddef.h>
#include <stdint.h>

#include "http/filecache.h"
#include "proc/config.h"

/* A connection's input buffer: a whole head at --max-header-size plus room
 * for the start of a body or the next request; at least 16 KiB. */
size_t sizing_in_cap(const struct serve_config *cfg);

/* The head buffer one answer needs (the status page's body is built in it,
 * and a 301's Location can be as long as the target). */
size_t sizing_out_cap(const struct serve_config *cfg);

/* The process's fd limit (RLIMIT_NOFILE), capped at 2^20. */
int sizing_fd_limit(void);

/* Connections loop `index` of `loops` in a process may hold: --max-connections
 * (by default what the fd limit leaves: see sizing.c) split among them, the
 * shares adding up to it, so loops sharing an fd table never ask for more
 * fds than there are. (config_finish refuses fewer than one per thread.) */
uint32_t sizing_max_conns(const struct serve_config *cfg, int fd_limit, int loops, int index);

/* The fewest fds a process of `loops` threads (--model threads or coro)
 * can serve with: its own 64, each thread's own and one connection per
 * thread. A threads loop holds epoll, its control pipe, its read-in ring,
 * the spare fd it refuses with and a socket per listen address (6 +
 * nlisten, measured); a coro thread 5 (its sockets are shared). Below it
 * every connection is refused for good, so the start (or the reload) is
 * refused instead. 0 for the other models. */
long sizing_threads_fds_needed(const char *model, int loops, int nlisten);

/* The open-file cache of one of `loops` caches in a process: an eighth of
 * the fd limit shared among them, at most 1024 entries each. */
struct filecache_limits sizing_file_cache(int fd_limit, int loops);

#endif

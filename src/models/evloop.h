/* The event-loop server: one thread, one edge-triggered epoll loop serving
 * every connection on the given listen sockets. Later models run one of
 * these per worker process or thread. */
#ifndef HERD_MODELS_EVLOOP_H
#define HERD_MODELS_EVLOOP_H

#include <stdint.h>

#include "proc/config.h"
#include "proc/worker.h"

/* Serves on the listen fds until a TERM/INT (graceful) or QUIT (at once)
 * arrives on the signal fd. Returns the process exit status. */
int evloop_run(const struct serve_config *cfg, const struct worker_env *env);

#endif

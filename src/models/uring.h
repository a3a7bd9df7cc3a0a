/* The io_uring model (`--model uring`): a worker process per SO_REUSEPORT
 * socket, each driving the request step from io_uring completions. */
#ifndef HERD_MODELS_URING_H
#define HERD_MODELS_URING_H

#include "proc/config.h"
#include "proc/worker.h"

/* Serves until a TERM/INT (graceful) or QUIT (at once). Returns the exit
 * status: 1 when io_uring cannot be set up here. */
int uring_run(const struct serve_config *cfg, const struct worker_env *env);

#endif

/* The concurrency models behind `herd serve --model`. Each is a worker
 * entry point plus the socket and process layout the master should build
 * for it; all of them drive the same sans-I/O HTTP code. */
#ifndef HERD_MODELS_MODELS_H
#define HERD_MODELS_MODELS_H

#include "proc/worker.h"

/* NULL for an unknown name (and for "single", which runs without a master). */
const struct model_desc *model_find(const char *name);

/* Entry points (one file each). */
int iterative_run(const struct serve_config *cfg, const struct worker_env *env);
int threads_run(const struct serve_config *cfg, const struct worker_env *env);
int coro_model_run(const struct serve_config *cfg, const struct worker_env *env);

#endif

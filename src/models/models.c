#include "models/models.h"

#include <string.h>

#include "models/evloop.h"
#include "models/uring.h"

static const struct model_desc models[] = {
    {
        .name = "reuseport",
        .hands_over = 1,
        .worker_main = evloop_run,
        .layout = LAYOUT_PER_WORKER,
        .summary = "a SO_REUSEPORT socket per worker process; the kernel spreads connections",
    },
    {
        .name = "prefork",
        .hands_over = 1,
        .worker_main = evloop_run,
        .layout = LAYOUT_SHARED,
        .summary = "worker processes share one socket; EPOLLEXCLUSIVE wakes one per connection",
    },
    {
        .name = "dispatch",
        .hands_over = 1,
        .worker_main = evloop_run,
        .layout = LAYOUT_DISPATCH,
        .summary = "the master accepts and passes fds to workers with SCM_RIGHTS",
    },
    {
        .name = "threads",
        .hands_over = 1,
        .worker_main = threads_run,
        .layout = LAYOUT_PER_THREAD,
        .one_process = 1,
        .summary = "one process, an event loop per thread, a SO_REUSEPORT socket per thread",
    },
    {
        .name = "coro",
        .hands_over = 1,
        .worker_main = coro_model_run,
        .layout = LAYOUT_SHARED,
        .one_process = 1,
        .summary = "one process, a coroutine per connection over --threads kernel threads",
    },
    {
        .name = "uring",
        .hands_over = 1,
        .worker_main = uring_run,
        .layout = LAYOUT_PER_WORKER,
        .summary = "a SO_REUSEPORT socket per worker process, driven by io_uring completions",
    },
    {
        .name = "iterative",
        .worker_main = iterative_run,
        .layout = LAYOUT_SHARED,
        .single_worker = 1,
        .summary = "one worker, blocking calls, one connection at a time",
    },
};

const struct model_desc *model_find(const char *name)
{
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
        if (!strcmp(models[i].name, name))
            return &models[i];
    return NULL;
}

#include "models/sizing.h"

#include <string.h>
#include <sys/resource.h>

#include "http/handler.h"
#include "http/response.h"

size_t sizing_in_cap(const struct serve_config *cfg)
{
    size_t n = (size_t)cfg->http.max_header_size + 1024;
    return n > 16384 ? n : 16384;
}

size_t sizing_out_cap(const struct serve_config *cfg)
{
    return HTTP_HEAD_RESERVE + HTTP_STATUS_MAX + cfg->http.max_header_size;
}

int sizing_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY ||
        rl.rlim_cur > 1 << 20)
        return 1 << 20;
    return (int)rl.rlim_cur;
}

/* The default --max-connections of a process: what is left of its fd table
 * after its own fds (listeners, logs, channels, epoll: 64, a quarter of a
 * tiny table) and the open-file caches, per connection's fds: two where a
 * route proxies (the client's and its upstream's, as nginx counts them),
 * else one. Every connection can then hold its fds at once: running out
 * would refuse upstream connects and file opens on connections we took. */
static uint32_t default_total(const struct serve_config *cfg, int fd_limit, int loops)
{
    int64_t reserve = fd_limit > 256 ? 64 : fd_limit / 4;
    int64_t cache = fd_limit / 8 < 1024 * (int64_t)loops ? fd_limit / 8 : 1024 * (int64_t)loops;
    int64_t per = cfg->nupstreams ? 2 : 1;
    int64_t room = ((int64_t)fd_limit - reserve - cache) / per;
    return room > 0 ? (uint32_t)room : 1;
}

uint32_t sizing_max_conns(const struct serve_config *cfg, int fd_limit, int loops, int index)
{
    uint32_t n = loops > 1 ? (uint32_t)loops : 1;
    uint32_t total = cfg->max_connections ? cfg->max_connections
                                          : default_total(cfg, fd_limit, (int)n);
    /* the remainder to the first loops, so that the shares add up to it */
    uint32_t share = total / n + ((uint32_t)index < total % n);
    return share ? share : 1;
}

long sizing_threads_fds_needed(const char *model, int loops, int nlisten)
{
    int own = !strcmp(model, "threads") ? 6 + nlisten : !strcmp(model, "coro") ? 5 : -1;
    return own < 0 ? 0 : 64 + (long)loops * (own + 1);
}

struct filecache_limits sizing_file_cache(int fd_limit, int loops)
{
    uint32_t per = (uint32_t)fd_limit / 8 / (uint32_t)(loops > 1 ? loops : 1);
    return (struct filecache_limits){.max_entries = per < 1024 ? per : 1024,
                                     .max_inline_size = 32 * 1024,
                                     .max_inline_total = 64 * 1024 * 1024};
}

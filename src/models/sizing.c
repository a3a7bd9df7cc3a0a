#include "models/sizing.h"

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

uint32_t sizing_max_conns(const struct serve_config *cfg, int fd_limit, int loops)
{
    uint32_t n = loops > 1 ? (uint32_t)loops : 1;
    uint32_t total = cfg->max_connections ? cfg->max_connections
                     : fd_limit > 128     ? (uint32_t)fd_limit - 64
                                          : 64;
    return total / n ? total / n : 1;
}

struct filecache_limits sizing_file_cache(int fd_limit, int loops)
{
    uint32_t per = (uint32_t)fd_limit / 8 / (uint32_t)(loops > 1 ? loops : 1);
    return (struct filecache_limits){.max_entries = per < 1024 ? per : 1024,
                                     .max_inline_size = 32 * 1024,
                                     .max_inline_total = 64 * 1024 * 1024};
}

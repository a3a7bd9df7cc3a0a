/* Connection limits from --max-connections and the fd limit: shares that
 * add up across a process's loops, and a default that leaves every
 * connection its fds (two where a route proxies). */
#include "unit.h"

#include "models/sizing.h"

static struct serve_config cfg;

static uint32_t sum_of_shares(int fd_limit, int loops)
{
    uint32_t sum = 0;
    for (int i = 0; i < loops; i++)
        sum += sizing_max_conns(&cfg, fd_limit, loops, i);
    return sum;
}

TEST(shares_add_up_to_the_limit)
{
    config_defaults(&cfg);
    cfg.max_connections = 5;
    CHECK_EQ_INT(sizing_max_conns(&cfg, 1024, 2, 0), 3);
    CHECK_EQ_INT(sizing_max_conns(&cfg, 1024, 2, 1), 2);
    CHECK_EQ_INT(sum_of_shares(1024, 2), 5);
    cfg.max_connections = 1000;
    CHECK_EQ_INT(sum_of_shares(1 << 20, 7), 1000);
    CHECK_EQ_INT(sizing_max_conns(&cfg, 1 << 20, 1, 0), 1000);
}

TEST(default_leaves_every_connection_its_fds)
{
    config_defaults(&cfg);
    cfg.max_connections = 0;
    int limits[] = {16, 64, 100, 128, 256, 1024, 20000, 1 << 20};
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
        int lim = limits[i];
        struct filecache_limits fc = sizing_file_cache(lim, 1);
        for (int proxied = 0; proxied < 2; proxied++) {
            cfg.nupstreams = proxied;
            uint32_t n = sizing_max_conns(&cfg, lim, 1, 0);
            /* the connections' fds, the cache's and a few of our own fit */
            uint64_t need = (uint64_t)n * (proxied ? 2 : 1) + fc.max_entries + 4;
            if (!CHECK(n >= 1 && need <= (uint64_t)lim))
                fprintf(stderr, "  limit %d, proxied %d: %u connections\n", lim, proxied, n);
        }
    }
    /* a route that proxies halves it */
    cfg.nupstreams = 0;
    uint32_t plain = sizing_max_conns(&cfg, 20000, 1, 0);
    cfg.nupstreams = 1;
    CHECK_EQ_INT(sizing_max_conns(&cfg, 20000, 1, 0), plain / 2);
}

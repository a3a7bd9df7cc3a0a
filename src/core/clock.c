#include "core/clock.h"

__thread struct clock_cache clock_cache;

int clock_update(void)
{
    struct timespec mono, wall;
    /* the fine clock (not _COARSE, 4 ms steps): request latencies start
     * from this reading; it is one vDSO call per loop iteration either way */
    clock_gettime(CLOCK_MONOTONIC, &mono);
    clock_gettime(CLOCK_REALTIME_COARSE, &wall);
    clock_cache.now_ms = (int64_t)mono.tv_sec * 1000 + mono.tv_nsec / 1000000;
    clock_cache.now_us = (int64_t)mono.tv_sec * 1000000 + mono.tv_nsec / 1000;
    if (wall.tv_sec == clock_cache.wall_sec)
        return 0;
    clock_cache.wall_sec = wall.tv_sec;
    httpdate_format(wall.tv_sec, clock_cache.date);
    return 1;
}

/* The cached clock: read once per loop iteration from the vDSO, with the
 * Date header string reformatted only when the second changes. Per thread,
 * so every event loop has its own copy and no lock. */
#ifndef HERD_CLOCK_H
#define HERD_CLOCK_H

#include <stdint.h>
#include <time.h>

#include "core/httpdate.h"

struct clock_cache {
    int64_t now_ms;          /* CLOCK_MONOTONIC, milliseconds */
    int64_t now_us;          /* ...the same reading in microseconds */
    time_t wall_sec;         /* CLOCK_REALTIME_COARSE, seconds */
    char date[HTTPDATE_LEN]; /* wall_sec as IMF-fixdate */
};

extern __thread struct clock_cache clock_cache;

/* Call once per loop iteration. Returns 1 when the second changed. */
int clock_update(void);

static inline int64_t clock_now_ms(void) { return clock_cache.now_ms; }
static inline int64_t clock_now_us(void) { return clock_cache.now_us; }

/* A fresh CLOCK_MONOTONIC reading in microseconds (a vDSO call, no
 * syscall with the tsc clocksource), for the one place that needs the end
 * of a request rather than the start of the loop iteration. */
static inline int64_t clock_fresh_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}
static inline time_t clock_wall(void) { return clock_cache.wall_sec; }
static inline const char *clock_date(void) { return clock_cache.date; }

#endif

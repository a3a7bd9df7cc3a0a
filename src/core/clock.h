/* The cached clock: read once per loop iteration from the vDSO, with the
 * Date header string reformatted only when the second changes. Per thread,
 * so every event loop has its own copy and no lock. */
#ifndef HERD_CLOCK_H
#define HERD_CLOCK_H

#include <stdint.h>
#include <time.h>

#include "core/httpdate.h"

struct clock_cache {
    int64_t now_ms;          /* CLOCK_MONOTONIC_COARSE, milliseconds */
    time_t wall_sec;         /* CLOCK_REALTIME_COARSE, seconds */
    char date[HTTPDATE_LEN]; /* wall_sec as IMF-fixdate */
};

extern __thread struct clock_cache clock_cache;

/* Call once per loop iteration. Returns 1 when the second changed. */
int clock_update(void);

static inline int64_t clock_now_ms(void) { return clock_cache.now_ms; }
static inline time_t clock_wall(void) { return clock_cache.wall_sec; }
static inline const char *clock_date(void) { return clock_cache.date; }

#endif

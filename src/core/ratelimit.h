/* A rate limit for error-log lines that something outside herd can repeat
 * without end (a script's stderr, a full disk): at most `burst` lines a
 * period, the rest held back and counted. The count is handed to the first
 * caller of the next period, so that it can say how many were not logged.
 * A zeroed struct is a limit whose first period starts at the first line. */
#ifndef HERD_CORE_RATELIMIT_H
#define HERD_CORE_RATELIMIT_H

#include <stdint.h>

struct ratelimit {
    int64_t end_ms;     /* the current period ends here (monotonic ms) */
    unsigned passed;    /* lines let through in it */
    unsigned held;      /* lines held back in it */
};

/* 1 when a line may be logged at now_ms. *held_back (when not NULL): how
 * many lines the last period held back, on the first call of a new period,
 * else 0; the caller says so before its own line. */
static inline int ratelimit_take(struct ratelimit *r, int64_t now_ms, int64_t period_ms,
                                 unsigned burst, unsigned *held_back)
{
    unsigned held = 0;
    if (now_ms >= r->end_ms) {
        held = r->held;
        r->end_ms = now_ms + period_ms;
        r->passed = r->held = 0;
    }
    if (held_back)
        *held_back = held;
    if (r->passed >= burst) {
        r->held++;
        return 0;
    }
    r->passed++;
    return 1;
}

#endif

/* The request-body clock, the same in every model (Apache mod_reqtimeout's
 * body=T,MinRate=R): a body must arrive within --body-timeout of the moment
 * the server starts reading it, extended by one second for every
 * --body-min-rate bytes received. A body trickling slower than that is cut
 * (the connection closes, as nginx does on client_body_timeout), while a
 * large upload at a fair rate may take as long as it needs. It is separate
 * from the header timeout: body bytes never extend a head's time, and a
 * body may take longer than a head may. */
#ifndef HERD_MODELS_BODY_CLOCK_H
#define HERD_MODELS_BODY_CLOCK_H

#include <stddef.h>
#include <stdint.h>

struct body_clock {
    int64_t start_ms;
    uint64_t bytes;   /* received since start */
};

static inline void body_clock_start(struct body_clock *b, int64_t now_ms)
{
    b->start_ms = now_ms;
    b->bytes = 0;
}

static inline void body_clock_add(struct body_clock *b, size_t n)
{
    b->bytes += n;
}

/* min_rate 0: no extension, the whole body within timeout_ms. */
static inline int64_t body_clock_deadline(const struct body_clock *b, int64_t timeout_ms,
                                          uint32_t min_rate)
{
    int64_t extra = 0;
    if (min_rate)
        extra = (int64_t)(b->bytes / min_rate * 1000 + b->bytes % min_rate * 1000 / min_rate);
    return b->start_ms + timeout_ms + extra;
}

#endif

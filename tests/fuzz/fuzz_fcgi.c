/* libFuzzer target: the input is what a FastCGI application sends back for
 * one request. The first byte picks the size of the reads; the rest goes
 * through the FastCGI codec as models/upstream_pump.c feeds it: the head
 * from a growing 16 KiB buffer that drops what the codec hands back, then
 * the body in reads no larger than the room left, into a 64 KiB buffer
 * with REFRAME_SLACK of spill.
 * Any broken invariant aborts: a client head that is not one status line,
 * header lines and an empty line; framing that writes past its room; a
 * body that goes on after END_REQUEST. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/reframe.h"
#include "http/upstream_codec.h"

#define ENSURE(c)                                                                   \
    do {                                                                            \
        if (!(c))                                                                   \
            __builtin_trap();                                                       \
    } while (0)

static void check_client_head(const char *h, size_t n)
{
    ENSURE(n >= 17 && !memcmp(h, "HTTP/1.1 ", 9) && !memcmp(h + n - 4, "\r\n\r\n", 4));
    for (size_t i = 0; i < n; i++) {
        if (h[i] == '\n')
            ENSURE(i > 0 && h[i - 1] == '\r');
        if (h[i] == '\r')
            ENSURE(i + 1 < n && h[i + 1] == '\n');
    }
}

/* Body bytes src[0..len) in reads of step bytes into dbuf, as the pump
 * does; returns -1 once the codec refused them. */
static int feed_body(struct upstream_framing *b, struct reframe_out *o, const char *src,
                     size_t len, size_t step)
{
    for (size_t i = 0; i < len && b->active;) {
        if (o->len == o->cap) { /* the client took it all */
            memcpy(o->buf, o->over, o->over_len);
            o->len = o->over_len;
            o->over_len = 0;
        }
        size_t k = step < len - i ? step : len - i;
        if (k > o->cap - o->len)
            k = o->cap - o->len;
        size_t before = o->len + o->over_len;
        long t = upstream_fcgi.response_body(b, src + i, k, o);
        if (t < 0)
            return -1;
        ENSURE((size_t)t <= k && o->len <= o->cap && o->over_len <= REFRAME_SLACK);
        ENSURE(o->len + o->over_len <= before + (size_t)t + REFRAME_SLACK);
        ENSURE((size_t)t == k || !b->active);
        if (!t && b->active)
            return -1;
        i += (size_t)t;
        if (o->len + o->over_len > o->cap - 1024) { /* as if sent */
            o->len = 0;
            o->over_len = 0;
        }
    }
    return 0;
}

static void run(const char *buf, size_t len, size_t step, int head_request, int minor)
{
    static char head[16384 + 512], work[16384], dbuf[65536], spill[REFRAME_SLACK];
    const struct upstream_codec *c = &upstream_fcgi;
    struct upstream_framing b;
    struct upstream_head h = {0};
    memset(&b, 0, sizeof b);
    size_t have = 0, wl = 0;
    int n = HTTP_PARSE_INCOMPLETE;
    /* the pump's head buffer: reads added at its end, what the codec
     * hands back (an answer below 200) dropped from its start */
    while (n == HTTP_PARSE_INCOMPLETE && have < len) {
        size_t k = step < len - have ? step : len - have;
        if (k > sizeof work - wl)
            k = sizeof work - wl;
        if (!k)
            return; /* the pump's "response head too large" */
        memcpy(work + wl, buf + have, k);
        wl += k;
        have += k;
        for (;;) {
            h.keepalive = 1;
            n = c->response_head(work, wl, 16384, head_request, minor, &h, &b, head,
                                 sizeof head);
            if (n < 0 || h.status >= 200)
                break;
            ENSURE(n > 0 && (size_t)n <= wl);
            memmove(work, work + n, wl - (size_t)n);
            wl -= (size_t)n;
            n = HTTP_PARSE_INCOMPLETE;
        }
    }
    if (n < 0)
        return;
    ENSURE((size_t)n <= wl && h.len <= sizeof head);
    check_client_head(head, h.len);
    struct reframe_out o = {dbuf, 0, sizeof dbuf, spill, 0};
    if (feed_body(&b, &o, work + n, wl - (size_t)n, step) == 0)
        feed_body(&b, &o, buf + have, len - have, step);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t step = (size_t)data[0] * 7 + 1;
    run((const char *)data + 1, size - 1, step, 0, 1);
    run((const char *)data + 1, size - 1, step, 1, 1);
    run((const char *)data + 1, size - 1, 65536, 0, 0);
    return 0;
}

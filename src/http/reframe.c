#include "http/reframe.h"

#include <assert.h>
#include <string.h>

/* Appends p[0..n) to out: buf while it has room, then over. */
static void put(struct reframe_out *o, const char *p, size_t n)
{
    size_t k = o->cap - o->len < n ? o->cap - o->len : n;
    memcpy(o->buf + o->len, p, k);
    o->len += k;
    if (k == n)
        return;
    /* Only a caller that broke the room rule of reframe.h gets here
     * without an overflow area, or past REFRAME_SLACK bytes of it. */
    assert(o->over && o->over_len + (n - k) <= REFRAME_SLACK);
    memcpy(o->over + o->over_len, p + k, n - k);
    o->over_len += n - k;
}

/* Why REFRAME_SLACK bounds the growth of one call: body_decode hands out
 * one data run per chunk it sees in the input (a chunk whose data the
 * input cuts short ends the call). A run written here costs its data plus
 * the chunk line (hex digits of its length, CRLF) and a CRLF after it.
 * Every run but the first came after its own chunk line in the input,
 * with at least as many digits (its length is at most the chunk's), and
 * after the CRLF that ended the data of the run before: the input paid
 * for that framing. The first run and the last chunk are not paid for. */
long body_reframe(struct body_skip *b, int chunked, const char *src, size_t n, uint64_t max,
                  struct reframe_out *out)
{
    int was_active = body_skip_active(b);
    size_t i = 0;
    while (i < n && body_skip_active(b)) {
        struct body_data d;
        long k = body_decode(b, src + i, n - i, max, &d);
        if (k < 0)
            return k;
        if (k == 0)
            break; /* cannot happen while active; never spin */
        i += (size_t)k;
        if (!d.len)
            continue;
        if (chunked) {
            char head[19];
            put(out, head, body_chunk_head(d.len, head));
        }
        put(out, d.p, d.len);
        if (chunked)
            put(out, "\r\n", 2);
    }
    if (chunked && was_active && !body_skip_active(b))
        put(out, BODY_LAST_CHUNK, sizeof BODY_LAST_CHUNK - 1);
    return (long)i;
}

/* A body passed on by the reverse proxy, framed anew: the peer's framing
 * bytes are decoded (strictly, by body_decode) and dropped, and only the
 * data goes on, in framing herd writes itself. A Content-Length body goes
 * on as it is; a chunked one as one chunk per data run (body_chunk_head,
 * no extensions), then BODY_LAST_CHUNK with no trailers. So an upstream
 * (or a client) never sees a chunk extension, a trailer, a leading zero or
 * any other byte whose reading two parsers could disagree on: the request
 * smuggling that passes framing through cannot pass here. Sans-I/O. */
#ifndef HERD_HTTP_REFRAME_H
#define HERD_HTTP_REFRAME_H

#include <stddef.h>
#include <stdint.h>

#include "http/body.h"

/* The most one body_reframe call writes beyond the input it takes: the
 * head of the first chunk (at most 16 hex digits and CRLF), the CRLF after
 * its data, and the last chunk. Every later chunk of the same call is
 * paid for by the chunk line and CRLF it replaces (see reframe.c). */
#define REFRAME_SLACK (16 + 2 + 2 + sizeof BODY_LAST_CHUNK - 1)

/* Where the output goes: buf[len..cap) first, then over[over_len..). A
 * caller gives at most cap - len bytes of input per call, so at most
 * REFRAME_SLACK bytes go to over (room it must have); one that leaves
 * REFRAME_SLACK bytes of room in buf beyond the input needs no over. */
struct reframe_out {
    char *buf;
    size_t len, cap;
    char *over;
    size_t over_len;
};

/* Decodes src[0..n) of body b (begun with body_skip_start; chunked says
 * which framing it has, max is the cap as for body_decode) and appends the
 * data, framed anew, to out. Returns the bytes of src taken (fewer than n
 * only when the body ended), or BODY_ERROR / BODY_TOO_LARGE as
 * body_decode; out then holds the data before the error. */
long body_reframe(struct body_skip *b, int chunked, const char *src, size_t n, uint64_t max,
                  struct reframe_out *out);

#endif

/* Reading past a request body we do not use (static files take none), so
 * the next pipelined request starts at the right byte. Handles
 * Content-Length and chunked framing (RFC 9112 7.1), with a size cap. */
#ifndef HERD_HTTP_BODY_H
#define HERD_HTTP_BODY_H

#include <stddef.h>
#include <stdint.h>

struct body_skip {
    int64_t left;   /* bytes of the body (or of the current chunk) still to skip */
    int64_t total;  /* chunked: body bytes seen, for the cap */
    uint8_t state;  /* 0: none/done; see body.c */
};

/* Starts skipping a body of content_length bytes (>= 0) or a chunked one. */
void body_skip_start(struct body_skip *b, int64_t content_length, int chunked);

static inline int body_skip_active(const struct body_skip *b) { return b->state != 0; }

/* Consumes body bytes from buf[0..len). Returns the bytes taken (the body
 * ends when body_skip_active turns 0), or -1 for broken chunked framing or
 * a chunked body over max bytes. */
long body_skip(struct body_skip *b, const char *buf, size_t len, uint64_t max);

#endif

/* Message bodies: Content-Length and chunked framing (RFC 9112 6.3, 7.1),
 * decoded strictly. A decoder takes a body's bytes as they arrive, in any
 * pieces, and says where its data is and where the body ends, so the next
 * pipelined message starts at the right byte. The static handler only skips
 * bodies (body_skip); the reverse proxy decodes them (body_decode) and
 * frames the data anew, so no framing byte a peer wrote is passed on.
 *
 * What chunked framing may hold, and nothing else:
 *   chunk-size    1 to 16 hex digits (no overflow; leading zeros count)
 *   chunk-ext     *( ";" OWS token [ "=" OWS ( token / quoted-string ) ] OWS )
 *                 right after the digits: RFC 9112's BWS before the first ';'
 *                 (an error to h11) and before '=' is refused; OWS alone may
 *                 end the size;
 *                 the whole chunk line at most BODY_CHUNK_LINE_MAX
 *   line ends     CRLF only: a bare LF or CR anywhere is an error
 *   trailers      field lines as in a head (token ":" OWS value), no obs-fold,
 *                 no Content-Length or Transfer-Encoding field,
 *                 the section at most max_trailer bytes
 * Every byte of a chunked body, framing included, counts toward the size
 * cap. */
#ifndef HERD_HTTP_BODY_H
#define HERD_HTTP_BODY_H

#include <stddef.h>
#include <stdint.h>

#define BODY_CHUNK_LINE_MAX 4096   /* a chunk-size line with its extensions */

/* Negative returns of body_decode and body_skip. */
enum { BODY_ERROR = -1, BODY_TOO_LARGE = -2 };

/* The answer to a body that failed with rc: 413 past a limit, else 400. */
static inline unsigned body_error_status(long rc)
{
    return rc == BODY_TOO_LARGE ? 413 : 400;
}

/* 24 bytes: it lives in every connection and every proxy exchange. */
struct body_skip {
    uint64_t left;        /* data bytes still to come: of the body, or of this chunk */
    uint64_t total;       /* chunked: every byte so far, framing included */
    uint16_t line;        /* bytes of the current chunk line (of a trailer name) */
    uint8_t state;        /* 0: no body, or it ended; see body.c */
    uint8_t digits;       /* hex digits of the current chunk-size (in trailers:
                             the framing names the trailer name may still be) */
    uint32_t trailer;     /* bytes left for the trailer section */
};

/* A run of body data inside the buffer given to body_decode. */
struct body_data {
    const char *p;
    size_t len;
};

/* Starts a body of content_length bytes (>= 0), or a chunked one whose
 * trailer section may hold up to max_trailer bytes. */
void body_skip_start(struct body_skip *b, int64_t content_length, int chunked,
                     uint32_t max_trailer);

static inline int body_skip_active(const struct body_skip *b) { return b->state != 0; }

/* Takes framing bytes from buf[0..len) and then at most one run of data,
 * which *data points at (len 0 when the bytes taken were all framing).
 * Returns the bytes taken: fewer than len only when the body ended or a
 * data run was returned. BODY_ERROR for framing RFC 9112 does not allow,
 * BODY_TOO_LARGE past max bytes of chunked body or an over-long trailer
 * section or chunk line. */
long body_decode(struct body_skip *b, const char *buf, size_t len, uint64_t max,
                 struct body_data *data);

/* body_decode until the input or the body ends, dropping the data. */
long body_skip(struct body_skip *b, const char *buf, size_t len, uint64_t max);

/* Writes the chunk-size line for a chunk of n data bytes ("1f4\r\n") into
 * out, which has room for 19 bytes; returns its length. The chunk ends with
 * "\r\n"; the body with BODY_LAST_CHUNK. */
size_t body_chunk_head(uint64_t n, char out[19]);
#define BODY_LAST_CHUNK "0\r\n\r\n"

#endif

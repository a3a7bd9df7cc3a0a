/* HTTP/1.1 response framing for the load generator's client (RFC 9112
 * section 6.3): it checks the status line, finds where each response ends
 * (Content-Length, chunked, or the connection's close) and skips bodies by
 * counting, never by scanning. Sans-I/O: bytes in, a state out; it reads
 * the head in place, so it keeps no copy of anything. */
#ifndef HERD_BENCH_LOAD_RESP_H
#define HERD_BENCH_LOAD_RESP_H

#include <stddef.h>
#include <stdint.h>

#define RESP_MAX_HEAD 16384 /* status line and headers */

enum resp_state {
    RESP_HEAD,          /* waiting for the whole head */
    RESP_BODY_LEN,      /* remaining body bytes by Content-Length */
    RESP_CHUNK_SIZE,    /* inside a chunk-size line */
    RESP_CHUNK_EXT,     /* chunk extensions: skipped up to LF */
    RESP_CHUNK_SIZE_LF, /* after the CR of a chunk-size line */
    RESP_CHUNK_DATA,    /* remaining bytes of a chunk */
    RESP_CHUNK_END,     /* the CRLF after chunk data */
    RESP_CHUNK_END_LF,
    RESP_TRAILER,       /* at the start of a trailer line or the final CRLF */
    RESP_TRAILER_LINE,  /* inside a trailer line: skipped up to LF */
    RESP_TRAILER_LF,    /* after the CR of the final empty line */
    RESP_UNTIL_CLOSE,   /* the body ends when the server closes */
    RESP_DONE,
};

struct load_resp {
    uint8_t state;
    uint8_t head_only;  /* answers a HEAD request: no body whatever the head says */
    uint8_t keepalive;  /* the connection may carry another request after this */
    uint8_t digits;     /* hex digits seen in the current chunk-size line */
    uint16_t status;
    uint64_t remaining;
    const char *error;  /* why the response is invalid, when load_resp_parse returned -1 */
};

/* Prepares for the response to the next request. */
void load_resp_start(struct load_resp *r, int head_request);

/* Consumes bytes of the current response from buf[0..len) and returns how
 * many it took; r->state is RESP_DONE once the response has ended, and the
 * rest of buf belongs to the next one. While the head is incomplete it
 * returns 0 and takes nothing: call again with the same bytes and more
 * after them. Interim 1xx responses are skipped. Returns -1 for an invalid
 * response (bad status line, bad or conflicting Content-Length, bad chunk
 * framing, a head over RESP_MAX_HEAD) with r->error set. */
long load_resp_parse(struct load_resp *r, const char *buf, size_t len);

/* Body bytes that may be discarded unseen next: the rest of a
 * Content-Length body or of a chunk, everything for a body delimited by
 * the close (UINT64_MAX), else 0. */
uint64_t load_resp_skippable(const struct load_resp *r);

/* n bytes, at most load_resp_skippable(r), were discarded unseen. */
void load_resp_skip(struct load_resp *r, uint64_t n);

/* The server closed the connection: returns 1 when that completes the
 * response (a body delimited by the close), else 0 (cut short). */
int load_resp_eof(struct load_resp *r);

#endif

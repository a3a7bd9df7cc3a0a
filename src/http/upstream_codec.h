/* How the reverse proxy speaks to an upstream, as a sans-I/O codec: the
 * pump (models/upstream_pump.c) owns sockets, buffers, pool and timers and
 * calls these ops on bytes; a codec never reads or writes a socket. HTTP/1.1
 * (http/upstream_http1.c) is the first codec; FastCGI is meant to be a
 * second one behind the same ops, not a second pump.
 *
 * Every body is framed anew by the codec (http/reframe.h): the pump never
 * forwards framing it did not produce, in either direction. */
#ifndef HERD_HTTP_UPSTREAM_CODEC_H
#define HERD_HTTP_UPSTREAM_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "http/body.h"
#include "http/fcgi_params.h"
#include "http/parser.h"
#include "http/reframe.h"

/* What the request head needs besides the client's request. */
struct upstream_req_info {
    const char *client_addr;     /* for X-Forwarded-For (or REMOTE_ADDR) */
    const char *default_host;    /* Host when the client sent none */
    int pass_underscores;        /* keep header names with '_' */
    const struct http_str *path; /* the path to send (a stripped prefix), or NULL: as sent */
    const struct fcgi_env *fcgi; /* FastCGI: the script and its parameters */
    int https;                   /* the client came over TLS (X-Forwarded-Proto) */
};

/* FastCGI's record reader (http/fcgi_codec.c), 24 bytes as body_skip. */
struct fcgi_rx {
    uint64_t body_left;          /* Content-Length bytes still due (in the head:
                                  * bytes whose STDERR was logged) */
    uint32_t left;               /* content bytes left in the current record */
    uint8_t pad;                 /* padding bytes left after them */
    uint8_t type;                /* the current record's type */
    uint8_t have;                /* bytes of the next record header in hdr */
    uint8_t spare;
    uint8_t hdr[8];
};

/* A body on its way through, in one direction. */
struct upstream_framing {
    union {
        struct body_skip skip;   /* the peer's framing, decoded */
        struct fcgi_rx fcgi;     /* a FastCGI response's records */
    };
    const char *tag;             /* names the exchange in log lines (the script) */
    uint8_t kind;                /* codec-specific (HTTP/1.1: enum upstream_body) */
    uint8_t aside;               /* read into a scratch buffer, not in place */
    uint8_t active;              /* more body bytes are due */
};

/* The response head, as the client will get it. */
struct upstream_head {
    uint16_t status;             /* < 200: an interim answer, dropped */
    uint8_t keepalive;           /* in: the client may keep alive; out: it will */
    uint8_t pass_server;         /* in: the upstream's Server and Date reach the client */
    uint8_t reusable;            /* the upstream connection may carry another request */
    size_t len;                  /* bytes of the client's head written to out */
    const char *err;             /* why the head is refused (logged), or NULL */
};

struct upstream_codec {
    const char *name;
    /* The upstream's request head into buf[0..cap): its length, or -1 when
     * it does not fit. */
    long (*request_head)(const struct http_request *req, const struct upstream_req_info *info,
                         char *buf, size_t cap);
    /* Starts the request's body b (none: b->active is 0). max_line caps
     * the client's chunk lines. */
    void (*request_body_start)(struct upstream_framing *b, const struct http_request *req,
                               size_t max_line);
    /* Client body bytes src[0..n) framed for the upstream into out (room
     * as reframe.h says). Returns the bytes taken (fewer than n only when
     * the body ended), or BODY_ERROR / BODY_TOO_LARGE (max bytes). */
    long (*request_body)(struct upstream_framing *b, const char *src, size_t n, uint64_t max,
                         struct reframe_out *out);
    /* Parses one response head from buf[0..len) (at most max_head bytes)
     * and writes the client's head into out[0..cap). Returns the bytes it
     * took, HTTP_PARSE_INCOMPLETE, or HTTP_PARSE_ERROR (h->err says why,
     * or NULL for a head that does not fit out). An interim answer
     * (h->status < 200) writes nothing: drop its bytes and parse again.
     * FastCGI hands back its framing and STDERR the same way, and may
     * rewrite buf to do so (its head's bytes kept, moved together). b keeps
     * the codec's state between calls (zeroed before the first); the head
     * done, it is the response body. */
    int (*response_head)(char *buf, size_t len, size_t max_head, int head_request,
                         int client_minor, struct upstream_head *h, struct upstream_framing *b,
                         char *out, size_t cap);
    /* Upstream body bytes src[0..n) framed for the client into out. When
     * b->aside is 0, src is out->buf + out->len (read in place) and only
     * out->len moves. Returns the bytes taken (fewer than n: the body
     * ended and the rest is not part of it), or BODY_ERROR. */
    long (*response_body)(struct upstream_framing *b, const char *src, size_t n,
                          struct reframe_out *out);
    /* The upstream closed the connection: did that end the body? When it
     * did, response_body is called once more with n == 0 (src NULL) to
     * end the client's framing (a close-delimited body re-chunked). */
    int (*response_ends_at_close)(const struct upstream_framing *b);
    /* Bytes that tell the upstream the client left (FastCGI's
     * ABORT_REQUEST), sent before the connection closes; NULL: none. */
    const char *abort;
    size_t abort_len;
};

extern const struct upstream_codec upstream_http1;
extern const struct upstream_codec upstream_fcgi;

#endif

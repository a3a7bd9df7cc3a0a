/* The one request step: what happens around http_handle, written once for
 * every driver (event loop, threads, coro, iterative). It is sans-I/O: it
 * takes bytes from a connection's input and says what the driver must do
 * next; a driver only moves bytes and waits.
 *
 *   input -> [PROXY header] -> [skip the last request's body]
 *         -> parse -> error page, static answer, or hand to the proxy
 *         -> count and log once -> close, linger or go on
 *
 * A driver calls step_next until it says STEP_MORE (or the connection is
 * to close), writing each STEP_ANSWER's plan as it comes (or batching it). */
#ifndef HERD_MODELS_STEP_H
#define HERD_MODELS_STEP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "http/body.h"
#include "http/handler.h"
#include "models/body_clock.h"
#include "proc/accesslog.h"
#include "proc/config.h"
#include "proc/scoreboard.h"

/* What a loop or thread shares among its connections. */
struct step_ctx {
    const struct serve_config *cfg;
    struct http_ctx *http;
    struct sb_slot *slot;
    struct alog *alog;          /* may be off */
    /* The reverse proxy's route for req, or -1: static. NULL: no routes. */
    int (*route)(void *arg, const struct http_request *req);
    void *route_arg;
    uint8_t stopping;           /* answer, then close: no more keep-alive */
};

/* Per connection, 80 bytes: it lives in every connection slot (the event
 * loop's struct conn, coro's conn_state), so an idle connection costs this
 * and no buffer. The client's address is kept inline (16 bytes) rather than
 * as a sockaddr_storage (128) or a malloc'd copy. */
struct step_conn {
    struct body_skip skip;      /* the last request's body, read past */
    struct body_clock body;     /* ...on its own clock */
    int64_t head_us;            /* loop clock when the step first saw this head */
    uint32_t head_of;           /* ...which request it is (nreq + 1 then) */
    uint32_t nreq;              /* requests taken on this connection */
    uint8_t await_pp;           /* a PROXY protocol header comes first */
    uint8_t status_ok;          /* may read the status page (--status-allow) */
    uint8_t closing;            /* an answer said close: take nothing more */
    uint8_t linger;             /* ...and the peer may still send: drain first */
    /* Pipelining, for the proxy's half-close rule (upstream_pump.c): the
     * request in hand came behind an earlier one, unanswered then; the
     * next one will have (a request came with bytes of it behind). */
    uint8_t this_pipelined;
    uint8_t next_pipelined;
    uint8_t peer_family;        /* AF_INET/AF_INET6, or 0 (unix, unknown) */
    uint8_t peer[16];
    uint16_t peer_port;         /* network byte order (FastCGI's REMOTE_PORT) */
};

enum step_action {
    STEP_MORE,      /* all input used, or a head is incomplete: read more */
    STEP_ANSWER,    /* send r->plan (counted and logged already) */
    STEP_UPSTREAM,  /* proxy r->req (head at input[0..r->head_len)) to r->route */
    STEP_CLOSE,     /* the input cannot be trusted: close without an answer */
};

struct step_result {
    size_t used;                /* input bytes this step took */
    struct http_plan plan;      /* STEP_ANSWER */
    int route;                  /* STEP_UPSTREAM */
    size_t head_len;            /* STEP_UPSTREAM: the request head's bytes */
    int body_started;           /* a request body begins: start its clock */
};

/* A new connection: peer is the accepted address (NULL when unknown),
 * unix_client whether it came through a unix-socket listener, pp whether
 * a PROXY header must come first. */
void step_conn_init(struct step_conn *c, const struct step_ctx *x,
                    const struct sockaddr_storage *peer, int unix_client, int pp);

/* STEP_UPSTREAM's request is not taken yet (answers before it are still
 * being sent): the next step_next parses it again. */
void step_put_back(struct step_conn *c);

/* in[0..n) came before the answer in hand ended: when it holds a byte of
 * a next request (not only the CR and LF some clients send after a body,
 * which a parser skips), that request is pipelined. */
void step_saw_next(struct step_conn *c, const char *in, size_t n);

/* One step over in[0..len): answers go into out (which must have room for
 * HTTP_HEAD_RESERVE + HTTP_STATUS_MAX + max_header_size). req is the
 * driver's request struct, which STEP_UPSTREAM leaves filled. */
enum step_action step_next(struct step_ctx *x, struct step_conn *c, const char *in,
                           size_t len, struct http_request *req, struct http_out *out,
                           struct step_result *r);

/* The one accounting hook: counts a request and its status, logs it
 * (req NULL: it did not parse). The proxy calls it when an exchange ends. */
void step_account(struct step_ctx *x, const struct step_conn *c,
                  const struct http_request *req, unsigned status, uint64_t bytes);

/* A TLS listener behind a load balancer: the PROXY header comes before
 * the handshake, so the driver takes it from the raw bytes in[0..len)
 * (peeked). Returns its length (consume that much), 0 while incomplete,
 * -1 when the bytes are not one (close). */
long step_take_pp(const struct step_ctx *x, struct step_conn *c, const char *in, size_t len);

/* The client's address as a sockaddr (family 0 when unknown). */
void step_peer(const struct step_conn *c, struct sockaddr_storage *ss);

/* Is a body (of the last request) being read past? */
static inline int step_in_body(const struct step_conn *c) { return body_skip_active(&c->skip); }

#endif

/* The reverse proxy's driver-agnostic side: upstream sockets (non-blocking
 * connect), a keep-alive pool, server choice (round-robin or least
 * connections), fail marking, timeouts, and the exchange pump that streams
 * bodies both ways through bounded buffers. The HTTP side (which requests,
 * which headers, which framing) is a codec (http/upstream_codec.h). The
 * pool and server choice live in upstream_pool.c, the pump in
 * upstream_pump.c.
 *
 * A driver (the event loop: upstream_evloop.c; coro: coro_proxy.c) owns
 * one struct proxy per loop or thread, hands a request over with
 * upstream_start, feeds readiness to the pump, and implements struct
 * up_driver: the client's timers and fate, and watching upstream fds. All
 * socket I/O is non-blocking; the pump never waits. */
#ifndef HERD_MODELS_UPSTREAM_H
#define HERD_MODELS_UPSTREAM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "http/parser.h"
#include "models/step.h"
#include "net/tls.h"

struct proxy;
struct xfer;

/* Generations of upstream fds fit in this mask (a driver's tag). */
#define UP_GEN_MASK 0x0fffffffu

/* The client's timer during an exchange. */
enum { UT_NONE, UT_SEND, UT_BODY };

/* What a driver does for the pump; arg is proxy_env.drv_arg. */
struct up_driver {
    /* Runs the client's timer `which` (UT_SEND restarts; UT_BODY is the
     * body clock of client->body). */
    void (*client_timer)(void *arg, void *client, int which);
    /* Closes the client at once; the driver ends the exchange with
     * upstream_abort (not from inside this call's caller's pump: see below). */
    void (*client_close)(void *arg, void *client);
    /* Input of the client's next request that came after the body:
     * keep it. 0, or -1 when it cannot (the client is then closed). */
    int (*client_leftover)(void *arg, void *client, const char *p, size_t n);
    /* The exchange ended normally (its step state says close or linger). */
    void (*client_done)(void *arg, void *client);
    /* Watches a new upstream fd (generation gen) for events; 0 or -errno. */
    int (*watch)(void *arg, int fd, uint32_t gen);
    /* fd, watched, is about to be closed. */
    void (*forget)(void *arg, int fd);
    /* Optional: client input the driver took off the socket (uring:
     * receive buffers that land until its receive's cancel does), which
     * comes before what the socket still holds: copies up to n bytes of
     * it; 0 when there is none (read the socket), -EAGAIN when there is
     * none yet but the socket is not ours to read (the driver raises
     * EPOLLIN through upstream_client_event when that changes). */
    ssize_t (*client_input)(void *arg, void *client, void *buf, size_t n);
    /* 1 when the driver holds input of the client's next request (read
     * with the one upstream, or behind its body): a client that then
     * half-closes has sent its next request and is not gone. */
    int (*client_pending)(void *arg, void *client);
    /* Optional: 1 when the client's connection must close after its
     * answer (a stopping worker that cannot hand it over: not reloading,
     * or it cannot move); NULL: *proxy_env.stopping says so for all. */
    int (*client_must_close)(void *arg, void *client);
};

struct proxy_env {
    const struct serve_config *cfg;
    struct step_ctx *step;       /* counters, access log */
    const uint8_t *stopping;     /* the driver's graceful-stop flag */
    char *rbuf;                  /* the driver's scratch read buffer */
    size_t in_cap;               /* its size */
    int max_fds;
    const struct up_driver *drv;
    void *drv_arg;
    struct scoreboard *sb;       /* upstream names and stalls (pools: step->slot); may be NULL */
    int loops, index;            /* this pool is loop `index` of `loops` in the process
                                  * (threads, coro): --upstream-keepalive is split
                                  * among them; 0, 0: the process's only one */
};

/* NULL when the config has no proxy routes. Exits on OOM (start-up). */
struct proxy *upstream_create(const struct proxy_env *env);
/* Closes the pooled connections (end the exchanges first). */
void upstream_destroy(struct proxy *px);

/* The env's config and scratch buffer. */
const struct serve_config *upstream_config(const struct proxy *px);
char *upstream_scratch(const struct proxy *px);

/* The route index for req, or -1 when it is served locally. */
int upstream_route(struct proxy *px, const struct http_request *req);

/* Starts proxying req (parsed from head[0..head_len)) for the client (fd,
 * its TLS transport ssl or NULL, step state st) to the route's group; body[0..body_len) are the bytes
 * that followed the head. Returns the body bytes it took, or -1 when out
 * of memory (close the client). *xp is the exchange; it starts moving
 * with upstream_kick, once the caller has stored the input that is left. */
long upstream_start(struct proxy *px, void *client, int fd, SSL *ssl, struct step_conn *st,
                    int route, const struct http_request *req, const char *head,
                    size_t head_len, const char *body, size_t body_len, struct xfer **xp);
/* Moves bytes until nothing moves; may end the exchange (client_done or
 * client_close). */
void upstream_kick(struct proxy *px, struct xfer *x);
/* The client's socket raised events (EPOLL* bits). */
void upstream_client_event(struct proxy *px, struct xfer *x, uint32_t events);
/* For a driver that cannot tell which socket woke it (coro): has the
 * client left (EOF or RST) while its request is upstream? Then the
 * exchange ends as an abort logged 499 and -1 is returned; else 0. */
int upstream_client_check(struct proxy *px, struct xfer *x);
/* Does x still read its request's body from the client? Input that comes
 * while it does not is the client's next requests. */
int upstream_reads_body(const struct xfer *x);
/* The client is closing while the exchange runs: end it, free x. */
void upstream_abort(struct proxy *px, struct xfer *x);

/* The upstream fd's socket raised events (gen: its generation). */
void upstream_event(struct proxy *px, int fd, uint32_t gen, uint32_t events);
/* x's upstream socket raised events (a driver that knows the exchange). */
void upstream_ready(struct proxy *px, struct xfer *x, uint32_t events);
/* Expires upstream timers due now (the event loop, after each batch). */
void upstream_expire(struct proxy *px);
/* Earliest upstream deadline in ms (clock_now_ms scale), or -1. */
int64_t upstream_next_deadline(const struct proxy *px);

/* For a driver that does not watch pooled connections (coro): closes
 * those the server closed (or that have bytes no request asked for).
 * noted(fd): did anything happen on fd since the last sweep (an input,
 * hang-up or error event)? Only those are looked at, one recv each. */
void upstream_sweep_idle(struct proxy *px, uint32_t (*noted)(int fd));

/* For a driver that waits per exchange (coro): x's upstream fd (-1: none
 * yet), whether it is still connecting, and its timer's deadline (-1:
 * none). upstream_timeout runs the upstream timer of x that is due. */
int upstream_fd(const struct xfer *x);
int upstream_connecting(const struct xfer *x);
int64_t upstream_deadline(const struct proxy *px, const struct xfer *x);
void upstream_timeout(struct proxy *px, struct xfer *x);

#endif

/* The reverse proxy's driver, private to the event-loop models: upstream
 * sockets (non-blocking connect), a keep-alive pool per worker, server
 * choice (round-robin or least connections), fail marking, timeouts, and
 * the streaming of bodies in both directions through bounded buffers. The
 * HTTP side (which requests, which headers, which framing) is http/proxy.c.
 * The pool and server choice live in upstream_pool.c, the exchange pump in
 * upstream_pump.c.
 *
 * conn.c hands a request over with proxy_start; from then on the client's
 * events go to proxy_client_event until the exchange ends, when the client
 * is handed back (conn_proxy_resume) after the current event batch. */
#ifndef HERD_MODELS_UPSTREAM_H
#define HERD_MODELS_UPSTREAM_H

#include <stddef.h>
#include <stdint.h>

#include "http/parser.h"

struct evloop;
struct conn;
struct proxy;

/* NULL when the config has no proxy routes. Exits on OOM (start-up). */
struct proxy *proxy_create(struct evloop *ev);
/* Closes the pooled connections (the client connections are closed first). */
void proxy_destroy(struct evloop *ev);

/* The route index for req, or -1 when it is served locally. */
int proxy_route(const struct evloop *ev, const struct http_request *req);

/* Starts proxying req (parsed from head[0..head_len)) for client c to the
 * route's group; body[0..body_len) are the bytes that followed the head.
 * Returns the body bytes it took, or -1 when out of memory (close c). The
 * exchange starts moving with proxy_kick, once the caller has stored the
 * input that is left. */
long proxy_start(struct evloop *ev, struct conn *c, int route, const struct http_request *req,
                 const char *head, size_t head_len, const char *body, size_t body_len);
void proxy_kick(struct evloop *ev, struct conn *c);

void proxy_client_event(struct evloop *ev, struct conn *c, uint32_t events);
/* c is closing while an exchange runs: end it, close its upstream. */
void proxy_abort(struct evloop *ev, struct conn *c);

/* An epoll event for an upstream connection (its tag has TAG_UPSTREAM). */
void proxy_upstream_event(struct evloop *ev, uint64_t tag, uint32_t events);

/* After each event batch: hands finished clients back, expires timers. */
void proxy_after_events(struct evloop *ev);
/* Earliest upstream deadline in ms (clock_now_ms scale), or -1. */
int64_t proxy_next_deadline(const struct evloop *ev);

#endif

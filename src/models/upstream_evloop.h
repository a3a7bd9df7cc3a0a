/* The event loop's side of the reverse proxy (models/upstream.h is the
 * driver-agnostic pump): it implements the pump's driver ops over struct
 * conn and the loop's epoll set and timer queues.
 *
 * conn.c hands a request over with proxy_start; from then on the client's
 * events go to proxy_client_event until the exchange ends, when the client
 * is handed back (conn_proxy_resume) after the current event batch. */
#ifndef HERD_MODELS_UPSTREAM_EVLOOP_H
#define HERD_MODELS_UPSTREAM_EVLOOP_H

#include <stddef.h>
#include <stdint.h>

#include "http/parser.h"

struct evloop;
struct conn;

/* Leaves ev->proxy NULL when the config has no proxy routes. */
void proxy_create(struct evloop *ev);
/* Closes the pooled connections (the client connections are closed first). */
void proxy_destroy(struct evloop *ev);

/* The route index for req, or -1 when it is served locally. */
int proxy_route(const struct evloop *ev, const struct http_request *req);

/* Starts proxying req for client c (models/upstream.h, upstream_start).
 * Returns the body bytes it took, or -1 when out of memory (close c). */
long proxy_start(struct evloop *ev, struct conn *c, int route, const struct http_request *req,
                 const char *head, size_t head_len, const char *body, size_t body_len);
void proxy_kick(struct evloop *ev, struct conn *c);

void proxy_client_event(struct evloop *ev, struct conn *c, uint32_t events);
/* c is closing while an exchange runs: end it, close its upstream. */
void proxy_abort(struct evloop *ev, struct conn *c);

/* An epoll event tagged TAG_UPSTREAM. */
void proxy_upstream_event(struct evloop *ev, uint64_t tag, uint32_t events);

/* After each event batch: hands finished clients back, expires timers. */
void proxy_after_events(struct evloop *ev);
/* Earliest upstream deadline in ms (clock_now_ms scale), or -1. */
int64_t proxy_next_deadline(const struct evloop *ev);

#endif

/* The uring model as a driver of the upstream pump (models/upstream.h).
 * The pump does plain non-blocking socket calls, so the sockets it works
 * on (upstream connections, and a client while its exchange runs) live in
 * an epoll set that the ring polls as one fd (UK_EPOLL). A client's
 * multishot receive is cancelled when its exchange starts; what it
 * delivers until the cancel lands reaches the pump first
 * (up_driver.client_input), and only then does the pump read the socket
 * itself. When the exchange ends, the connection goes back to the ring
 * after the current round. */
#ifndef HERD_MODELS_UPSTREAM_URING_H
#define HERD_MODELS_UPSTREAM_URING_H

#include <stddef.h>
#include <stdint.h>

#include "http/parser.h"

struct uring_loop;
struct uconn;

/* Leaves u->proxy NULL when the config has no proxy routes. 0, or -1
 * after logging why (no epoll fd). */
int uproxy_create(struct uring_loop *u);
void uproxy_destroy(struct uring_loop *u);

/* The step's route hook (arg: the uring_loop). */
int uproxy_route(void *arg, const struct http_request *req);

/* Starts proxying req for c, whose output is all out (its receive's
 * cancel is on its way); returns the body bytes taken, or -1 (close c).
 * The exchange moves once the caller stored the rest of the input
 * (c->kick). */
long uproxy_start(struct uring_loop *u, struct uconn *c, int route,
                  const struct http_request *req, const char *head, size_t head_len,
                  const char *body, size_t body_len);
void uproxy_kick(struct uring_loop *u, struct uconn *c);
/* Input landed in c's buffers, or its receive ended: the pump reads. */
void uproxy_client_ready(struct uring_loop *u, struct uconn *c);
/* c closes while its exchange runs. */
void uproxy_abort(struct uring_loop *u, struct uconn *c);
/* Does c's exchange still read its request body (upstream_reads_body)? */
int uproxy_reads_body(struct uring_loop *u, struct uconn *c);

/* The epoll set is readable (a UK_EPOLL completion). */
void uproxy_on_poll(struct uring_loop *u, uint32_t cqe_flags);
/* After each round: hands ended exchanges' clients back, expires timers. */
void uproxy_after_round(struct uring_loop *u);
/* Earliest upstream deadline (clock_now_ms scale), or -1. */
int64_t uproxy_next_deadline(const struct uring_loop *u);

#endif

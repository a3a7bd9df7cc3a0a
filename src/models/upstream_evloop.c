/* The event loop as a driver of the upstream pump: a client is a struct
 * conn, upstream fds join the loop's epoll set tagged TAG_UPSTREAM, and a
 * client whose exchange ended is handed back to conn.c after the event
 * batch (serving its next request from inside the pump would nest). */
#include "models/upstream_evloop.h"

#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "models/evloop_internal.h"
#include "models/upstream.h"

static void client_timer(void *arg, void *client, int which)
{
    conn_set_timer(arg, client, which == UT_SEND ? Q_SEND : which == UT_BODY ? Q_BODY : Q_NONE);
}

static void client_close(void *arg, void *client)
{
    conn_close(arg, client); /* ends the exchange through proxy_abort */
}

static int client_leftover(void *arg, void *client, const char *p, size_t n)
{
    struct evloop *ev = arg;
    struct conn *c = client;
    c->in = bufpool_get(&ev->inbufs);
    if (!c->in)
        return -1;
    memcpy(c->in, p, n);
    c->in_len = (uint32_t)n;
    return 0;
}

static void client_done(void *arg, void *client)
{
    struct evloop *ev = arg;
    struct conn *c = client;
    c->xfer = NULL;
    c->resuming = 1;
    if (ev->nresumes == ev->cap_resumes) {
        int cap = ev->cap_resumes ? ev->cap_resumes * 2 : 64;
        struct ev_resume *r = realloc(ev->resumes, (size_t)cap * sizeof *r);
        if (!r) {
            conn_close(ev, c);
            return;
        }
        ev->resumes = r;
        ev->cap_resumes = cap;
    }
    ev->resumes[ev->nresumes++] = (struct ev_resume){conn_fd(ev, c), c->gen};
}

static int watch(void *arg, int fd, uint32_t gen)
{
    struct evloop *ev = arg;
    return loop_add(&ev->loop, fd, LOOP_IN | LOOP_OUT | LOOP_EDGE, TAG_UPSTREAM | fd_tag(fd, gen));
}

static void forget(void *arg, int fd)
{
    (void)arg; /* close() takes it out of the epoll set */
    (void)fd;
}

static int client_pending(void *arg, void *client)
{
    (void)arg;
    const struct conn *c = client;
    return c->in_len > 0; /* kept by settle before the exchange began */
}

static int client_must_close(void *arg, void *client)
{
    return conn_answers_close(arg, client);
}

static const struct up_driver evloop_driver = {
    .client_timer = client_timer, .client_close = client_close,
    .client_leftover = client_leftover, .client_done = client_done, .watch = watch,
    .forget = forget, .client_pending = client_pending,
    .client_must_close = client_must_close,
};

void proxy_create(struct evloop *ev)
{
    const struct proxy_env env = {
        .cfg = ev->cfg, .step = &ev->step, .stopping = &ev->stopping, .rbuf = ev->rbuf,
        .in_cap = ev->in_cap, .max_fds = ev->max_fds, .drv = &evloop_driver, .drv_arg = ev,
        .sb = ev->http.status_arg, /* the scoreboard (evloop.c) */
        .loops = ev->loops, .index = ev->loop_index,
    };
    ev->proxy = upstream_create(&env);
}

void proxy_destroy(struct evloop *ev)
{
    upstream_destroy(ev->proxy);
    ev->proxy = NULL;
    free(ev->resumes);
    ev->resumes = NULL;
}

int proxy_route(const struct evloop *ev, const struct http_request *req)
{
    return upstream_route(ev->proxy, req);
}

long proxy_start(struct evloop *ev, struct conn *c, int route, const struct http_request *req,
                 const char *head, size_t head_len, const char *body, size_t body_len)
{
    conn_set_timer(ev, c, Q_NONE);
    return upstream_start(ev->proxy, c, conn_fd(ev, c), c->ssl, &c->st, route, req, head,
                          head_len, body, body_len, &c->xfer);
}

void proxy_kick(struct evloop *ev, struct conn *c)
{
    if (c->xfer)
        upstream_kick(ev->proxy, c->xfer);
}

void proxy_client_event(struct evloop *ev, struct conn *c, uint32_t events)
{
    if (events & (EPOLLIN | EPOLLRDHUP))
        c->want_read = 1; /* read it when the exchange is over */
    upstream_client_event(ev->proxy, c->xfer, events);
}

void proxy_abort(struct evloop *ev, struct conn *c)
{
    struct xfer *x = c->xfer;
    c->xfer = NULL;
    upstream_abort(ev->proxy, x);
}

void proxy_upstream_event(struct evloop *ev, uint64_t tag, uint32_t events)
{
    upstream_event(ev->proxy, (int)(uint32_t)tag, tag_gen(tag), events);
}

void proxy_after_events(struct evloop *ev)
{
    if (!ev->proxy)
        return;
    /* A resumed client may start and finish another exchange, which
     * appends here: the loop takes those too. */
    for (int i = 0; i < ev->nresumes; i++) {
        struct conn *c = &ev->conns[ev->resumes[i].fd];
        if (c->open && c->gen == ev->resumes[i].gen && c->resuming) {
            c->resuming = 0;
            conn_proxy_resume(ev, c);
        }
    }
    ev->nresumes = 0;
    upstream_expire(ev->proxy);
}

int64_t proxy_next_deadline(const struct evloop *ev)
{
    if (!ev->proxy)
        return -1;
    if (ev->nresumes)
        return clock_now_ms();
    return upstream_next_deadline(ev->proxy);
}

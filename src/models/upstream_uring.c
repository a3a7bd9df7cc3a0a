#include "models/upstream_uring.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "models/upstream.h"
#include "models/uring_internal.h"

/* epoll data: the top bit says client (else upstream), then gen and fd */
#define TAG_CLIENT (1ULL << 63)

struct resume {
    int fd;
    uint32_t gen;
};

struct uring_proxy {
    struct proxy *px;
    int epfd;
    char *rbuf;
    struct resume *resumes;
    int nresumes, cap_resumes;
};

static uint64_t ep_tag(int fd, uint32_t gen)
{
    return (uint64_t)(gen & UR_GEN_MASK) << 32 | (uint32_t)fd;
}

static void arm_poll(struct uring_loop *u)
{
    struct io_uring_sqe *sqe = uring_sqe(&u->ring);
    io_uring_prep_poll_multishot(sqe, u->proxy->epfd, POLLIN);
    io_uring_sqe_set_data64(sqe, uring_tag(UK_EPOLL, 0, 0));
}

/* ---- the pump's driver ops ---- */

static void client_timer(void *arg, void *client, int which)
{
    if (which == UT_SEND)
        uconn_arm(arg, client, UQ_SEND);
    else if (which == UT_BODY)
        uconn_arm(arg, client, UQ_BODY);
    else
        uconn_disarm(arg, client);
}

static void client_close(void *arg, void *client)
{
    uconn_close(arg, client); /* ends the exchange through uproxy_abort */
}

/* Bytes the pump read past the body: they come before any input the
 * connection still buffers. */
static int client_leftover(void *arg, void *client, const char *p, size_t n)
{
    struct uring_loop *u = arg;
    struct uconn *c = client;
    if (!c->in && !(c->in = bufpool_get(&u->inbufs)))
        return -1;
    if (c->in_len + n > u->in_cap)
        return -1;
    memmove(c->in + n, c->in, c->in_len);
    memcpy(c->in, p, n);
    c->in_len += (uint32_t)n;
    return 0;
}

static void client_done(void *arg, void *client)
{
    struct uring_loop *u = arg;
    struct uring_proxy *up = u->proxy;
    struct uconn *c = client;
    c->xfer = NULL;
    c->resuming = 1;
    if (up->nresumes == up->cap_resumes) {
        int cap = up->cap_resumes ? up->cap_resumes * 2 : 64;
        struct resume *r = realloc(up->resumes, (size_t)cap * sizeof *r);
        if (!r) {
            uconn_close(u, c);
            return;
        }
        up->resumes = r;
        up->cap_resumes = cap;
    }
    up->resumes[up->nresumes++] = (struct resume){uconn_fd(u, c), c->gen};
}

static int watch(void *arg, int fd, uint32_t gen)
{
    struct uring_loop *u = arg;
    struct epoll_event e = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
                            .data.u64 = ep_tag(fd, gen)};
    return epoll_ctl(u->proxy->epfd, EPOLL_CTL_ADD, fd, &e) < 0 ? -errno : 0;
}

static void forget(void *arg, int fd)
{
    (void)arg; /* close() takes it out of the epoll set */
    (void)fd;
}

static ssize_t client_input(void *arg, void *client, void *buf, size_t n)
{
    struct uconn *c = client;
    size_t k = uconn_take_input(arg, c, buf, n);
    if (k)
        return (ssize_t)k;
    /* the receive's last buffers may still come: they go first */
    return c->recv_on ? -EAGAIN : 0;
}

static int client_pending(void *arg, void *client)
{
    (void)arg;
    const struct uconn *c = client;
    return c->in_len > 0 || c->nheld > 0; /* kept, or received since (client_input) */
}

static int client_must_close(void *arg, void *client)
{
    return uconn_answers_close(arg, client);
}

static const struct up_driver uring_driver = {
    .client_timer = client_timer, .client_close = client_close,
    .client_leftover = client_leftover, .client_done = client_done, .watch = watch,
    .forget = forget, .client_input = client_input, .client_pending = client_pending,
    .client_must_close = client_must_close,
};

/* ---- the model's side ---- */

int uproxy_create(struct uring_loop *u)
{
    if (!u->cfg->nroutes)
        return 0;
    struct uring_proxy *up = calloc(1, sizeof *up);
    if (!up || !(up->rbuf = malloc(u->in_cap)))
        log_fatal("out of memory at start");
    up->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (up->epfd < 0) {
        log_msg(LOG_CRIT, "epoll_create1: %s", strerror(errno));
        free(up->rbuf);
        free(up);
        return -1;
    }
    const struct proxy_env env = {
        .cfg = u->cfg, .step = &u->step, .stopping = &u->stopping, .rbuf = up->rbuf,
        .in_cap = u->in_cap, .max_fds = u->max_fds, .drv = &uring_driver, .drv_arg = u,
        .sb = u->http.status_arg,
    };
    up->px = upstream_create(&env);
    u->proxy = up;
    arm_poll(u);
    return 0;
}

void uproxy_destroy(struct uring_loop *u)
{
    struct uring_proxy *up = u->proxy;
    if (!up)
        return;
    upstream_destroy(up->px);
    close(up->epfd);
    free(up->rbuf);
    free(up->resumes);
    free(up);
    u->proxy = NULL;
}

int uproxy_route(void *arg, const struct http_request *req)
{
    struct uring_loop *u = arg;
    return upstream_route(u->proxy->px, req);
}

long uproxy_start(struct uring_loop *u, struct uconn *c, int route,
                  const struct http_request *req, const char *head, size_t head_len,
                  const char *body, size_t body_len)
{
    int fd = uconn_fd(u, c);
    struct epoll_event e = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
                            .data.u64 = TAG_CLIENT | ep_tag(fd, c->gen)};
    if (epoll_ctl(u->proxy->epfd, EPOLL_CTL_ADD, fd, &e) < 0)
        return -1;
    uconn_disarm(u, c);
    long took = upstream_start(u->proxy->px, c, fd, NULL, &c->st, route, req, head, head_len,
                               body, body_len, &c->xfer);
    if (took >= 0)
        c->kick = 1;
    return took;
}

void uproxy_kick(struct uring_loop *u, struct uconn *c)
{
    c->kick = 0;
    if (c->xfer)
        upstream_kick(u->proxy->px, c->xfer);
}

void uproxy_client_ready(struct uring_loop *u, struct uconn *c)
{
    if (c->xfer)
        upstream_client_event(u->proxy->px, c->xfer, EPOLLIN);
}

int uproxy_reads_body(struct uring_loop *u, struct uconn *c)
{
    (void)u;
    return c->xfer && upstream_reads_body(c->xfer);
}

void uproxy_abort(struct uring_loop *u, struct uconn *c)
{
    struct xfer *x = c->xfer;
    c->xfer = NULL;
    upstream_abort(u->proxy->px, x);
}

void uproxy_on_poll(struct uring_loop *u, uint32_t cqe_flags)
{
    struct uring_proxy *up = u->proxy;
    if (!up)
        return;
    if (!(cqe_flags & IORING_CQE_F_MORE))
        arm_poll(u);
    struct epoll_event evs[64];
    int n;
    do {
        n = epoll_wait(up->epfd, evs, 64, 0);
        for (int i = 0; i < n; i++) {
            uint64_t t = evs[i].data.u64;
            int fd = (int)(uint32_t)t;
            uint32_t gen = (uint32_t)(t >> 32) & UR_GEN_MASK;
            if (!(t & TAG_CLIENT)) {
                upstream_event(up->px, fd, gen, evs[i].events);
                continue;
            }
            struct uconn *c = fd < u->max_fds ? &u->conns[fd] : NULL;
            if (c && c->open && c->gen == gen && c->xfer)
                upstream_client_event(up->px, c->xfer, evs[i].events);
        }
    } while (n == 64);
}

void uproxy_after_round(struct uring_loop *u)
{
    struct uring_proxy *up = u->proxy;
    if (!up)
        return;
    /* A resumed client may start and end another exchange, which appends
     * here: the loop takes those too. */
    for (int i = 0; i < up->nresumes; i++) {
        struct uconn *c = &u->conns[up->resumes[i].fd];
        if (!c->open || c->gen != up->resumes[i].gen)
            continue;
        c->resuming = 0;
        if (c->xfer)
            continue;
        epoll_ctl(up->epfd, EPOLL_CTL_DEL, up->resumes[i].fd, NULL);
        uconn_resume(u, c);
    }
    up->nresumes = 0;
    upstream_expire(up->px);
}

int64_t uproxy_next_deadline(const struct uring_loop *u)
{
    if (!u->proxy)
        return -1;
    if (u->proxy->nresumes)
        return clock_now_ms();
    return upstream_next_deadline(u->proxy->px);
}

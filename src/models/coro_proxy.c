/* The pump's driver for coroutines. The exchange state machine is the
 * event loop's (models/upstream_pump.c); only the waiting differs: instead
 * of an epoll batch, the coroutine parks on both sockets and, when either
 * is ready or a deadline passes, runs the pump (or the timer that is due).
 * Upstream timers live in the thread's proxy queues, where this coroutine
 * reads its own deadline; the client's timer is a deadline kept here. */
#include "models/coro_proxy.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "core/clock.h"
#include "coro/sched.h"
#include "models/linger.h"
#include "models/upstream.h"

/* One exchange, on the coroutine's stack. */
struct cx {
    struct proxy *px;
    struct xfer *x;
    struct step_conn *sc;
    char *in;                /* the client's input buffer, for the next request */
    size_t left;
    int timer;               /* UT_* */
    int64_t send_timeout;
    int64_t send_deadline;
    uint8_t done, closed;
};

static void client_timer(void *arg, void *client, int which)
{
    (void)arg;
    struct cx *cx = client;
    cx->timer = which;
    /* called again on each bit of progress: the send timer restarts */
    if (which == UT_SEND)
        cx->send_deadline = clock_now_ms() + cx->send_timeout;
    if (which == UT_BODY)
        body_clock_start(&cx->sc->body, clock_now_ms());
}

static void client_close(void *arg, void *client)
{
    (void)arg;
    struct cx *cx = client;
    cx->closed = 1;
    if (cx->x)
        upstream_abort(cx->px, cx->x);
    cx->x = NULL;
}

static int client_leftover(void *arg, void *client, const char *p, size_t n)
{
    (void)arg;
    struct cx *cx = client;
    /* The exchange took all earlier input (its body ended in this read),
     * and n is one read's worth: at most in_cap. */
    memcpy(cx->in + cx->left, p, n);
    cx->left += n;
    return 0;
}

static void client_done(void *arg, void *client)
{
    (void)arg;
    struct cx *cx = client;
    cx->done = 1;
    cx->x = NULL;
}

static int watch(void *arg, int fd, uint32_t gen)
{
    (void)arg; /* the netpoll takes an fd on its first wait */
    (void)fd;
    (void)gen;
    return 0;
}

static int torn_down; /* after the scheduler: no coroutine to forget fds in */

static void forget(void *arg, int fd)
{
    (void)arg;
    if (!torn_down)
        coro_fd_forget(fd);
}

static int client_pending(void *arg, void *client)
{
    (void)arg;
    const struct cx *cx = client;
    return cx->left > 0;
}

static const struct up_driver coro_driver = {
    .client_timer = client_timer, .client_close = client_close,
    .client_leftover = client_leftover, .client_done = client_done, .watch = watch,
    .forget = forget, .client_pending = client_pending,
};

struct proxy *coro_proxy_create(const struct serve_config *cfg, struct step_ctx *step,
                                const uint8_t *stopping, size_t in_cap, int max_fds,
                                struct scoreboard *sb, int loops, int index)
{
    char *rbuf = malloc(in_cap);
    if (!rbuf)
        return NULL;
    const struct proxy_env env = {
        .cfg = cfg, .step = step, .stopping = stopping, .rbuf = rbuf, .in_cap = in_cap,
        .max_fds = max_fds, .drv = &coro_driver, .drv_arg = NULL, .sb = sb,
        .loops = loops, .index = index,
    };
    struct proxy *px = upstream_create(&env);
    if (!px)
        free(rbuf);
    return px;
}

void coro_proxy_destroy(struct proxy *px)
{
    if (!px)
        return;
    char *rbuf = upstream_scratch(px);
    torn_down = 1;
    upstream_destroy(px);
    free(rbuf);
}

/* The client's deadline for its timer, or -1. */
static int64_t client_deadline(const struct cx *cx, const struct serve_config *cfg)
{
    if (cx->timer == UT_SEND)
        return cx->send_deadline;
    if (cx->timer == UT_BODY)
        return body_clock_deadline(&cx->sc->body, cfg->body_timeout_ms, cfg->body_min_rate);
    return -1;
}

static int64_t earlier(int64_t a, int64_t b)
{
    return a < 0 ? b : b < 0 ? a : a < b ? a : b;
}

/* Parks until a socket of the exchange is ready or its deadline passes,
 * then moves bytes or runs the timer that is due. 0, or -1 to close. */
static int wait_once(struct cx *cx, int fd, const struct serve_config *cfg)
{
    int64_t up_due = upstream_deadline(cx->px, cx->x);
    int64_t cl_due = client_deadline(cx, cfg);
    int ufd = upstream_fd(cx->x);
    int r;
    if (ufd >= 0 && upstream_connecting(cx->x))
        r = coro_wait_fd(ufd, EPOLLOUT, earlier(up_due, cl_due), 0);
    else if (ufd >= 0)
        r = coro_wait_fd2(fd, EPOLLIN | EPOLLOUT, ufd, EPOLLIN | EPOLLOUT,
                          earlier(up_due, cl_due), 0);
    else
        r = coro_wait_fd(fd, EPOLLIN | EPOLLOUT, cl_due, 0);
    if (r == -ETIMEDOUT) {
        int64_t now = clock_now_ms();
        if (up_due >= 0 && now >= up_due) {
            upstream_timeout(cx->px, cx->x);
            return 0;
        }
        if (cl_due >= 0 && now >= client_deadline(cx, cfg))
            return -1; /* the client's send or body timer */
        return 0;
    }
    if (r < 0)
        return -1;
    /* The netpoll does not say which socket: the pump tries both, and a
     * side with nothing to read says EAGAIN. The client's socket is not
     * read while its request is upstream: ask whether it left. */
    if (upstream_client_check(cx->px, cx->x) < 0)
        return 0; /* ended through client_close */
    upstream_ready(cx->px, cx->x, EPOLLIN | EPOLLOUT);
    return 0;
}

enum coro_proxy_end coro_proxy_run(struct proxy *px, int fd, SSL *ssl, struct step_conn *sc,
                                   int route,
                                   const struct http_request *req, char *buf, size_t off,
                                   size_t head_len, size_t len, size_t *left)
{
    const struct serve_config *cfg = upstream_config(px);
    struct cx cx = {.px = px, .sc = sc, .in = buf, .timer = UT_NONE,
                    .send_timeout = cfg->send_timeout_ms};
    *left = 0;
    char *head = buf + off;
    long took = upstream_start(px, &cx, fd, ssl, sc, route, req, head, head_len,
                               head + head_len, len - off - head_len, &cx.x);
    if (took < 0)
        return CP_CLOSE;
    /* What the exchange did not take is the next request's input (req,
     * which points into buf, is not used from here on). */
    size_t rest = len - off - head_len - (size_t)took;
    memmove(buf, head + head_len + took, rest);
    cx.left = rest;
    upstream_kick(px, cx.x);
    while (!cx.done && !cx.closed) {
        if (wait_once(&cx, fd, cfg) < 0) {
            client_close(NULL, &cx);
            break;
        }
    }
    *left = cx.left;
    if (cx.closed)
        return CP_CLOSE;
    if (!sc->closing)
        return CP_KEEP;
    if (!ssl)
        shutdown(fd, SHUT_WR); /* sends the corked answer before the close (plan_write.h) */
    /* input left behind the request that closes: drain it (models/linger.h) */
    return sc->linger || cx.left || linger_input_waiting(fd) ? CP_LINGER : CP_CLOSE;
}

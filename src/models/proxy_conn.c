/* The reverse proxy's I/O. One exchange (struct xfer) per proxied request
 * moves bytes client -> ubuf -> upstream and upstream -> dbuf -> client.
 * Both buffers are bounded: a side whose buffer is full is not read until
 * the other side drains it, so a 100 MiB body costs no more memory than a
 * small one (back-pressure). Bodies are framed anew on the way through
 * (http/reframe.h): no chunk line or trailer a peer wrote reaches the
 * other side. Upstream connections use the same fd-indexed conn slots as
 * clients (marked upstream) and the same epoll set. */
#include "models/proxy_conn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "http/path.h"
#include "http/proxy.h"
#include "http/reframe.h"
#include "models/evloop_internal.h"

#define DBUF_SIZE 65536          /* upstream -> client */
#define UBUF_EXTRA 65536         /* client -> upstream, beyond head and one read */
#define UP_HEAD_MAX 16384        /* an upstream response head */
#define HBUF_SIZE (UP_HEAD_MAX + 512)
#define XFER_CACHE 64            /* finished exchanges kept for reuse (~180 KiB each):
                                  * freeing them made glibc trim with brk per request */

/* conn->queue values of upstream connections (conn.c's queues are lower). */
enum { QU_CONNECT = 10, QU_READ, QU_SEND };

struct up_server {
    int64_t down_until;          /* skipped until then (after a failure) */
    uint32_t active;             /* exchanges using it now */
    uint32_t nidle;
    int *idle;                   /* pooled connections, most recent last */
};

struct up_group {
    const struct upstream_group *cfg;
    struct up_server *servers;
    uint32_t next;               /* round-robin position */
};

struct resume {
    int fd;
    uint32_t gen;
};

struct proxy {
    struct up_group groups[CONFIG_MAX_UPSTREAMS];
    int ngroups;
    uint32_t keepalive;
    uint8_t least;
    struct timerq q_connect, q_read, q_send;
    struct resume *resumes;      /* clients whose exchange ended this batch */
    int nresumes, cap_resumes;
    struct xfer *cache[XFER_CACHE];
    int ncache;
    size_t ucap;
    char *path;                  /* scratch for the normalised request path */
    size_t path_cap;
};

struct xfer {
    struct conn *client;
    char *loghead;               /* a copy of the request head, for the access log */
    uint32_t loghead_len;
    int group, server, up_fd;
    int tries;                   /* fresh connections that failed */
    uint16_t status;
    uint8_t connecting, reused, counted;
    uint8_t client_minor, client_keepalive, head_request;
    uint8_t req_done;            /* the whole request body is in ubuf (or sent) */
    uint8_t udiscarded;          /* ubuf no longer holds the whole request: no retry */
    uint8_t got_bytes;           /* the upstream answered something */
    uint8_t head_done;           /* hbuf holds the client's head (or an error page) */
    uint8_t resp_done;           /* the whole response body is in dbuf (or sent) */
    uint8_t errored;             /* an error page replaced the response */
    uint8_t up_reusable;
    uint8_t up_progress, client_progress;
    uint8_t up_wdead;            /* the upstream stopped taking the request (it may answer) */
    uint8_t up_readable;         /* the upstream raised an input edge not yet read to EAGAIN */
    uint8_t kind;                /* enum upstream_body */
    uint8_t req_chunked;         /* the client's body is chunked: herd re-chunks it */
    uint8_t may_retry;           /* idempotent: may go again on another connection */
    uint8_t dspill_len;
    struct body_skip req_body, resp_body;
    uint64_t body_sent;          /* response body bytes the client took */
    size_t ulen, uoff, dlen, doff, hlen, hoff;
    char *ubuf;                  /* ucap bytes, and REFRAME_SLACK for herd's chunk heads */
    char dbuf[DBUF_SIZE];
    char hbuf[HBUF_SIZE];
    /* Chunk framing herd wrote beyond a full dbuf; it moves into dbuf once
     * the client took all of it. Reads then stop exactly when dbuf is full,
     * as for a Content-Length body. */
    char dspill[REFRAME_SLACK];
};

static uint64_t tag_of(int fd, uint32_t gen) { return (uint64_t)(uint32_t)fd | (uint64_t)gen << 32; }

/* ---- set-up ---- */

struct proxy *proxy_create(struct evloop *ev)
{
    const struct serve_config *cfg = ev->cfg;
    if (!cfg->nroutes)
        return NULL;
    struct proxy *px = calloc(1, sizeof *px);
    if (!px)
        log_fatal("out of memory at start");
    px->keepalive = cfg->upstream_keepalive;
    px->least = cfg->upstream_least;
    px->ngroups = cfg->nupstreams;
    px->ucap = 2 * ev->in_cap + UBUF_EXTRA;
    px->path_cap = ev->in_cap + 16;
    px->path = malloc(px->path_cap);
    if (!px->path)
        log_fatal("out of memory at start");
    for (int g = 0; g < cfg->nupstreams; g++) {
        px->groups[g].cfg = &cfg->upstreams[g];
        px->groups[g].servers = calloc((size_t)cfg->upstreams[g].nservers,
                                       sizeof *px->groups[g].servers);
        if (!px->groups[g].servers)
            log_fatal("out of memory at start");
        for (int s = 0; s < cfg->upstreams[g].nservers; s++) {
            px->groups[g].servers[s].idle =
                calloc(px->keepalive ? px->keepalive : 1, sizeof(int));
            if (!px->groups[g].servers[s].idle)
                log_fatal("out of memory at start");
        }
    }
    tq_init(&px->q_connect, cfg->proxy_connect_timeout_ms);
    tq_init(&px->q_read, cfg->proxy_read_timeout_ms);
    tq_init(&px->q_send, cfg->proxy_send_timeout_ms);
    return px;
}

static void up_close_fd(struct evloop *ev, int fd)
{
    struct conn *uc = &ev->conns[fd];
    tq_unlink(&uc->timer);
    uc->queue = Q_NONE;
    uc->open = 0;
    uc->upstream = 0;
    uc->xfer = NULL;
    uc->gen = (uc->gen + 1) & 0x7fffffff;
    close(fd);
}

void proxy_destroy(struct evloop *ev)
{
    struct proxy *px = ev->proxy;
    if (!px)
        return;
    for (int g = 0; g < px->ngroups; g++) {
        for (int s = 0; s < px->groups[g].cfg->nservers; s++) {
            struct up_server *srv = &px->groups[g].servers[s];
            for (uint32_t i = 0; i < srv->nidle; i++)
                up_close_fd(ev, srv->idle[i]);
            free(srv->idle);
        }
        free(px->groups[g].servers);
    }
    for (int i = 0; i < px->ncache; i++) {
        free(px->cache[i]->ubuf);
        free(px->cache[i]);
    }
    free(px->resumes);
    free(px->path);
    free(px);
    ev->proxy = NULL;
}

/* Routes match the normalised path, as the static handler sees it: a
 * "/x/../api/" is an /api/ request, "/api/../x" is not (nor is a path
 * that does not normalise: the static handler answers that one). The
 * upstream still gets the target as the client sent it, as nginx does. */
int proxy_route(const struct evloop *ev, const struct http_request *req)
{
    const struct serve_config *cfg = ev->cfg;
    struct proxy *px = ev->proxy;
    if (!req->path.len || req->path.p[0] != '/')
        return -1;
    int n = path_normalize(req->path.p, req->path.len, px->path, px->path_cap);
    if (n < 0)
        return -1;
    return proxy_route_match(cfg->routes, cfg->nroutes, px->path, (size_t)n);
}

/* ---- upstream servers and connections ---- */

static struct up_server *server_of(struct proxy *px, const struct xfer *x)
{
    return &px->groups[x->group].servers[x->server];
}

/* Round-robin, or the fewest active exchanges (ties rotate). A server
 * marked down is skipped until its fail timeout passes; in a group of one
 * it is always tried, as in nginx. */
static int pick_server(struct proxy *px, int group)
{
    struct up_group *g = &px->groups[group];
    int n = g->cfg->nservers, best = -1;
    int64_t now = clock_now_ms();
    for (int i = 0; i < n; i++) {
        int k = (int)((g->next + (uint32_t)i) % (uint32_t)n);
        struct up_server *s = &g->servers[k];
        if (n > 1 && s->down_until > now)
            continue;
        if (!px->least) {
            best = k;
            break;
        }
        if (best < 0 || s->active < g->servers[best].active)
            best = k;
    }
    if (best >= 0)
        g->next = px->least ? g->next + 1 : (uint32_t)best + 1;
    return best;
}

static void mark_down(struct evloop *ev, struct xfer *x, const char *why)
{
    struct proxy *px = ev->proxy;
    const struct upstream_group *g = px->groups[x->group].cfg;
    server_of(px, x)->down_until = clock_now_ms() + ev->cfg->upstream_fail_timeout_ms;
    log_msg(LOG_WARN, "upstream %s server %s: %s; skipped for %lld ms", g->name,
            g->servers[x->server].text, why, (long long)ev->cfg->upstream_fail_timeout_ms);
}

static void up_arm(struct evloop *ev, struct conn *uc, int q)
{
    struct proxy *px = ev->proxy;
    struct timerq *tq = q == QU_CONNECT ? &px->q_connect : q == QU_READ ? &px->q_read : &px->q_send;
    tq_arm(tq, &uc->timer, clock_now_ms());
    uc->queue = (uint8_t)q;
}

/* Gives the upstream connection back: to the pool when it can carry
 * another request, else closed. */
static void up_release(struct evloop *ev, struct xfer *x, int reuse)
{
    struct proxy *px = ev->proxy;
    if (x->up_fd < 0)
        return;
    struct up_server *srv = server_of(px, x);
    if (x->counted)
        srv->active--;
    x->counted = 0;
    struct conn *uc = &ev->conns[x->up_fd];
    if (reuse && !x->connecting && srv->nidle < px->keepalive) {
        tq_unlink(&uc->timer);
        uc->queue = Q_NONE;
        uc->xfer = NULL;
        uc->up_id = (uint16_t)(x->group * CONFIG_MAX_UPSTREAM_SERVERS + x->server);
        srv->idle[srv->nidle++] = x->up_fd;
    } else {
        up_close_fd(ev, x->up_fd);
    }
    x->up_fd = -1;
    x->connecting = 0;
}

/* Opens (or takes from the pool) a connection to a server of x's group.
 * Returns 0, or -1 when no server can be reached now. */
static int up_connect(struct evloop *ev, struct xfer *x)
{
    struct proxy *px = ev->proxy;
    const struct upstream_group *gc = px->groups[x->group].cfg;
    while (x->tries < gc->nservers) {
        int s = pick_server(px, x->group);
        if (s < 0)
            return -1;
        x->server = s;
        struct up_server *srv = server_of(px, x);
        srv->active++;
        x->counted = 1;
        x->got_bytes = 0;
        x->up_readable = 0; /* nothing comes before the request: wait for the edge */
        x->up_wdead = 0;
        if (srv->nidle) {
            x->up_fd = srv->idle[--srv->nidle];
            ev->conns[x->up_fd].xfer = x;
            x->reused = 1;
            x->connecting = 0;
            return 0;
        }
        x->reused = 0;
        const struct listen_addr *a = &gc->servers[s];
        int fd = socket(a->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        int err = fd < 0 ? errno : 0;
        if (fd >= ev->max_fds) {
            close(fd);
            fd = -1;
            err = EMFILE;
        }
        if (fd >= 0) {
            if (a->family != AF_UNIX) {
                int one = 1;
                setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            }
            int rc = connect(fd, (const struct sockaddr *)&a->ss, a->len);
            err = rc == 0 ? 0 : errno;
            if (rc == 0 || err == EINPROGRESS) {
                struct conn *uc = &ev->conns[fd];
                uint32_t gen = (uc->gen + 1) & 0x7fffffff;
                memset(uc, 0, sizeof *uc);
                uc->gen = gen;
                if (loop_add(&ev->loop, fd, LOOP_IN | LOOP_OUT | LOOP_EDGE, tag_of(fd, gen)) == 0) {
                    uc->open = 1;
                    uc->upstream = 1;
                    uc->xfer = x;
                    x->up_fd = fd;
                    x->connecting = rc != 0;
                    if (x->connecting)
                        up_arm(ev, uc, QU_CONNECT);
                    return 0;
                }
                err = errno;
            }
            close(fd);
        }
        srv->active--;
        x->counted = 0;
        x->tries++;
        if (err == EMFILE || err == ENFILE || err == ENOMEM || err == ENOBUFS) {
            log_msg(LOG_ERROR, "upstream connect: %s", strerror(err));
            return -1; /* our limit, not the server's fault */
        }
        mark_down(ev, x, strerror(err));
    }
    return -1;
}

/* ---- exchanges ---- */

static struct xfer *xfer_get(struct proxy *px)
{
    if (px->ncache)
        return px->cache[--px->ncache];
    struct xfer *x = malloc(sizeof *x);
    if (!x)
        return NULL;
    x->ubuf = malloc(px->ucap + REFRAME_SLACK);
    if (!x->ubuf) {
        free(x);
        return NULL;
    }
    return x;
}

static void xfer_put(struct proxy *px, struct xfer *x)
{
    free(x->loghead);
    x->loghead = NULL;
    if (px->ncache < XFER_CACHE) {
        px->cache[px->ncache++] = x;
        return;
    }
    free(x->ubuf);
    free(x);
}

/* Counters and the access log, like a static request. */
static void account(struct evloop *ev, struct xfer *x)
{
    unsigned status = x->status ? x->status : 502;
    SB_ADD(ev->slot->requests, 1);
    SB_ADD(ev->slot->status[status / 100 % 6], 1);
    if (!alog_on(ev->alog))
        return;
    struct http_request req;
    int ok = x->loghead &&
             http_parse_request(x->loghead, x->loghead_len, x->loghead_len, &req) > 0;
    conn_log(ev, x->client, ok ? &req : NULL, status, x->body_sent);
}

/* Replaces the response with an error page (nothing reached the client
 * yet). The upstream connection is not reused. */
static void respond_error(struct evloop *ev, struct xfer *x, unsigned status)
{
    up_release(ev, x, 0);
    struct http_out out = {x->hbuf, 0, sizeof x->hbuf};
    struct http_plan plan;
    int keep = x->client_keepalive && x->req_done && !ev->stopping;
    resp_error(&out, &plan, status, x->client_minor, keep, x->head_request);
    x->hlen = out.len;
    x->hoff = 0;
    x->dlen = plan.body ? plan.body_len : 0;
    if (x->dlen)
        memcpy(x->dbuf, plan.body, x->dlen);
    x->doff = 0;
    x->status = (uint16_t)status;
    x->client_keepalive = (uint8_t)keep;
    x->head_done = x->resp_done = x->errored = 1;
}

/* Ends the exchange at once: the client connection closes (a truncated
 * response is the only honest signal once the head has gone out). */
static int abort_client(struct evloop *ev, struct xfer *x)
{
    conn_close(ev, x->client); /* calls proxy_abort, which frees x */
    return -1;
}

/* The upstream failed (error, early close, timeout). Before the response
 * head: retry on a fresh connection when a pooled one turned out dead
 * without a byte of an answer and the request is idempotent (the server
 * may have closed the idle connection as we sent, or may have acted on
 * the request and died: a POST must not run twice), else answer 502 (504
 * on timeout). After it: close the client. */
static int upstream_failed(struct evloop *ev, struct xfer *x, int timeout)
{
    if (x->head_done)
        return abort_client(ev, x);
    if (x->reused && !x->got_bytes && !x->udiscarded && !timeout && x->may_retry) {
        /* the server closed an idle connection as we sent on it */
        up_release(ev, x, 0);
        x->uoff = 0;
        if (up_connect(ev, x) == 0)
            return 1;
    }
    respond_error(ev, x, timeout ? 504 : 502);
    return 1;
}

/* Client body bytes into ubuf, while it has room. */
static int client_to_ubuf(struct evloop *ev, struct xfer *x)
{
    struct conn *c = x->client;
    /* once the response is complete the rest of the body is not wanted
     * (an early answer such as 413): the client connection will linger */
    if (x->req_done || x->errored || x->resp_done)
        return 0;
    size_t cap = ev->proxy->ucap;
    if (x->ulen + ev->in_cap > cap && x->uoff) {
        memmove(x->ubuf, x->ubuf + x->uoff, x->ulen - x->uoff);
        x->ulen -= x->uoff;
        x->uoff = 0;
        x->udiscarded = 1;
    }
    /* ulen may pass cap by the chunk framing herd added (ubuf has room) */
    if (x->ulen >= cap)
        return 0;
    size_t room = cap - x->ulen;
    ssize_t n;
    do
        n = read(conn_fd(ev, c), ev->rbuf, room < ev->in_cap ? room : ev->in_cap);
    while (n < 0 && errno == EINTR);
    if (n < 0 && errno == EAGAIN)
        return 0;
    if (n <= 0)
        return abort_client(ev, x); /* gone before its body ended */
    SB_ADD(ev->slot->bytes_in, (uint64_t)n);
    x->client_progress = 1;
    body_clock_add(&c->st.body, (size_t)n);
    struct reframe_out o = {x->ubuf, x->ulen, cap + REFRAME_SLACK, NULL, 0};
    long k = body_reframe(&x->req_body, x->req_chunked, ev->rbuf, (size_t)n,
                          ev->cfg->http.max_body_size, &o);
    if (k < 0) {
        /* the upstream connection closes: what went up of it is not a request */
        x->client_keepalive = 0;
        respond_error(ev, x, 400);
        return 1;
    }
    x->ulen = o.len;
    if (!body_skip_active(&x->req_body)) {
        x->req_done = 1;
        if (k < n) {
            /* the next pipelined request: the client's input once we are done */
            c->in = bufpool_get(&ev->inbufs);
            if (!c->in)
                return abort_client(ev, x);
            memcpy(c->in, ev->rbuf + k, (size_t)(n - k));
            c->in_len = (uint32_t)(n - k);
        }
    }
    return 1;
}

static int ubuf_to_upstream(struct xfer *x)
{
    if (x->uoff == x->ulen || x->errored || x->resp_done || x->up_wdead)
        return 0;
    ssize_t n;
    do
        n = send(x->up_fd, x->ubuf + x->uoff, x->ulen - x->uoff, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n < 0) {
        if (errno == EAGAIN)
            return 0;
        /* An upstream may answer early (413) and close: its answer can
         * still be waiting to be read. No answer there ends in
         * upstream_failed when the read sees the close. */
        x->up_wdead = 1;
        x->up_readable = 1;
        return 1;
    }
    x->uoff += (size_t)n;
    x->up_progress = 1;
    return 1;
}

/* New response body bytes src[0..n) from the upstream: find where the body
 * ends. A Content-Length or close-delimited body was read into dbuf at dlen
 * and stays as it is; a chunked one was read aside (n at most the room left
 * in dbuf) and its data goes into dbuf as herd's own chunks, the framing
 * that does not fit into dspill. */
static int frame_body(struct evloop *ev, struct xfer *x, const char *src, size_t n)
{
    if (x->resp_done) {
        x->up_reusable = 0; /* bytes after a complete response */
        return 1;
    }
    if (x->kind == UB_CLOSE) {
        x->dlen += n;
        return 1;
    }
    long k;
    if (x->kind == UB_CHUNKED) {
        struct reframe_out o = {x->dbuf, x->dlen, sizeof x->dbuf, x->dspill, x->dspill_len};
        k = body_reframe(&x->resp_body, 1, src, n, UINT64_MAX, &o);
        x->dlen = o.len;
        x->dspill_len = (uint8_t)o.over_len;
    } else if ((k = body_skip(&x->resp_body, src, n, UINT64_MAX)) >= 0) {
        x->dlen += (size_t)k;
    }
    if (k < 0) {
        log_msg(LOG_WARN, "upstream %s: broken chunked body", ev->proxy->groups[x->group].cfg->name);
        return abort_client(ev, x);
    }
    if (!body_skip_active(&x->resp_body)) {
        x->resp_done = 1;
        if ((size_t)k < n)
            x->up_reusable = 0;
    }
    return 1;
}

static int parse_head(struct evloop *ev, struct xfer *x)
{
    struct upstream_response r;
    const char *gname = ev->proxy->groups[x->group].cfg->name;
    for (;;) {
        int h = upstream_parse_response(x->dbuf, x->dlen, UP_HEAD_MAX, &r);
        if (h == HTTP_PARSE_INCOMPLETE)
            return 1;
        if (h == HTTP_PARSE_ERROR || r.status == 101) {
            log_msg(LOG_WARN, "upstream %s: malformed response head", gname);
            respond_error(ev, x, 502);
            return 1;
        }
        if (r.status < 200) {
            /* interim responses (we never ask for 100-continue) are dropped */
            memmove(x->dbuf, x->dbuf + h, x->dlen - (size_t)h);
            x->dlen -= (size_t)h;
            continue;
        }
        enum upstream_body kind = upstream_body_kind(&r, x->head_request);
        if (kind == UB_CHUNKED && x->client_minor == 0) {
            log_msg(LOG_WARN, "upstream %s: chunked reply to HTTP/1.0", gname);
            respond_error(ev, x, 502);
            return 1;
        }
        int keep = x->client_keepalive && kind != UB_CLOSE && !ev->stopping;
        long hl = proxy_build_response(&r, kind, x->client_minor, keep, x->hbuf, sizeof x->hbuf);
        if (hl < 0) {
            respond_error(ev, x, 502);
            return 1;
        }
        x->status = r.status;
        x->client_keepalive = (uint8_t)keep;
        x->up_reusable = !r.conn_close && r.minor == 1 && kind != UB_CLOSE && x->client_minor;
        x->hlen = (size_t)hl;
        x->hoff = 0;
        x->head_done = 1;
        x->kind = (uint8_t)kind;
        if (kind == UB_NONE)
            x->resp_done = 1;
        else if (kind != UB_CLOSE)
            body_skip_start(&x->resp_body, kind == UB_LENGTH ? r.content_length : 0,
                            kind == UB_CHUNKED, UP_HEAD_MAX);
        size_t rest = x->dlen - (size_t)h;
        x->dlen = x->doff = 0;
        if (!rest)
            return 1;
        if (kind == UB_CHUNKED) { /* framed anew from aside: rest <= UP_HEAD_MAX <= in_cap */
            memcpy(ev->rbuf, x->dbuf + h, rest);
            return frame_body(ev, x, ev->rbuf, rest);
        }
        memmove(x->dbuf, x->dbuf + h, rest);
        return frame_body(ev, x, x->dbuf, rest);
    }
}

/* The client took all of dbuf: start it again, with the framing that
 * waited in dspill. */
static void dbuf_drained(struct xfer *x)
{
    memcpy(x->dbuf, x->dspill, x->dspill_len);
    x->dlen = x->dspill_len;
    x->doff = 0;
    x->dspill_len = 0;
}

static int upstream_to_dbuf(struct evloop *ev, struct xfer *x)
{
    if (x->resp_done || x->errored)
        return 0;
    if (x->head_done && x->doff == x->dlen)
        dbuf_drained(x);
    size_t cap = x->head_done ? sizeof x->dbuf : UP_HEAD_MAX;
    if (x->dlen == cap || !x->up_readable)
        return 0; /* back-pressure: the client has not taken it yet */
    /* a chunked body is read aside and framed anew into dbuf */
    int aside = x->head_done && x->kind == UB_CHUNKED;
    char *to = aside ? ev->rbuf : x->dbuf + x->dlen;
    size_t want = cap - x->dlen;
    if (aside && want > ev->in_cap)
        want = ev->in_cap;
    ssize_t n;
    do
        n = read(x->up_fd, to, want);
    while (n < 0 && errno == EINTR);
    if (n < 0) {
        if (errno == EAGAIN) {
            x->up_readable = 0;
            return 0;
        }
        return upstream_failed(ev, x, 0);
    }
    x->up_progress = 1;
    if (n == 0) {
        if (x->head_done && x->kind == UB_CLOSE) {
            x->resp_done = 1;
            return 1;
        }
        if (!x->head_done && x->got_bytes) {
            log_msg(LOG_WARN, "upstream %s: closed inside the response head",
                    ev->proxy->groups[x->group].cfg->name);
            respond_error(ev, x, 502);
            return 1;
        }
        return upstream_failed(ev, x, 0);
    }
    x->got_bytes = 1;
    if (!x->head_done) {
        x->dlen += (size_t)n;
        int rc = parse_head(ev, x);
        if (rc > 0 && !x->head_done && x->dlen >= UP_HEAD_MAX) {
            log_msg(LOG_WARN, "upstream %s: response head too large",
                    ev->proxy->groups[x->group].cfg->name);
            respond_error(ev, x, 502);
        }
        return rc;
    }
    return frame_body(ev, x, to, (size_t)n);
}

static int dbuf_to_client(struct evloop *ev, struct xfer *x)
{
    if (!x->head_done || (x->hoff == x->hlen && x->doff == x->dlen))
        return 0;
    struct iovec iov[2] = {
        {x->hbuf + x->hoff, x->hlen - x->hoff},
        {x->dbuf + x->doff, x->dlen - x->doff},
    };
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = 2};
    if (!iov[0].iov_len) {
        m.msg_iov = &iov[1];
        m.msg_iovlen = 1;
    }
    ssize_t n;
    do
        n = sendmsg(conn_fd(ev, x->client), &m, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n < 0) {
        if (errno == EAGAIN)
            return 0;
        return abort_client(ev, x);
    }
    SB_ADD(ev->slot->bytes_out, (uint64_t)n);
    size_t left = (size_t)n, h = x->hlen - x->hoff;
    size_t from_head = left < h ? left : h;
    x->hoff += from_head;
    left -= from_head;
    x->doff += left;
    x->body_sent += left;
    if (x->doff == x->dlen)
        dbuf_drained(x);
    x->client_progress = 1;
    return 1;
}

/* The exchange is over: account, pool the upstream connection, and hand
 * the client back after this event batch (its next request may be
 * proxied again; doing that here would nest). */
static void finish(struct evloop *ev, struct xfer *x)
{
    struct proxy *px = ev->proxy;
    struct conn *c = x->client;
    int reuse = x->up_reusable && x->req_done && x->uoff == x->ulen && !x->errored &&
                !x->up_wdead;
    up_release(ev, x, reuse);
    account(ev, x);
    conn_set_timer(ev, c, Q_NONE);
    c->xfer = NULL;
    if (!x->client_keepalive || !x->req_done || ev->stopping) {
        c->st.closing = 1;
        c->st.linger = !x->req_done;
    }
    xfer_put(px, x);
    if (px->nresumes == px->cap_resumes) {
        int cap = px->cap_resumes ? px->cap_resumes * 2 : 64;
        struct resume *r = realloc(px->resumes, (size_t)cap * sizeof *r);
        if (!r) {
            conn_close(ev, c);
            return;
        }
        px->resumes = r;
        px->cap_resumes = cap;
    }
    px->resumes[px->nresumes++] = (struct resume){conn_fd(ev, c), c->gen};
}

/* Timers after a round of moves: the upstream's (connect, send, read)
 * and the client's (send while it blocks, header while its body is due).
 * Each restarts when its side made progress or changed state. */
static void set_timers(struct evloop *ev, struct xfer *x)
{
    if (x->up_fd >= 0 && !x->connecting) {
        struct conn *uc = &ev->conns[x->up_fd];
        int q = x->uoff < x->ulen && !x->resp_done && !x->up_wdead ? QU_SEND
                : !x->resp_done && (!x->head_done || x->dlen < sizeof x->dbuf) ? QU_READ
                                                                                : Q_NONE;
        if (q == Q_NONE) {
            tq_unlink(&uc->timer);
            uc->queue = Q_NONE;
        } else if (q != uc->queue || x->up_progress) {
            up_arm(ev, uc, q);
        }
    }
    x->up_progress = 0;
    struct conn *c = x->client;
    int q = x->head_done && (x->hoff < x->hlen || x->doff < x->dlen) ? Q_SEND
            : !x->req_done && !x->errored && x->ulen < ev->proxy->ucap ? Q_BODY
                                                                       : Q_NONE;
    /* progress restarts the send timer; the body clock only counts bytes */
    if (q != c->queue || (x->client_progress && q == Q_SEND))
        conn_set_timer(ev, c, q);
    x->client_progress = 0;
}

/* Moves bytes every way they can go until nothing moves (edge-triggered:
 * every side is tried until EAGAIN or a full buffer, whose drain is
 * noticed here, in the same loop). */
static void pump(struct evloop *ev, struct xfer *x)
{
    for (;;) {
        int moved = 0, r;
        if ((r = client_to_ubuf(ev, x)) < 0)
            return;
        moved |= r;
        if (x->up_fd >= 0 && !x->connecting) {
            if ((r = ubuf_to_upstream(x)) < 0)
                return;
            moved |= r;
            if (x->up_fd >= 0 && (r = upstream_to_dbuf(ev, x)) < 0)
                return;
            moved |= r;
        }
        if ((r = dbuf_to_client(ev, x)) < 0)
            return;
        moved |= r;
        if (x->resp_done && x->hoff == x->hlen && x->doff == x->dlen) {
            finish(ev, x);
            return;
        }
        if (!moved)
            break;
    }
    set_timers(ev, x);
}

static void client_addr(const struct conn *c, char *buf, size_t n)
{
    if (c->st.peer_family == AF_INET || c->st.peer_family == AF_INET6)
        inet_ntop(c->st.peer_family, c->st.peer, buf, (socklen_t)n);
    else
        snprintf(buf, n, "unix:"); /* nginx's $remote_addr for a unix socket */
}

static int expects_continue(const struct http_request *req)
{
    for (int i = 0; i < req->nheaders; i++) {
        const struct http_header *h = &req->headers[i];
        if (h->name.len == 6 && !strncasecmp(h->name.p, "expect", 6))
            return h->value.len == 12 && !strncasecmp(h->value.p, "100-continue", 12);
    }
    return 0;
}

long proxy_start(struct evloop *ev, struct conn *c, int route, const struct http_request *req,
                 const char *head, size_t head_len, const char *body, size_t body_len)
{
    struct proxy *px = ev->proxy;
    struct xfer *x = xfer_get(px);
    if (!x)
        return -1;
    memset(x, 0, offsetof(struct xfer, ubuf));
    x->client = c;
    x->group = ev->cfg->routes[route].group;
    x->up_fd = -1;
    x->client_minor = req->minor;
    x->head_request = req->method == HTTP_HEAD;
    x->client_keepalive = http_wants_keepalive(req) && !ev->stopping &&
                          c->st.nreq < ev->cfg->http.keepalive_requests;
    c->xfer = x;
    conn_set_timer(ev, c, Q_NONE);
    if (alog_on(ev->alog) && (x->loghead = malloc(head_len)) != NULL) {
        memcpy(x->loghead, head, head_len);
        x->loghead_len = (uint32_t)head_len;
    }
    char addr[64];
    client_addr(c, addr, sizeof addr);
    long hl = proxy_build_request(req, addr, px->groups[x->group].cfg->name,
                                  ev->cfg->proxy_pass_underscores, x->ubuf,
                                  px->ucap - ev->in_cap);
    long took = 0;
    if (hl < 0) {
        x->req_done = !(req->chunked || req->content_length > 0);
        x->client_keepalive = 0;
        respond_error(ev, x, 431);
        return (long)body_len;
    }
    x->ulen = (size_t)hl;
    x->may_retry = (uint8_t)proxy_may_retry(req);
    if (req->chunked || req->content_length > 0) {
        x->req_chunked = req->chunked;
        body_skip_start(&x->req_body, req->content_length, req->chunked,
                        ev->cfg->http.max_header_size);
        /* the head left in_cap bytes, the most body that came with it */
        struct reframe_out o = {x->ubuf, x->ulen, px->ucap + REFRAME_SLACK, NULL, 0};
        took = body_reframe(&x->req_body, req->chunked, body, body_len,
                            ev->cfg->http.max_body_size, &o);
        if (took < 0) {
            x->client_keepalive = 0;
            respond_error(ev, x, 400);
            return (long)body_len;
        }
        x->ulen = o.len;
        x->req_done = !body_skip_active(&x->req_body);
        /* As nginx does: we take the body, so we say go ahead ourselves
         * (the upstream never sees the Expect header). An HTTP/1.0 client
         * does not know 100 Continue (RFC 9110 10.1.1): it just sends. */
        if (!x->req_done && x->client_minor && expects_continue(req))
            (void)!send(conn_fd(ev, c), "HTTP/1.1 100 Continue\r\n\r\n", 25,
                        MSG_NOSIGNAL | MSG_DONTWAIT);
    } else {
        x->req_done = 1;
    }
    if (up_connect(ev, x) < 0) {
        log_msg(LOG_ERROR, "upstream %s: no server reachable", px->groups[x->group].cfg->name);
        respond_error(ev, x, 502);
    }
    return took;
}

void proxy_kick(struct evloop *ev, struct conn *c)
{
    if (c->xfer)
        pump(ev, c->xfer);
}

void proxy_client_event(struct evloop *ev, struct conn *c, uint32_t events)
{
    /* Both directions gone (a half-close alone still gets its answer):
     * free the upstream now rather than at its read timeout. */
    if (events & (EPOLLHUP | EPOLLERR)) {
        abort_client(ev, c->xfer);
        return;
    }
    if (events & (EPOLLIN | EPOLLRDHUP))
        c->want_read = 1; /* read it when the exchange is over */
    pump(ev, c->xfer);
}

void proxy_abort(struct evloop *ev, struct conn *c)
{
    struct xfer *x = c->xfer;
    c->xfer = NULL;
    up_release(ev, x, 0);
    if (x->status)
        account(ev, x);
    xfer_put(ev->proxy, x);
}

/* ---- upstream events ---- */

static void idle_closed(struct evloop *ev, struct conn *uc)
{
    struct proxy *px = ev->proxy;
    int fd = conn_fd(ev, uc);
    struct up_server *srv = &px->groups[uc->up_id / CONFIG_MAX_UPSTREAM_SERVERS]
                                 .servers[uc->up_id % CONFIG_MAX_UPSTREAM_SERVERS];
    for (uint32_t i = 0; i < srv->nidle; i++)
        if (srv->idle[i] == fd) {
            srv->idle[i] = srv->idle[--srv->nidle];
            break;
        }
    up_close_fd(ev, fd);
}

/* The connect of x failed or timed out: mark the server down and try the
 * next one; 502 (504 for a timeout) when none is left. */
static void connect_failed(struct evloop *ev, struct xfer *x, const char *why, int timeout)
{
    mark_down(ev, x, why);
    up_release(ev, x, 0);
    x->tries++;
    if (up_connect(ev, x) < 0)
        respond_error(ev, x, timeout ? 504 : 502);
}

void proxy_upstream_event(struct evloop *ev, struct conn *uc, uint32_t events)
{
    struct xfer *x = uc->xfer;
    if (!x) {
        /* A pooled connection has nothing to say: the server closed it. */
        if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
            idle_closed(ev, uc);
        return;
    }
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
        x->up_readable = 1;
    if (x->connecting) {
        if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
            return;
        int err = 0;
        socklen_t len = sizeof err;
        if (getsockopt(conn_fd(ev, uc), SOL_SOCKET, SO_ERROR, &err, &len) < 0)
            err = errno;
        if (err) {
            connect_failed(ev, x, strerror(err), 0);
        } else {
            x->connecting = 0;
            x->up_progress = 1;
        }
    }
    pump(ev, x);
}

void proxy_upstream_timeout(struct evloop *ev, struct conn *uc)
{
    struct xfer *x = uc->xfer;
    int q = uc->queue;
    uc->queue = Q_NONE;
    if (!x) {
        idle_closed(ev, uc);
        return;
    }
    const char *gname = ev->proxy->groups[x->group].cfg->name;
    if (q == QU_CONNECT) {
        connect_failed(ev, x, "connect timed out", 1);
    } else {
        log_msg(LOG_WARN, "upstream %s: %s timed out", gname, q == QU_SEND ? "send" : "read");
        if (upstream_failed(ev, x, 1) < 0)
            return;
    }
    pump(ev, x);
}

void proxy_upstream_close(struct evloop *ev, struct conn *uc)
{
    struct xfer *x = uc->xfer;
    if (!x) {
        idle_closed(ev, uc);
        return;
    }
    abort_client(ev, x);
}

/* ---- after each event batch ---- */

static void expire(struct evloop *ev, struct timerq *q)
{
    struct tq_node *n;
    while ((n = tq_pop_expired(q, clock_now_ms())) != NULL)
        proxy_upstream_timeout(ev, container_of(n, struct conn, timer));
}

void proxy_after_events(struct evloop *ev)
{
    struct proxy *px = ev->proxy;
    if (!px)
        return;
    /* A resumed client may start and finish another exchange, which
     * appends here: the loop takes those too. */
    for (int i = 0; i < px->nresumes; i++) {
        struct conn *c = &ev->conns[px->resumes[i].fd];
        if (c->open && !c->upstream && c->gen == px->resumes[i].gen && !c->xfer)
            conn_proxy_resume(ev, c);
    }
    px->nresumes = 0;
    expire(ev, &px->q_connect);
    expire(ev, &px->q_read);
    expire(ev, &px->q_send);
}

int64_t proxy_next_deadline(const struct evloop *ev)
{
    const struct proxy *px = ev->proxy;
    if (!px)
        return -1;
    if (px->nresumes)
        return clock_now_ms();
    int64_t next = -1;
    const struct timerq *qs[] = {&px->q_connect, &px->q_read, &px->q_send};
    for (int i = 0; i < 3; i++) {
        int64_t d = tq_next_deadline(qs[i]);
        if (d >= 0 && (next < 0 || d < next))
            next = d;
    }
    return next;
}

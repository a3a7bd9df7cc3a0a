/* One load connection: connect, send pre-built request bytes, read and
 * check responses, reconnect. A warm keep-alive request costs one send
 * and one recv: the socket is registered once, edge-triggered for both
 * directions, so sending needs no epoll_ctl, and a short read means the
 * socket is drained, so no read is spent on EAGAIN. Responses are framed
 * in place in the thread's read buffer; a connection holds a buffer of its
 * own only while an incomplete response head is left over. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench/hdr.h"
#include "bench/load_internal.h"

#define RETRY_NS 10000000 /* after a failed connect: no busy loop against a dead port */
/* Body bytes still to come beyond SKIP_MIN are dropped in the kernel
 * (MSG_TRUNC), up to SKIP_MAX per call: a large file costs the client no
 * copy. Smaller rests are read with the next head. */
#define SKIP_MIN 4096
#define SKIP_MAX (1u << 30)
/* While a large body arrives, SO_RCVLOWAT holds the wakeup back until this
 * much (or the rest of the body) is queued. A client that drains every
 * segment at once makes the server send in small pieces and handle an ACK
 * for each, so the server, not the file, would set the figure. */
#define SKIP_LOWAT (256u * 1024)

static void note(struct load_thread *t, enum load_err kind, int errnum, const char *what)
{
    if (!t->measuring)
        return;
    t->st.errors[kind]++;
    if (t->tl.s)
        tl_error(&t->tl, load_now_ns(), kind);
    if (t->st.why[kind][0])
        return;
    if (errnum) {
        char buf[96];
        snprintf(t->st.why[kind], sizeof t->st.why[kind], "%s: %s", what,
                 strerror_r(errnum, buf, sizeof buf));
    } else {
        snprintf(t->st.why[kind], sizeof t->st.why[kind], "%s", what);
    }
}

static void release_stash(struct load_thread *t, struct lconn *c)
{
    if (c->stash) {
        bufpool_put(&t->stash_pool, c->stash);
        c->stash = NULL;
        c->stash_len = 0;
    }
}

/* Closing the fd removes it from epoll; the new generation makes any event
 * for it still in this batch stale. */
static void close_conn(struct load_thread *t, struct lconn *c)
{
    if (c->ssl) {
        load_tls_free(c->ssl, &t->tls_session);
        c->ssl = NULL;
    }
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->gen++;
    c->state = LC_IDLE;
    c->outstanding = 0;
    c->reused = 0;
    c->ring_head = 0;
    c->wr_off = c->wr_len = 0;
    c->deadline_ns = 0;
    c->lowat = 0;
    release_stash(t, c);
    if (c->heap_pos >= 0)
        load_heap_remove(t, c);
}

static void pump(struct load_thread *t, struct lconn *c, int64_t now);

/* Open for requests: connected, and for https past the handshake. */
static void ready(struct load_thread *t, struct lconn *c, int64_t now)
{
    if (t->stopping) { /* set up after the end (load_run.c waits for it): it carries nothing */
        close_conn(t, c);
        return;
    }
    c->state = LC_OPEN;
    c->deadline_ns = 0;
    if (t->measuring) {
        t->st.connects++;
        if (c->ssl && load_tls_resumed(c->ssl))
            t->st.tls_resumed++;
    }
    load_resp_start(&c->rp, t->head_method);
    pump(t, c, now);
}

/* Returns 1 once the handshake is done; 0 while it waits for the socket
 * or when it failed (then c is closed). */
static int handshake(struct load_thread *t, struct lconn *c)
{
    char why[160];
    int rc = load_tls_handshake(c->ssl, why, sizeof why);
    if (rc < 0)
        lconn_fail(t, c, LERR_TLS, 0, why);
    return rc > 0;
}

/* TCP is connected: plain http is ready; https starts its handshake,
 * within the same timeout as the connect. */
static void connected(struct load_thread *t, struct lconn *c, int64_t now)
{
    if (t->tls_ctx) {
        c->ssl = load_tls_new(t->tls_ctx, c->fd, &t->cfg->target, t->tls_session,
                             &c->tls_drained);
        if (!c->ssl) {
            lconn_fail(t, c, LERR_TLS, ENOMEM, "TLS client");
            return;
        }
        c->state = LC_HANDSHAKE;
        c->deadline_ns = c->connect_ns + t->timeout_ns;
        if (!handshake(t, c))
            return;
    }
    ready(t, c, now);
}

static void open_conn(struct load_thread *t, struct lconn *c, int64_t now)
{
    int pending;
    c->retry_ns = 0;
    c->connect_ns = now;
    int fd = target_connect_start(&t->cfg->target, &pending);
    if (fd < 0) {
        lconn_fail(t, c, LERR_CONNECT, -fd, "connect");
        return;
    }
    c->fd = fd;
    int rc = loop_add(&t->loop, fd, LOOP_IN | LOOP_OUT | LOOP_EDGE, lconn_tag(c));
    if (rc < 0) {
        lconn_fail(t, c, LERR_CONNECT, -rc, "epoll_ctl");
        return;
    }
    if (pending) {
        c->state = LC_CONNECTING;
        c->deadline_ns = now + t->timeout_ns;
        return;
    }
    connected(t, c, now);
}

/* After a close: reconnect now, after delay_ns, or when the schedule says
 * (connection per request at a fixed rate). Nothing once the run stops. */
static void restart(struct load_thread *t, struct lconn *c, int64_t now, int64_t delay_ns)
{
    if (t->stopping)
        return;
    if (delay_ns) {
        c->retry_ns = now + delay_ns;
        return;
    }
    if (t->cfg->rate > 0 && !t->cfg->keepalive) {
        int64_t due = rate_next(&c->rate);
        if (due > now) {
            load_heap_push(t, c, due);
            return;
        }
    }
    open_conn(t, c, now);
}

void lconn_fail(struct load_thread *t, struct lconn *c, enum load_err kind, int errnum,
                const char *what)
{
    note(t, kind, errnum, what);
    int64_t now = load_now_ns();
    close_conn(t, c);
    if (kind == LERR_TLS) /* the next handshake starts afresh */
        load_tls_session_free(&t->tls_session);
    restart(t, c, now, kind == LERR_CONNECT || kind == LERR_TLS ? RETRY_NS : 0);
}

/* Writes the rest of the current batch. Returns 0, or -1 when the
 * connection failed (and was closed). */
static int flush(struct load_thread *t, struct lconn *c)
{
    while (c->wr_off < c->wr_len) {
        const char *p = t->reqs->buf + c->wr_off;
        size_t len = c->wr_len - c->wr_off;
        ssize_t n = c->ssl ? load_tls_send(c->ssl, p, len) : send(c->fd, p, len, MSG_NOSIGNAL);
        if (n > 0) {
            c->wr_off += (uint32_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return 0; /* EPOLLOUT (edge) resumes it */
        if (n < 0 && errno == EPROTO && c->ssl)
            lconn_fail(t, c, LERR_TLS, 0, "TLS error while sending");
        else
            lconn_fail(t, c, LERR_WRITE, n < 0 ? errno : EPIPE, "send");
        return -1;
    }
    c->wr_off = c->wr_len = 0;
    return 0;
}

static void push_start(struct load_thread *t, struct lconn *c, int64_t start)
{
    c->starts[(c->ring_head + c->outstanding) % t->cfg->pipeline] = start;
    c->outstanding++;
}

/* Sends what is due. Closed loop: a batch of --pipeline requests once the
 * previous batch is answered, as wrk does. Open loop: every request whose
 * due time has come, up to --pipeline in flight, each timed from its due
 * time; then waits in the heap for the next one. */
static void pump(struct load_thread *t, struct lconn *c, int64_t now)
{
    const struct load_config *cfg = t->cfg;
    if (c->state != LC_OPEN || c->wr_len || t->stopping)
        return;
    uint32_t room = cfg->pipeline - c->outstanding, k;
    int was_idle = !c->outstanding;
    if (cfg->rate <= 0) {
        if (!was_idle)
            return;
        k = cfg->pipeline;
        /* Without keep-alive the connect is part of what is measured. */
        int64_t start = cfg->keepalive ? now : c->connect_ns;
        for (uint32_t i = 0; i < k; i++)
            push_start(t, c, start);
    } else {
        uint64_t due = rate_due(&c->rate, now);
        k = due < room ? (uint32_t)due : room;
        for (uint32_t i = 0; i < k; i++)
            push_start(t, c, rate_take(&c->rate));
        if (k < room && cfg->keepalive)
            load_heap_push(t, c, rate_next(&c->rate));
        if (!k)
            return;
    }
    if (was_idle)
        c->deadline_ns = now + t->timeout_ns;
    /* the thread's next k requests, in one run of reqs (load_reqs.h) */
    uint32_t i = t->next_req;
    c->wr_off = (uint32_t)t->reqs->offs[i];
    c->wr_len = (uint32_t)t->reqs->offs[i + k];
    t->next_req = (i + k) % t->reqs->n;
    flush(t, c);
}

/* A complete response. Returns 1 when c goes on reading the same socket,
 * 0 when it is closing or closed. */
static int response_done(struct load_thread *t, struct lconn *c, int64_t now)
{
    int64_t start = c->starts[c->ring_head];
    c->ring_head = (uint16_t)((c->ring_head + 1) % t->cfg->pipeline);
    c->outstanding--;
    c->reused = 1;
    t->all_requests++;
    if (t->measuring) {
        t->st.requests++;
        uint64_t lat = now > start ? (uint64_t)(now - start) : 0;
        hdr_record(t->st.latency, lat);
        if (t->tl.s)
            tl_response(&t->tl, now, lat);
        if (c->rp.status >= 400) {
            char what[32];
            snprintf(what, sizeof what, "status %u", c->rp.status);
            note(t, LERR_STATUS, 0, what);
        }
        t->last_done_ns = now;
    }
    int server_keeps = c->rp.keepalive;
    load_resp_start(&c->rp, t->head_method);
    if (!server_keeps) {
        /* Read once more before closing: when the server's FIN is already
         * here, it closed first and TIME_WAIT stays on its side, so a
         * connection-per-request run does not exhaust local ports.
         * Requests pipelined after this response will not be answered:
         * each is a read error (the server closed before its response),
         * as it would be without the Connection: close. */
        for (; c->outstanding; c->outstanding--)
            note(t, LERR_READ, 0, "the server closed with pipelined requests unanswered");
        c->state = LC_CLOSING;
        c->deadline_ns = now + t->timeout_ns;
        release_stash(t, c);
        return 0;
    }
    if (!t->cfg->keepalive) {
        /* We asked for close and the server kept the connection: close it. */
        close_conn(t, c);
        restart(t, c, now, 0);
        return 0;
    }
    /* With nothing outstanding, the next request waits until the socket
     * is drained (on_read): bytes already received must not pass for its
     * answer. An answer may come before its request's body was all sent
     * (RFC 9112 9.3): the rest of it must still go within the timeout. */
    c->deadline_ns = c->outstanding || c->wr_len ? now + t->timeout_ns : 0;
    return 1;
}

/* Bytes that answer no request: a server that sends more responses than
 * it was asked for, or anything after a final response. Counting them as
 * answers would report a faster server than there is, so the connection
 * is dropped as broken. `counted` of them were already added to the
 * bytes read; they are taken back, as they are no transfer of answers. */
static void reject_unsolicited(struct load_thread *t, struct lconn *c, size_t counted)
{
    if (t->measuring)
        t->st.bytes -= counted < t->st.bytes ? counted : t->st.bytes;
    lconn_fail(t, c, LERR_BAD_RESPONSE, 0, "bytes after the last response");
}

/* Frames data[0..len) (the thread buffer, or the stash with new bytes
 * appended) into responses. Keeps an incomplete head in the stash.
 * Returns 0, or -1 when c is no longer reading (closed or closing). */
static int feed(struct load_thread *t, struct lconn *c, const char *data, size_t len, int64_t now)
{
    size_t off = 0;
    while (off < len) {
        if (!c->outstanding) {
            reject_unsolicited(t, c, len - off);
            return -1;
        }
        long n = load_resp_parse(&c->rp, data + off, len - off);
        if (n < 0) {
            lconn_fail(t, c, LERR_BAD_RESPONSE, 0, c->rp.error);
            return -1;
        }
        off += (size_t)n;
        if (c->rp.state == RESP_DONE) {
            if (response_done(t, c, now))
                continue;
            if (c->state == LC_CLOSING && off < len)
                reject_unsolicited(t, c, len - off);
            return -1;
        }
        if (c->rp.state == RESP_HEAD && off < len && n == 0)
            break;
    }
    size_t left = len - off;
    if (!left) {
        release_stash(t, c);
        return 0;
    }
    if (c->stash) {
        memmove(c->stash, data + off, left);
    } else {
        c->stash = bufpool_get(&t->stash_pool);
        if (!c->stash) {
            lconn_fail(t, c, LERR_READ, ENOMEM, "buffer");
            return -1;
        }
        memcpy(c->stash, data + off, left);
    }
    c->stash_len = (uint32_t)left;
    return 0;
}

static void on_eof(struct load_thread *t, struct lconn *c, int64_t now)
{
    if (c->state == LC_OPEN && c->outstanding) {
        if (!load_resp_eof(&c->rp)) {
            int nothing = c->rp.state == RESP_HEAD && !c->stash_len;
            if (nothing && c->reused) {
                lconn_fail(t, c, LERR_CLOSED_REUSED, 0, "the server closed a reused "
                           "keep-alive connection without a response");
                return;
            }
            lconn_fail(t, c, LERR_READ, 0,
                       nothing ? "the server closed the connection without a response"
                               : "the server closed the connection mid-response");
            return;
        }
        response_done(t, c, now);
    }
    /* An idle keep-alive connection closed by the server is no error. */
    close_conn(t, c);
    restart(t, c, now, 0);
}

/* Discards body bytes in the kernel, without copying them out: recv with
 * MSG_TRUNC on TCP. Returns what recv returned (errno set when < 0). */
static ssize_t skip_body(struct load_thread *t, struct lconn *c, uint64_t want, size_t *cap)
{
    *cap = want < SKIP_MAX ? (size_t)want : SKIP_MAX;
    ssize_t n = recv(c->fd, NULL, *cap, MSG_TRUNC);
    if (n > 0) {
        if (t->measuring)
            t->st.bytes += (uint64_t)n;
        load_resp_skip(&c->rp, (uint64_t)n);
    }
    return n;
}

/* The next wakeup: when SKIP_LOWAT more bytes of the body, or all of it,
 * are here; back to any byte once the body is done (the next head may be
 * short). A lowat above what will come would stall the connection. */
static void set_lowat(struct lconn *c)
{
    uint64_t left = c->rp.state == RESP_UNTIL_CLOSE ? 0 : load_resp_skippable(&c->rp);
    uint32_t want = left >= SKIP_MIN ? (left < SKIP_LOWAT ? (uint32_t)left : SKIP_LOWAT) : 0;
    if (want == c->lowat)
        return;
    int v = want ? (int)want : 1;
    if (setsockopt(c->fd, SOL_SOCKET, SO_RCVLOWAT, &v, sizeof v) == 0)
        c->lowat = want;
}

/* Reads what the socket holds: response bytes are framed, body bytes past
 * SKIP_MIN are dropped in the kernel. A short read means the socket is
 * drained and the next data brings a new edge, so it stops there, unless a
 * hang-up is pending (no further edge would come for it). */
static void on_read(struct load_thread *t, struct lconn *c, uint32_t events)
{
    int drain = !!(events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR));
    uint64_t answered_before = t->all_requests;
    for (;;) {
        size_t cap;
        ssize_t n;
        uint64_t skippable = t->tcp && !c->stash && c->state == LC_OPEN ? load_resp_skippable(&c->rp) : 0;
        if (skippable >= SKIP_MIN) {
            n = skip_body(t, c, skippable, &cap);
            if (n > 0 && c->rp.state == RESP_DONE) {
                uint32_t gen = c->gen;
                response_done(t, c, load_now_ns());
                if (gen != c->gen)
                    return;
            }
        } else {
            char *buf = c->stash ? c->stash + c->stash_len : t->rbuf;
            cap = c->stash ? RESP_MAX_HEAD - c->stash_len : t->rbuf_size;
            n = c->ssl ? load_tls_recv(c->ssl, buf, cap) : recv(c->fd, buf, cap, 0);
            if (n > 0) {
                if (c->state == LC_CLOSING) {
                    reject_unsolicited(t, c, 0); /* nothing may follow a final response */
                    return;
                }
                if (t->measuring)
                    t->st.bytes += (uint64_t)n;
                int rc = c->stash ? feed(t, c, c->stash, c->stash_len + (size_t)n, load_now_ns())
                                  : feed(t, c, buf, (size_t)n, load_now_ns());
                if (rc < 0 && c->state != LC_CLOSING)
                    return;
            }
        }
        if (n > 0) {
            if ((size_t)n == cap || drain || c->state == LC_CLOSING ||
                (c->ssl && load_tls_more(c->ssl, c->tls_drained)))
                continue;
            break;
        }
        if (n == 0) {
            on_eof(t, c, load_now_ns());
            return;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN && c->state != LC_CLOSING)
            break;
        if (c->state == LC_CLOSING) {
            /* The server's FIN is not here yet: close now rather than wait
             * for it (some servers linger until the client closes). */
            close_conn(t, c);
            restart(t, c, load_now_ns(), 0);
        } else if (errno == EPROTO && c->ssl) {
            lconn_fail(t, c, LERR_TLS, 0, "TLS error while receiving");
        } else if (c->reused && c->outstanding && c->rp.state == RESP_HEAD && !c->stash_len) {
            lconn_fail(t, c, LERR_CLOSED_REUSED, errno, "recv on a reused keep-alive connection");
        } else {
            lconn_fail(t, c, LERR_READ, errno, "recv");
        }
        return;
    }
    if (c->state != LC_OPEN)
        return;
    if (!c->ssl)
        set_lowat(c);
    /* The socket is drained and every request answered: only now is the
     * next one sent, so the bytes just read could not answer it. */
    if (!c->outstanding && t->all_requests != answered_before)
        pump(t, c, load_now_ns());
}

void lconn_init(struct load_thread *t, struct lconn *c, uint32_t index, uint32_t global_index)
{
    const struct load_config *cfg = t->cfg;
    memset(c, 0, sizeof *c);
    c->fd = -1;
    c->index = index;
    c->heap_pos = -1;
    c->starts = t->starts + (size_t)index * cfg->pipeline;
    if (cfg->rate > 0)
        rate_init_share(&c->rate, cfg->rate, global_index, cfg->conns, t->start_ns);
}

void lconn_start(struct load_thread *t, struct lconn *c, int64_t now, int adopt_fd)
{
    if (adopt_fd < 0) {
        restart(t, c, now, 0);
        return;
    }
    c->fd = adopt_fd;
    c->connect_ns = now;
    int rc = loop_add(&t->loop, adopt_fd, LOOP_IN | LOOP_OUT | LOOP_EDGE, lconn_tag(c));
    if (rc < 0) {
        lconn_fail(t, c, LERR_CONNECT, -rc, "epoll_ctl");
        return;
    }
    if (t->cfg->rate > 0 && !t->cfg->keepalive && rate_next(&c->rate) > now && !t->tls_ctx) {
        /* Connection per request: this one waits for its due time (an
         * https one handshakes now, and its request waits in pump). */
        c->state = LC_OPEN;
        load_resp_start(&c->rp, t->head_method);
        load_heap_push(t, c, rate_next(&c->rate));
        return;
    }
    connected(t, c, now);
}

void lconn_event(struct load_thread *t, struct lconn *c, uint32_t events)
{
    if (c->state == LC_CONNECTING) {
        if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
            return;
        int e = 0;
        socklen_t el = sizeof e;
        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &e, &el) < 0)
            e = errno;
        if (e) {
            lconn_fail(t, c, LERR_CONNECT, e, "connect");
            return;
        }
        connected(t, c, load_now_ns());
        return;
    }
    if (c->state == LC_HANDSHAKE) {
        if (handshake(t, c))
            ready(t, c, load_now_ns());
        return;
    }
    if (c->state == LC_IDLE)
        return;
    int was_writing = c->wr_len != 0;
    if ((events & EPOLLOUT) && c->wr_len && flush(t, c) < 0)
        return;
    uint32_t gen = c->gen;
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
        on_read(t, c, events);
    /* The last of a batch went after its answers came (a server may answer
     * before it reads a whole body): the next batch, as on_read would have
     * sent it had the write been done. The socket is drained (edge-
     * triggered reads run to EAGAIN), so no byte read passes for its answer. */
    if (was_writing && gen == c->gen && c->state == LC_OPEN && !c->wr_len && !c->outstanding)
        pump(t, c, load_now_ns());
}

void lconn_tick(struct load_thread *t, struct lconn *c, int64_t now)
{
    switch (c->state) {
    case LC_IDLE:
        if (c->retry_ns && now >= c->retry_ns) {
            c->retry_ns = 0;
            restart(t, c, now, 0);
        }
        break;
    case LC_CONNECTING:
        if (now >= c->deadline_ns)
            lconn_fail(t, c, LERR_CONNECT, ETIMEDOUT, "connect");
        break;
    case LC_HANDSHAKE:
        if (now >= c->deadline_ns)
            lconn_fail(t, c, LERR_TLS, ETIMEDOUT, "handshake");
        break;
    case LC_OPEN:
        if (c->outstanding && c->deadline_ns && now >= c->deadline_ns)
            lconn_fail(t, c, LERR_TIMEOUT, 0, "no complete response within the timeout");
        else if (c->wr_len && c->deadline_ns && now >= c->deadline_ns)
            lconn_fail(t, c, LERR_WRITE, ETIMEDOUT, "the rest of a request after its answer");
        break;
    case LC_CLOSING:
        if (now >= c->deadline_ns) {
            close_conn(t, c);
            restart(t, c, now, 0);
        }
        break;
    }
}

void lconn_due(struct load_thread *t, struct lconn *c, int64_t now)
{
    if (c->state == LC_IDLE) {
        if (!c->retry_ns)
            open_conn(t, c, now);
        return;
    }
    pump(t, c, now);
}

void lconn_stop(struct load_thread *t, struct lconn *c)
{
    c->retry_ns = 0;
    if (c->heap_pos >= 0)
        load_heap_remove(t, c);
    if (!lconn_in_flight(c)) /* the rest ends or times out (load_run.c) */
        close_conn(t, c);
}

/* The connection driver: moves bytes between a socket and the sans-I/O HTTP
 * code. A warm keep-alive request costs one read and one send (a sendmsg
 * when a body is too big to copy behind its head): requests are parsed in
 * place from a shared read buffer, responses of a pipelined batch leave in
 * one write, and a connection gets buffers of its own only when input is
 * left over or a write blocks. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "http/pp.h"
#include "models/evloop_internal.h"
#include "models/file_window.h"
#include "models/linger.h"
#include "models/plan_write.h"

/* IO_PROXY: a proxy exchange took the connection over. IO_COLD: the
 * next file window must be read into the page cache first. IO_YIELD: the
 * connection's turn is over (conn_turn.c). */
enum { IO_DONE = 0, IO_BLOCKED = 1, IO_PROXY = 2, IO_COLD = 3, IO_YIELD = 4, IO_FATAL = -1 };

static struct timerq *queue_of(struct evloop *ev, enum conn_queue q)
{
    switch (q) {
    case Q_HEADER: return &ev->q_header;
    case Q_KEEPALIVE: return &ev->q_keepalive;
    case Q_SEND: return &ev->q_send;
    case Q_LINGER: return &ev->q_linger;
    case Q_BODY: return &ev->q_body;
    default: return NULL;
    }
}

static void arm(struct evloop *ev, struct conn *c, enum conn_queue q)
{
    if (q == Q_BODY)
        body_clock_start(&c->st.body, clock_now_ms());
    tq_arm(queue_of(ev, q), &c->timer, clock_now_ms());
    if ((c->queue == Q_KEEPALIVE) != (q == Q_KEEPALIVE)) {
        SB_ADD(ev->slot->idle, q == Q_KEEPALIVE ? 1 : -1);
        /* an accept paused at --max-connections may take a client in its
         * place now (conn_idle_victim) */
        if (q == Q_KEEPALIVE && ev->accept_paused)
            ev->hooks.slot_freed(ev);
    }
    c->queue = (uint8_t)q;
}

static void disarm(struct evloop *ev, struct conn *c)
{
    tq_unlink(&c->timer);
    if (c->queue == Q_KEEPALIVE)
        SB_ADD(ev->slot->idle, -1);
    c->queue = Q_NONE;
}

void conn_set_timer(struct evloop *ev, struct conn *c, enum conn_queue q)
{
    if (q == Q_NONE)
        disarm(ev, c);
    else
        arm(ev, c, q);
}


uint32_t conn_waited_ms(struct evloop *ev, const struct conn *c)
{
    if (c->queue != Q_KEEPALIVE && c->queue != Q_HEADER)
        return 0;
    return tq_waited(queue_of(ev, c->queue), &c->timer, clock_now_ms());
}

void conn_set_timer_waited(struct evloop *ev, struct conn *c, enum conn_queue q,
                           uint32_t waited_ms)
{
    arm(ev, c, q);
    if (waited_ms)
        tq_arm_waited(queue_of(ev, q), &c->timer, waited_ms, clock_now_ms());
}

/* A fresh slot for fd, not yet open; NULL (fd closed) beyond the table. */
static struct conn *conn_slot(struct evloop *ev, int fd)
{
    if (fd >= ev->max_fds) {
        close(fd);
        return NULL;
    }
    struct conn *c = &ev->conns[fd];
    uint32_t gen = (c->gen + 1) & GEN_MASK;
    memset(c, 0, sizeof *c);
    c->gen = gen;
    return c;
}

/* Counts c open and starts its header timer (the first head is due a
 * header timeout after accept). */
static void conn_start(struct evloop *ev, struct conn *c, int tcp, int proxy,
                       const struct sockaddr_storage *peer)
{
    c->open = 1;
    c->tcp = (uint8_t)tcp;
    step_conn_init(&c->st, &ev->step, peer, !tcp, proxy);
    ev->nconns++;
    SB_SET(ev->slot->active, ev->nconns);
    arm(ev, c, Q_HEADER);
}

static int conn_register(struct evloop *ev, struct conn *c)
{
    int fd = conn_fd(ev, c);
    return loop_add(&ev->loop, fd, LOOP_IN | LOOP_OUT | LOOP_EDGE, fd_tag(fd, c->gen));
}

int conn_open(struct evloop *ev, int fd, int tcp, int proxy, int tls,
              const struct sockaddr_storage *peer)
{
    struct conn *c = conn_slot(ev, fd);
    if (!c)
        return -1;
    if (conn_register(ev, c) < 0) {
        close(fd);
        return -1;
    }
    if (tls && !(c->ssl = tls_open(ev->tls_ctx, fd))) {
        loop_del(&ev->loop, fd);
        close(fd);
        return -1;
    }
    c->handshaking = c->ssl != NULL;
    conn_start(ev, c, tcp, proxy, peer);
    return 0;
}

static int on_readable(struct evloop *ev, struct conn *c, int rdhup);

int conn_open_read(struct evloop *ev, int fd, int tcp, int proxy,
                    const struct sockaddr_storage *peer)
{
    struct conn *c = conn_slot(ev, fd);
    if (!c)
        return 1;
    conn_start(ev, c, tcp, proxy, peer);
    conn_turn_start(ev);
    uint32_t gen = c->gen;
    /* Not in epoll yet: this read is the first look, and a short read
     * drains the socket as the edge-triggered path expects. */
    int found = on_readable(ev, c, 0);
    if (!c->open || c->gen != gen)
        return found; /* answered and closed (or refused): no epoll_ctl at all */
    /* Adding reports what is ready now, so bytes that came after our read
     * raise their event: nothing is lost between the read and the add. */
    if (conn_register(ev, c) < 0)
        conn_close(ev, c);
    return found;
}

void conn_close(struct evloop *ev, struct conn *c)
{
    if (!c->open)
        return;
    if (c->xfer)
        ev->hooks.proxy_abort(ev, c);
    if (c->out)
        pending_free(c->out);
    if (c->in)
        bufpool_put(&ev->inbufs, c->in);
    c->out = NULL;
    c->in = NULL;
    if (c->ssl) {
        tls_free(c->ssl);
        c->ssl = NULL;
    }
    disarm(ev, c);
    close(conn_fd(ev, c));
    c->open = 0;
    c->gen = (c->gen + 1) & GEN_MASK;
    ev->nconns--;
    SB_SET(ev->slot->active, ev->nconns);
    ev->hooks.slot_freed(ev);
}

/* ---- the response batch ---- */

/* Pipelined responses leave in one writev per batch. Once a batch holds this
 * many bytes it is written before another request is parsed, and when the
 * socket does not take it all the connection parses nothing more until it
 * drains: its unparsed requests wait in its input buffer and its socket is
 * not read. So a client that pipelines without reading costs its input
 * buffer, its response heads, and references to at most this many bytes
 * (plus one response) of file-cache bodies, never a copy of them. 256 KiB
 * keeps 16-deep pipelines of 32 KiB files at two writes; 64 KiB made it
 * eight and looked ~10% costlier per request (bench/RESULTS.md section 6). */
#define OUT_BUDGET (256 * 1024)

static void batch_reset(struct evloop *ev)
{
    ev->out.len = 0;
    ev->niov = 0;
    ev->batch_bytes = 0;
}

static void batch_release(struct evloop *ev)
{
    for (int i = 0; i < ev->nrefs; i++)
        fc_release(ev->refs[i]);
    ev->nrefs = 0;
}

static void batch_add(struct evloop *ev, const char *p, size_t len)
{
    if (!len)
        return;
    struct iovec *last = ev->niov ? &ev->iov[ev->niov - 1] : NULL;
    if (last && (const char *)last->iov_base + last->iov_len == p)
        last->iov_len += len; /* heads of consecutive responses are adjacent */
    else
        ev->iov[ev->niov++] = (struct iovec){(void *)p, len};
    ev->batch_bytes += len;
}

/* Keeps what the socket did not take: the batch from byte `done` on, then
 * file[off, end), known to be cached up to warm_end. Takes over the
 * batch's references and the file's. */
static int block_with(struct evloop *ev, struct conn *c, size_t done, struct fc_entry *file,
                      off_t off, off_t end, off_t warm_end, unsigned char cold)
{
    c->out = pending_new(ev->iov, ev->niov, done, ev->out.buf, ev->out.buf + ev->out.cap,
                         ev->refs, ev->nrefs, file, off, end);
    ev->nrefs = 0;
    if (!c->out)
        return IO_FATAL;
    c->out->warm_end = warm_end;
    c->out->cold = cold;
    return IO_BLOCKED;
}

/* send (one buffer) or sendmsg, or the TLS transport: bytes or -errno. */
static ssize_t conn_send(struct conn *c, int fd, const struct msghdr *m, int more)
{
    if (c->ssl)
        return tls_writev(c->ssl, m->msg_iov, (int)m->msg_iovlen);
    int flags = MSG_NOSIGNAL | (more ? MSG_MORE : 0);
    ssize_t n = m->msg_iovlen == 1 ? send(fd, m->msg_iov[0].iov_base, m->msg_iov[0].iov_len, flags)
                                   : sendmsg(fd, m, flags);
    return n < 0 ? -errno : n;
}

static int io_result(int rc)
{
    return rc == 0 ? IO_DONE : rc == -EAGAIN ? IO_BLOCKED : IO_FATAL;
}

/* sendfile until done or EAGAIN. Returns IO_DONE, IO_BLOCKED or IO_FATAL
 * (an error, or a file that shrank under us: Content-Length is a promise). */
static int send_file_range(struct evloop *ev, struct conn *c, int fd, struct fc_entry *f,
                           off_t *off, off_t end)
{
    uint64_t sent = 0;
    int rc = plan_send_file(fd, c->ssl, f, off, end, &sent);
    SB_ADD(ev->slot->bytes_out, sent);
    return io_result(rc);
}

/* file[*off, end) a window at a time, each once it is in the page cache
 * (*warm_end: known cached up to there; models/file_window.h), while the
 * connection's turn lasts. Returns IO_DONE, IO_BLOCKED, IO_FATAL, IO_YIELD
 * or IO_COLD (the window at *off must be read in first); nothing of the
 * window at *off went for the last two. */
static int send_windows(struct evloop *ev, struct conn *c, int fd, struct fc_entry *f,
                        off_t *off, off_t end, off_t *warm_end, unsigned char *cold)
{
    while (*off < end) {
        if (*warm_end <= *off) {
            if (conn_turn_spent(ev))
                return IO_YIELD;
            off_t stop = file_window_end(*off, end);
            if (!warm_ring_window_ready(&ev->warm, f, *off, stop, cold))
                return IO_COLD;
            *warm_end = stop;
        }
        off_t from = *off;
        int rc = send_file_range(ev, c, fd, f, off, *warm_end);
        ev->turn_bytes += *off - from;
        if (rc != IO_DONE)
            return rc;
    }
    return IO_DONE;
}

static int write_owed(struct evloop *ev, struct conn *c);

/* c->out's next file window is cold: read it in and wait (IO_BLOCKED),
 * or, where it cannot be read in, send it as before. */
static int read_window_in(struct evloop *ev, struct conn *c)
{
    if (conn_warm_read(ev, c) == 0)
        return IO_BLOCKED;
    c->out->warm_end = file_window_end(c->out->file_off, c->out->file_end);
    return write_owed(ev, c);
}

/* c's turn is over with c->out left: it goes on next round (out of
 * memory, it closes, as when its output cannot be kept). */
static int end_turn(struct evloop *ev, struct conn *c)
{
    return conn_yield(ev, c) == 0 ? IO_BLOCKED : IO_FATAL;
}

/* Writes the batch, then file[off, off+len) when file is given (MSG_MORE
 * keeps the head and the first file bytes in one segment, and the last
 * answer before a close in one segment with the FIN; not before a file
 * window that must be read in first). */
static int flush(struct evloop *ev, struct conn *c, struct fc_entry *file, off_t off, off_t len)
{
    int fd = conn_fd(ev, c);
    off_t end = off + len, warm_end = off;
    unsigned char cold = 0;
    if (file && !conn_turn_spent(ev) &&
        warm_ring_window_ready(&ev->warm, file, off, file_window_end(off, end), &cold))
        warm_end = file_window_end(off, end);
    size_t done = 0;
    int rc = IO_DONE;
    while (done < ev->batch_bytes) {
        struct iovec tmp[BATCH_IOV];
        struct msghdr m = {.msg_iov = ev->iov, .msg_iovlen = (size_t)ev->niov};
        if (done) {
            /* after a short write: a view of what is left (rare path) */
            size_t skip = done;
            int k = 0;
            for (int i = 0; i < ev->niov; i++) {
                size_t l = ev->iov[i].iov_len;
                if (skip >= l) {
                    skip -= l;
                    continue;
                }
                tmp[k++] = (struct iovec){(char *)ev->iov[i].iov_base + skip, l - skip};
                skip = 0;
            }
            m.msg_iov = tmp;
            m.msg_iovlen = (size_t)k;
        }
        /* MSG_MORE also before a close: see plan_write.h */
        ssize_t n = conn_send(c, fd, &m, warm_end > off || c->st.closing);
        if (n < 0) {
            if (n == -EINTR)
                continue;
            if (n != -EAGAIN)
                rc = IO_FATAL;
            break;
        }
        done += (size_t)n;
    }
    SB_ADD(ev->slot->bytes_out, done);
    ev->turn_bytes += (off_t)done;
    if (rc == IO_FATAL) {
        if (file)
            fc_release(file);
        batch_reset(ev);
        batch_release(ev);
        return IO_FATAL;
    }
    if (done < ev->batch_bytes) {
        rc = block_with(ev, c, done, file, off, end, warm_end, cold);
    } else if (file) {
        rc = send_windows(ev, c, fd, file, &off, end, &warm_end, &cold);
        if (rc == IO_BLOCKED || rc == IO_COLD || rc == IO_YIELD) {
            int why = rc;
            batch_reset(ev);
            batch_release(ev);
            rc = block_with(ev, c, 0, file, off, end, warm_end, cold);
            if (rc == IO_BLOCKED && why == IO_COLD)
                rc = read_window_in(ev, c);
            else if (rc == IO_BLOCKED && why == IO_YIELD)
                rc = end_turn(ev, c);
        } else {
            fc_release(file);
        }
    }
    batch_reset(ev);
    batch_release(ev);
    return rc;
}

/* Writes what a blocked connection still owes, its file a window at a
 * time as flush does. */
static int write_owed(struct evloop *ev, struct conn *c)
{
    struct pending *p = c->out;
    for (;;) {
        int next = IO_DONE; /* or what to do once what may go now went */
        if (pending_file_left(p) && p->warm_end <= p->file_off) {
            off_t stop = file_window_end(p->file_off, p->file_end);
            if (conn_turn_spent(ev))
                next = IO_YIELD;
            else if (warm_ring_window_ready(&ev->warm, p->file, p->file_off, stop, &p->cold))
                p->warm_end = stop;
            else
                next = IO_COLD;
        }
        uint64_t sent;
        off_t from = p->file_off;
        int rc = pending_write(p, conn_fd(ev, c), c->ssl, &sent);
        SB_ADD(ev->slot->bytes_out, sent);
        ev->turn_bytes += p->file_off - from;
        if (rc < 0)
            return io_result(rc);
        if (!pending_file_left(p))
            break;
        if (next == IO_COLD)
            return read_window_in(ev, c);
        if (next == IO_YIELD)
            return end_turn(ev, c);
    }
    pending_free(c->out);
    c->out = NULL;
    return IO_DONE;
}

/* ---- requests ---- */

void conn_log(struct evloop *ev, const struct conn *c, const struct http_request *req,
              unsigned status, uint64_t bytes)
{
    step_account(&ev->step, &c->st, req, status, bytes);
}

/* Adds an answer's plan to the batch; a file to sendfile flushes it. */
static int batch_plan(struct evloop *ev, struct conn *c, struct http_plan *plan)
{
    if (!c->ssl)
        plan_inline_body(&ev->out, plan); /* TLS copies into records anyway */
    batch_add(ev, ev->out.buf + plan->head_off, plan->head_len);
    batch_add(ev, plan->body, plan->body_len);
    if (plan->file && plan->file->data) {
        batch_add(ev, plan->file->data + plan->file_off, (size_t)plan->file_len);
        ev->refs[ev->nrefs++] = plan->file;
    } else if (plan->file) {
        return flush(ev, c, plan->file, plan->file_off, plan->file_len);
    }
    return IO_DONE;
}

/* Answers the requests in data[0..len) through the request step, batching
 * the answers for one writev; *consumed gets the bytes used. Stops at an
 * incomplete request, a blocked write, a close, a proxy exchange or the
 * end of the connection's turn (IO_YIELD). */
static int serve_input(struct evloop *ev, struct conn *c, const char *data, size_t len,
                       size_t *consumed, int *served)
{
    const struct http_config *hc = &ev->cfg->http;
    size_t pos = 0;
    int rc = IO_DONE;
    batch_reset(ev);
    /* While handing over on a reload, answers keep the connection alive
     * (it moves on once idle), unless it cannot move. */
    ev->step.stopping = (uint8_t)conn_answers_close(ev, c);
    while (pos < len && !c->st.closing) {
        if (conn_turn_spent(ev)) {
            /* a pipelining client that reads fast: the rest of its input
             * waits for its next turn (conn_turn.c) */
            rc = flush(ev, c, NULL, 0, 0);
            if (rc == IO_DONE)
                rc = IO_YIELD;
            break;
        }
        if (ev->out.cap - ev->out.len <
                HTTP_HEAD_RESERVE + HTTP_STATUS_MAX + hc->max_header_size ||
            ev->niov > BATCH_IOV - 4 || ev->batch_bytes >= OUT_BUDGET) {
            rc = flush(ev, c, NULL, 0, 0);
            if (rc != IO_DONE)
                break;
        }
        struct step_result r;
        enum step_action a = step_next(&ev->step, &c->st, data + pos, len - pos, &ev->req,
                                       &ev->out, &r);
        pos += r.used;
        if (a == STEP_MORE)
            break;
        if (a == STEP_CLOSE) {
            /* answers already batched still go out; then the connection closes */
            log_debug("connection %d: no valid PROXY header, or a broken body",
                      conn_fd(ev, c));
            c->st.closing = 1;
            pos = len;
            break;
        }
        if (a == STEP_UPSTREAM) {
            /* Earlier responses of the batch go first; the exchange then
             * owns the connection until it ends. */
            rc = flush(ev, c, NULL, 0, 0);
            if (rc != IO_DONE) {
                step_put_back(&c->st); /* parsed again once the output drains */
                break;
            }
            long took = ev->hooks.proxy_start(ev, c, r.route, &ev->req, data + pos, r.head_len,
                                    data + pos + r.head_len, len - pos - r.head_len);
            if (took < 0) {
                rc = IO_FATAL;
                break;
            }
            pos += r.head_len + (size_t)took;
            rc = IO_PROXY;
            break;
        }
        (*served)++;
        rc = batch_plan(ev, c, &r.plan);
        if (rc != IO_DONE)
            break;
    }
    if (rc == IO_DONE)
        rc = flush(ev, c, NULL, 0, 0);
    *consumed = pos;
    return rc;
}

/* Keeps data[pos..len) as the connection's input, in its own buffer. */
static int keep_input(struct evloop *ev, struct conn *c, char *data, size_t pos, size_t len)
{
    size_t left = c->st.closing ? 0 : len - pos;
    if (data && data == c->in) {
        if (left && pos)
            memmove(c->in, c->in + pos, left);
        c->in_len = (uint32_t)left;
        if (!left) {
            bufpool_put(&ev->inbufs, c->in);
            c->in = NULL;
        }
        return 0;
    }
    if (!left)
        return 0;
    c->in = bufpool_get(&ev->inbufs);
    if (!c->in)
        return -1;
    memcpy(c->in, data + pos, left);
    c->in_len = (uint32_t)left;
    return 0;
}

static void drain_linger(struct evloop *ev, struct conn *c);

/* Everything owed is written and the connection is to close. */
static void finish_closing(struct evloop *ev, struct conn *c, int waited)
{
    /* input a proxied request that closes left unread lingers too */
    if (!c->st.linger && !c->in_len && !(waited && linger_input_waiting(conn_fd(ev, c)))) {
        if (!c->ssl)
            shutdown(conn_fd(ev, c), SHUT_WR); /* sends the corked answer (plan_write.h) */
        conn_close(ev, c);
        return;
    }
    /* Closing with unread input makes the kernel send RST, which can destroy
     * the response before the client reads it: shut our side and read until
     * the peer closes (or the linger timer fires). TLS says close_notify
     * first; what the peer sends meanwhile is drained as raw bytes. */
    if (c->ssl)
        tls_close_notify(c->ssl);
    shutdown(conn_fd(ev, c), SHUT_WR);
    c->lingering = 1;
    if (c->in) {
        bufpool_put(&ev->inbufs, c->in);
        c->in = NULL;
        c->in_len = 0;
    }
    arm(ev, c, Q_LINGER);
    drain_linger(ev, c);
}

static void drain_linger(struct evloop *ev, struct conn *c)
{
    int fd = conn_fd(ev, c);
    for (int i = 0; i < LINGER_READS_MAX; i++) {
        ssize_t n = read(fd, ev->rbuf, ev->in_cap);
        if (n > 0) {
            /* read from the client, as uring counts it; over TLS these are
             * records left undecrypted, and bytes_in counts HTTP bytes */
            if (!c->ssl)
                SB_ADD(ev->slot->bytes_in, (uint64_t)n);
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        break;
    }
    conn_close(ev, c);
}

/* settle: whether the caller may go on with this connection (read more). */
enum { SETTLED_OPEN, SETTLED_DONE };

/* After serve_input: keep the leftover, then arm the timer that fits.
 * waited: served after a wait (a blocked write drained, an exchange
 * ended), when input sent meanwhile may sit unread in the socket. */
static int settle(struct evloop *ev, struct conn *c, char *data, size_t pos, size_t len,
                  int rc, int served, int waited)
{
    if (rc == IO_FATAL) {
        conn_close(ev, c);
        return SETTLED_DONE;
    }
    if (keep_input(ev, c, data, pos, len) < 0) {
        conn_close(ev, c);
        return SETTLED_DONE;
    }
    if (rc == IO_YIELD) {
        if (conn_yield(ev, c) < 0) {
            conn_close(ev, c);
            return SETTLED_DONE;
        }
        rc = IO_BLOCKED;
    }
    if (rc == IO_BLOCKED) {
        arm(ev, c, Q_SEND);
        return SETTLED_DONE;
    }
    if (rc == IO_PROXY) {
        ev->hooks.proxy_kick(ev, c);
        /* An edge read before the exchange began (an EOF behind the
         * request, or bytes a full read left) raises no new event: look now,
         * as the event would have, so a half-close counts as it does when
         * it comes later (SPEC-serve.md), whatever the packet timing. */
        if (c->xfer && c->want_read)
            ev->hooks.proxy_client_event(ev, c, EPOLLIN | EPOLLRDHUP);
        return SETTLED_DONE;
    }
    if (c->st.closing) {
        finish_closing(ev, c, waited);
        return SETTLED_DONE;
    }
    if (body_skip_active(&c->st.skip)) {
        /* A body runs on its own clock, from its head's answer; its bytes
         * never restart a timer. */
        if (served || c->queue != Q_BODY)
            arm(ev, c, Q_BODY);
    } else if (c->in_len) {
        /* A request head must arrive whole within the header timeout from its
         * first byte: bytes trickling in do not extend it. */
        if (served || c->queue != Q_HEADER)
            arm(ev, c, Q_HEADER);
    } else if (ev->stopping && ev->handing_over && !c->drain && c->st.nreq) {
        if (ev->hooks.hand_over(ev, c) == 0)
            return SETTLED_DONE;
        /* its next request is answered with close; a TLS connection never
         * moves (conn_hand_over), so it does not try again */
        c->drain = c->ssl ? DRAIN_KEEP : DRAIN_RETRY;
        arm(ev, c, Q_KEEPALIVE);
    } else if (ev->stopping && !c->drain) {
        conn_close(ev, c);
        return SETTLED_DONE;
    } else if (!c->st.nreq && !served) {
        /* only a PROXY header so far: the first request head is still due */
    } else {
        arm(ev, c, Q_KEEPALIVE);
    }
    return SETTLED_OPEN;
}

/* Returns 0 when the first read found nothing (-EAGAIN), else 1. */
static int on_readable(struct evloop *ev, struct conn *c, int rdhup)
{
    int fd = conn_fd(ev, c);
    if (c->lingering) {
        drain_linger(ev, c);
        return 1;
    }
    /* Back-pressure: read again once the output drains. A connection whose
     * exchange just ended holds its next requests for the resume: an EOF
     * read before them would drop them (a half-close after a pipelined
     * request). */
    if (c->out || c->st.closing || c->xfer || c->yielding || c->resuming) {
        if (c->out || c->yielding)
            c->st.next_pipelined = 1; /* input came before an answer ended */
        c->want_read = 1;
        return 1;
    }
    for (int reads = 0;; reads++) {
        char *buf = c->in ? c->in : ev->rbuf;
        size_t have = c->in ? c->in_len : 0;
        size_t space = ev->in_cap - have;
        ssize_t n = c->ssl ? tls_read(c->ssl, buf + have, space) : read(fd, buf + have, space);
        if (n < 0 && !c->ssl)
            n = -errno;
        if (n < 0) {
            if (n == -EINTR)
                continue;
            if (n != -EAGAIN)
                conn_close(ev, c);
            return reads > 0 || n != -EAGAIN;
        }
        if (n == 0) {
            conn_close(ev, c);
            return 1;
        }
        SB_ADD(ev->slot->bytes_in, (uint64_t)n);
        size_t len = have + (size_t)n, pos;
        /* A proxy exchange may take over in serve_input: it reads the
         * socket again afterwards only if this read may have left bytes. */
        c->want_read = (size_t)n >= space || rdhup || c->ssl;
        int served = 0;
        int rc = serve_input(ev, c, buf, len, &pos, &served);
        if (settle(ev, c, buf, pos, len, rc, served, 0) == SETTLED_DONE)
            return 1;
        /* Edge-triggered: a short read means the socket is drained, and new
         * bytes will raise a new event. After RDHUP read on to see the EOF.
         * TLS returns a record at a time: read on until -EAGAIN. */
        if ((size_t)n < space && !rdhup && !c->ssl)
            return 1;
    }
}

void conn_writable(struct evloop *ev, struct conn *c)
{
    /* no output owed: a turn ended with requests left in c's input */
    int rc = c->out ? write_owed(ev, c) : IO_DONE;
    if (rc == IO_FATAL) {
        conn_close(ev, c);
        return;
    }
    if (rc == IO_BLOCKED) {
        arm(ev, c, Q_SEND); /* progress or not, the send timeout restarts on events */
        return;
    }
    conn_proxy_resume(ev, c);
}

/* Output is done (a blocked write drained, or a proxy exchange ended):
 * close, or answer what is buffered, then read what arrived meanwhile. */
void conn_proxy_resume(struct evloop *ev, struct conn *c)
{
    if (c->st.closing) {
        finish_closing(ev, c, 1);
        return;
    }
    if (c->in_len) {
        size_t pos;
        int served = 0;
        int rc = serve_input(ev, c, c->in, c->in_len, &pos, &served);
        if (settle(ev, c, c->in, pos, c->in_len, rc, served, 1) == SETTLED_DONE)
            return;
    } else if (settle(ev, c, NULL, 0, 0, IO_DONE, 0, 1) == SETTLED_DONE) {
        return;
    }
    /* Input that arrived meanwhile raised its edge then (TLS may hold
     * decrypted bytes that raise none). */
    if (c->want_read || c->ssl) {
        c->want_read = 0;
        on_readable(ev, c, 1);
    }
}

/* A PROXY header before the TLS handshake: peeked until whole, then
 * consumed exactly, so the ClientHello behind it stays in the socket.
 * 1 when it is taken, 0 to wait for more, -1 to close. */
static int take_raw_pp(struct evloop *ev, struct conn *c)
{
    int fd = conn_fd(ev, c);
    ssize_t n = recv(fd, ev->rbuf, ev->in_cap < PP_V2_MAX ? ev->in_cap : PP_V2_MAX, MSG_PEEK);
    if (n < 0)
        return errno == EAGAIN || errno == EINTR ? 0 : -1;
    long k = n ? step_take_pp(&ev->step, &c->st, ev->rbuf, (size_t)n) : -1;
    if (k <= 0)
        return (int)k;
    return recv(fd, ev->rbuf, (size_t)k, 0) == k ? 1 : -1;
}

/* One handshake step; 1 once it is done (the connection serves). The
 * header timer, armed at open, cuts a handshake that stalls. */
static int handshake(struct evloop *ev, struct conn *c)
{
    if (c->st.await_pp) {
        int pp = take_raw_pp(ev, c);
        if (pp < 0)
            conn_close(ev, c);
        if (pp <= 0)
            return 0;
    }
    enum tls_fail why;
    int rc = tls_handshake(c->ssl, &why);
    if (rc == -EAGAIN)
        return 0;
    if (rc < 0) {
        SB_ADD(ev->slot->tls_failed[why], 1);
        log_debug("connection %d: TLS handshake failed (%s)", conn_fd(ev, c),
                  why == TLS_FAIL_PLAIN_HTTP ? "plain HTTP" : why == TLS_FAIL_PROTOCOL
                  ? "protocol" : "closed");
        if (why == TLS_FAIL_PLAIN_HTTP)
            tls_refuse_plain_http(conn_fd(ev, c));
        conn_close(ev, c);
        return 0;
    }
    c->handshaking = 0;
    SB_ADD(ev->slot->tls_handshakes, 1);
    if (SSL_session_reused(c->ssl))
        SB_ADD(ev->slot->tls_resumed, 1);
    return 1;
}

void conn_event(struct evloop *ev, struct conn *c, uint32_t events)
{
    if (c->ssl) {
        if (c->handshaking && !handshake(ev, c))
            return;
        /* OpenSSL may wait on either direction (and holds decrypted
         * records of its own): any event retries both. */
        events |= EPOLLIN | (c->out ? EPOLLOUT : 0);
    }
    if (c->xfer) {
        ev->hooks.proxy_client_event(ev, c, events);
        return;
    }
    conn_turn_start(ev);
    /* while a file window is read in, its completion writes (conn_warm.c);
     * after a turn, the loop's next round does (conn_turn.c) */
    if (c->out && !c->warming && !c->yielding && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
        conn_writable(ev, c);
        if (!c->open || c->out)
            return;
    }
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
        on_readable(ev, c, (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0);
}

/* The body queue's timer fired: 1 when the body kept its rate, and its
 * timer is queued again for the extended deadline. */
static int body_extended(struct evloop *ev, struct conn *c)
{
    const struct serve_config *cfg = ev->cfg;
    int64_t now = clock_now_ms();
    int64_t due = body_clock_deadline(&c->st.body, cfg->body_timeout_ms, cfg->body_min_rate);
    if (due <= now)
        return 0;
    /* at most one timeout ahead, so the FIFO stays in order */
    tq_arm_at(&ev->q_body, &c->timer, due < now + cfg->body_timeout_ms ? due
                                                                      : now + cfg->body_timeout_ms);
    return 1;
}

struct conn *conn_idle_victim(struct evloop *ev)
{
    int64_t now = clock_now_ms();
    struct tq_node *n = ev->q_keepalive.head.next;
    ev->victim_at = 0;
    for (int i = 0; i < IDLE_VICTIM_LOOKS && n != &ev->q_keepalive.head; i++, n = n->next) {
        struct conn *c = container_of(n, struct conn, timer);
        /* the ones after it turned idle later still */
        if ((ev->victim_at = idle_victim_from(tq_waited(&ev->q_keepalive, n, now), now)))
            return NULL;
        /* its next request already sent (its event not handled yet): closing
         * would lose it for a client that does not retry */
        if (!linger_input_waiting(conn_fd(ev, c)))
            return c;
    }
    return NULL;
}

void conn_timeout(struct evloop *ev, struct conn *c)
{
    if (c->queue == Q_BODY && body_extended(ev, c))
        return;
    log_debug("connection %d: %s timeout", conn_fd(ev, c),
              c->lingering ? "linger" : c->out ? "send" : c->queue == Q_BODY ? "body"
              : c->handshaking ? "TLS handshake"
              : c->in_len ? "header" : "idle");
    if (c->queue == Q_KEEPALIVE)
        SB_ADD(ev->slot->idle, -1);
    if (c->handshaking)
        SB_ADD(ev->slot->tls_failed[TLS_FAIL_TIMEOUT], 1);
    c->queue = Q_NONE;
    conn_close(ev, c);
}

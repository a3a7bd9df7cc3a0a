/* The reverse proxy's exchange pump. One exchange (struct xfer) per proxied
 * request moves bytes client -> ubuf -> upstream and upstream -> dbuf ->
 * client. Both buffers are bounded: a side whose buffer is full is not read
 * until the other side drains it, so a 100 MiB body costs no more memory
 * than a small one (back-pressure). Bodies are framed anew on the way
 * through (http/reframe.h): no chunk line or trailer a peer wrote reaches
 * the other side. Connections come from models/upstream_pool.c. */
#include "models/upstream.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "http/errorpage.h"
#include "http/filecache.h"
#include "http/path.h"
#include "http/proxy.h"
#include "http/reframe.h"
#include "models/upstream_internal.h"

/* ---- exchanges ---- */

static struct xfer *xfer_get(struct proxy *px)
{
    if (px->ncache)
        return px->cache[--px->ncache];
    struct xfer *x = malloc(sizeof *x);
    if (!x)
        return NULL;
    x->ubuf = malloc(px->ucap + px->uslack);
    if (!x->ubuf) {
        free(x);
        return NULL;
    }
    x->loghead = NULL;
    x->loghead_cap = 0;
    return x;
}

/* A log copy past this is not kept with a cached exchange: with a large
 * --max-header-size a burst of big heads would otherwise leave up to
 * XFER_CACHE such copies behind for good. */
#define LOGHEAD_KEEP 16384

static void xfer_put(struct proxy *px, struct xfer *x)
{
    if (x->loghead_cap > LOGHEAD_KEEP) {
        free(x->loghead);
        x->loghead = NULL;
        x->loghead_cap = 0;
    }
    if (px->ncache < XFER_CACHE) {
        px->cache[px->ncache++] = x;
        return;
    }
    xfer_free(x);
}

/* Keeps a copy of the request head for the log line; without room (no
 * memory) the line goes without the request's fields, as before. */
static void keep_loghead(struct xfer *x, const char *head, size_t head_len)
{
    if (head_len > x->loghead_cap) {
        size_t cap = head_len < 1024 ? 1024 : head_len;
        char *p = realloc(x->loghead, cap);
        if (!p)
            return;
        x->loghead = p;
        x->loghead_cap = (uint32_t)cap;
    }
    memcpy(x->loghead, head, head_len);
    x->loghead_len = (uint32_t)head_len;
}

/* Counters and the access log, once, like a static request. */
static void account(struct proxy *px, struct xfer *x)
{
    unsigned status = x->status ? x->status : 502;
    struct http_request req;
    int ok = x->loghead_len &&
             http_parse_request(x->loghead, x->loghead_len, x->loghead_len, &req) > 0;
    step_account(px->step, x->st, ok ? &req : NULL, status, x->body_sent);
}

/* A stopping worker answers this client with close: unless it is
 * reloading and the connection can move on to the new generation once
 * its answer is out (the driver hands it over then), or the driver holds
 * the client's next request, read already: that one is answered too, and
 * its answer says close (a graceful stop finishes what it received). */
static int stop_closes(const struct proxy *px, const struct xfer *x)
{
    int stop = px->drv->client_must_close ? px->drv->client_must_close(px->drv_arg, x->client)
                                          : *px->stopping;
    return stop && !px->drv->client_pending(px->drv_arg, x->client);
}

/* The client connection closes when the exchange ends: finish() marks it
 * so, and the last bytes of the answer go corked for the FIN to ride with
 * them (plan_write.h). */
static int client_closes_after(const struct proxy *px, const struct xfer *x)
{
    /* st->closing: the driver dropped input piling up behind the answer */
    return !x->client_keepalive || !x->req_done || stop_closes(px, x) || x->st->closing;
}

/* The body of a configured error page (--error-page) into dbuf, where an
 * answer's body goes out from; -1 when it is larger or cannot be read. */
static int error_page_body(struct xfer *x, const struct fc_entry *e, off_t len)
{
    if (len > (off_t)sizeof x->dbuf)
        return -1;
    if (e->data)
        memcpy(x->dbuf, e->data, (size_t)len);
    else if (pread(e->fd, x->dbuf, (size_t)len, 0) != len)
        return -1;
    x->dlen = (size_t)len;
    return 0;
}

/* Replaces the response with an error page (nothing reached the client
 * yet): the --error-page for status when one is set and fits dbuf, else
 * the built-in one. The upstream connection is not reused. */
static void respond_error(struct proxy *px, struct xfer *x, unsigned status)
{
    up_release(px, x, 0);
    struct http_out out = {x->hbuf, 0, sizeof x->hbuf};
    struct http_plan plan = {0};
    int keep = !client_closes_after(px, x);
    http_error_page(px->step->http, status, x->client_minor, keep, x->head_request, NULL, 0,
                    &out, &plan);
    x->dlen = 0;
    if (plan.file) {
        int ok = error_page_body(x, plan.file, plan.file_len) == 0;
        fc_release(plan.file);
        if (!ok) {
            out.len = 0;
            plan = (struct http_plan){0};
            resp_error(&out, &plan, status, x->client_minor, keep, x->head_request);
        }
    }
    if (plan.body && plan.body_len) {
        x->dlen = plan.body_len;
        memcpy(x->dbuf, plan.body, x->dlen);
    }
    x->hlen = out.len;
    x->hoff = 0;
    x->doff = 0;
    x->status = (uint16_t)status;
    x->client_keepalive = (uint8_t)keep;
    x->head_done = x->resp_done = x->errored = 1;
}

/* Ends the exchange at once: the client connection closes (a truncated
 * response is the only honest signal once the head has gone out). */
static int abort_client(struct proxy *px, struct xfer *x)
{
    px->drv->client_close(px->drv_arg, x->client); /* calls upstream_abort, which frees x */
    return -1;
}

/* The client is gone (EOF or RST) while its request is upstream: the
 * exchange ends, its upstream connection closes (what it would answer is
 * not wanted, and it may be mid-response), and the log says 499 (nginx's
 * "client closed request") unless part of a response already went out. */
static int client_gone(struct proxy *px, struct xfer *x)
{
    if (!x->hoff && !x->body_sent)
        x->status = 499;
    x->up_reusable = 0;
    return abort_client(px, x);
}

/* Has the client left while its whole request is upstream? Its input is
 * not read then, so peek: EOF or an error means gone; bytes (a pipelined
 * request) or nothing yet mean it is still there, as nginx's
 * ngx_http_upstream_check_broken_connection decides. An EOF behind
 * pipelining is a half-close after the requests: the client waits for
 * every answer. That is an EOF while the driver holds the next request,
 * or during a request that itself came behind an earlier unanswered one
 * (st->this_pipelined). Returns -1 when it left (the exchange is over),
 * else 0. */
static int client_left(struct proxy *px, struct xfer *x)
{
    if (!x->req_done || x->errored)
        return 0; /* client_to_ubuf reads (and sees the EOF itself) */
    char peek[8];
    ssize_t n;
    /* Raw bytes may be a close_notify: only OpenSSL can tell, and it may
     * be asked only while none of the answer went out. With a write
     * pending, processing a record (a KeyUpdate) breaks that write; then
     * a raw peek must do, and a failed send shows a client that left. */
    int ask_tls = x->client_ssl && !x->hoff && !x->body_sent && !x->continue_left;
    if (ask_tls) {
        n = tls_peek(x->client_ssl, peek, sizeof peek);
    } else {
        n = recv(x->client_fd, peek, sizeof peek, MSG_PEEK | MSG_DONTWAIT);
        if (n < 0)
            n = -errno;
    }
    /* bytes sent before this answer: the next request (under TLS, raw, a
     * record of it most likely) */
    if (n > 0 && x->client_ssl && !ask_tls)
        x->st->next_pipelined = 1;
    else if (n > 0)
        step_saw_next(x->st, peek, (size_t)n);
    if (n > 0 || n == -EAGAIN || n == -EINTR)
        return 0;
    if (n == 0 && (x->st->this_pipelined || px->drv->client_pending(px->drv_arg, x->client)))
        return 0;
    return client_gone(px, x);
}

/* The upstream failed (error, early close, timeout) before a byte of an
 * answer: may the request go again? Only an idempotent one (the server
 * may have acted on it and died: a POST must not run twice) whose bytes
 * ubuf still holds from the start (a body streamed on past it cannot be
 * sent twice). A pooled connection that closed unanswered is no fault of
 * its server (it closed the idle connection as we sent): a fresh
 * connection follows, not counted as a try. A fresh one that closed, or
 * any that timed out, counts against the group's size (up_connect). A
 * fresh connection closed unanswered marks its server down whatever the
 * method (the caller marked a read timeout): a POST that may not go
 * again must still steer the next requests away from a dying server. */
static int retry_elsewhere(struct proxy *px, struct xfer *x, int timeout)
{
    if (!timeout && !x->reused && !x->got_bytes)
        mark_down(px, x, "closed before answering");
    if (x->got_bytes || x->udiscarded || !x->may_retry)
        return -1;
    up_release(px, x, 0);
    if (!x->reused || timeout)
        x->tries++;
    x->uoff = 0;
    return up_connect(px, x);
}

/* The upstream broke off a response whose head went to the client: the
 * client gets a truncated answer and a close, and the log says why (nginx:
 * "upstream prematurely closed connection while reading upstream"). */
static void log_cut_short(struct proxy *px, struct xfer *x, const char *how)
{
    if (x->head_done)
        log_msg(LOG_WARN, "upstream %s: %s inside the response body; the client's answer "
                "is cut short", px->groups[x->group].cfg->name, how);
}

/* The upstream failed (error, early close, timeout). Before the response
 * head: retry when retry_elsewhere may, else answer 502 (504 on timeout).
 * After it: close the client (a truncated response; never re-sent). */
static int upstream_failed(struct proxy *px, struct xfer *x, int timeout)
{
    if (x->head_done)
        return abort_client(px, x);
    if (retry_elsewhere(px, x, timeout) == 0)
        return 1;
    respond_error(px, x, timeout ? 504 : 502);
    return 1;
}

/* The client's side, plain or TLS (net/tls.h): bytes or -errno. A TLS
 * write that said -EAGAIN is retried from the same offsets (dbuf only
 * grows meanwhile), as OpenSSL requires. */
static ssize_t client_read(struct proxy *px, struct xfer *x, void *buf, size_t n)
{
    ssize_t had = px->drv->client_input ? px->drv->client_input(px->drv_arg, x->client, buf, n)
                                         : 0;
    if (had)
        return had;
    if (x->client_ssl)
        return tls_read(x->client_ssl, buf, n);
    ssize_t r = read(x->client_fd, buf, n);
    return r < 0 ? -errno : r;
}

/* more: a close follows the last of these bytes; the driver's shutdown
 * pushes them with its FIN (TLS ends with a close_notify record anyway). */
static ssize_t client_send(struct xfer *x, const struct msghdr *m, int more)
{
    if (x->client_ssl)
        return tls_writev(x->client_ssl, m->msg_iov, (int)m->msg_iovlen);
    ssize_t r = sendmsg(x->client_fd, m, MSG_NOSIGNAL | (more ? MSG_MORE : 0));
    return r < 0 ? -errno : r;
}

/* The interim answer to "Expect: 100-continue". It goes at once; what the
 * client's socket did not take (a full buffer: the client pipelined and
 * does not read) goes first with the next bytes dbuf_to_client sends, as a
 * cut-short line would corrupt the answer after it. Under TLS a refused
 * write leaves the record in OpenSSL, which sends it when the same bytes
 * are offered again: the same rule. */
static const char CONTINUE_LINE[] = "HTTP/1.1 100 Continue\r\n\r\n";
#define CONTINUE_LEN (sizeof CONTINUE_LINE - 1)

static void send_continue(struct xfer *x)
{
    struct iovec v = {(void *)CONTINUE_LINE, CONTINUE_LEN};
    struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1};
    ssize_t n;
    do
        n = client_send(x, &m, 0);
    while (n == -EINTR);
    x->continue_left = (uint8_t)(n > 0 ? CONTINUE_LEN - (size_t)n : CONTINUE_LEN);
}

/* Bytes still to go to the client: the interim line's rest, then (once
 * the head is made) the head and dbuf. */
static int client_owed(const struct xfer *x)
{
    return x->continue_left || (x->head_done && (x->hoff < x->hlen || x->doff < x->dlen));
}

int upstream_reads_body(const struct xfer *x)
{
    /* once the response is complete the rest of the body is not wanted
     * (an early answer such as 413): the client connection will linger */
    return !x->req_done && !x->errored && !x->resp_done;
}

/* Client body bytes into ubuf, while it has room. */
static int client_to_ubuf(struct proxy *px, struct xfer *x)
{
    if (!upstream_reads_body(x))
        return 0;
    size_t cap = px->ucap;
    if (x->ulen + px->in_cap > cap && x->uoff) {
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
        n = client_read(px, x, px->rbuf, room < px->in_cap ? room : px->in_cap);
    while (n == -EINTR);
    if (n == -EAGAIN)
        return 0;
    if (n <= 0)
        return client_gone(px, x); /* gone before its body ended */
    SB_ADD(px->step->slot->bytes_in, (uint64_t)n);
    x->client_progress = 1;
    body_clock_add(&x->st->body, (size_t)n);
    struct reframe_out o = {x->ubuf, x->ulen, cap + px->uslack, NULL, 0};
    long k = x->codec->request_body(&x->req_body, px->rbuf, (size_t)n,
                                    px->cfg->http.max_body_size, &o);
    if (k < 0) {
        /* the upstream connection closes: what went up of it is not a request */
        x->client_keepalive = 0;
        respond_error(px, x, body_error_status(k));
        return 1;
    }
    x->ulen = o.len;
    if (!x->req_body.active) {
        x->req_done = 1;
        if (k < n) {
            /* the next pipelined request: the client's input once we are done */
            step_saw_next(x->st, px->rbuf + k, (size_t)(n - k));
            if (px->drv->client_leftover(px->drv_arg, x->client, px->rbuf + k,
                                         (size_t)(n - k)) < 0)
                return abort_client(px, x);
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
static int frame_body(struct proxy *px, struct xfer *x, const char *src, size_t n)
{
    if (x->resp_done) {
        x->up_reusable = 0; /* bytes after a complete response */
        return 1;
    }
    struct reframe_out o = {x->dbuf, x->dlen, sizeof x->dbuf, x->dspill, x->dspill_len};
    long k = x->codec->response_body(&x->resp_body, src, n, &o);
    x->dlen = o.len;
    x->dspill_len = (uint8_t)o.over_len;
    if (k < 0) {
        /* HTTP: a chunk line; FastCGI: a record, or END_REQUEST before the
         * Content-Length the script gave was met */
        log_msg(LOG_WARN, "upstream %s: %s", px->groups[x->group].cfg->name,
                x->codec == &upstream_http1 ? "broken chunked body"
                                            : "broken response body (a bad record, or fewer "
                                              "bytes than its Content-Length)");
        if (!x->hoff && !x->body_sent) {
            /* it came with the head, of which nothing went out: a clean 502 */
            x->dspill_len = 0;
            respond_error(px, x, 502);
            return 1;
        }
        return abort_client(px, x);
    }
    if (!x->resp_body.active) {
        x->resp_done = 1;
        if ((size_t)k < n)
            x->up_reusable = 0;
    }
    return 1;
}

/* The response head in dbuf[0..dlen): the client's head goes to hbuf, and
 * the body bytes that came with it are framed as body. */
static int parse_head(struct proxy *px, struct xfer *x)
{
    const char *gname = px->groups[x->group].cfg->name;
    for (;;) {
        /* An answer before the whole body (an early 413 or 401) ends the
         * client connection (the rest of the body is never read), and its
         * head must say so (RFC 9112 9.6): a client that took it for kept
         * alive sent its next request into the close. */
        struct upstream_head h = {.keepalive = x->client_keepalive && x->req_done &&
                                               !stop_closes(px, x),
                                  .pass_server = px->cfg->proxy_pass_server};
        int n = x->codec->response_head(x->dbuf, x->dlen, UP_HEAD_MAX, x->head_request,
                                        x->client_minor, &h, &x->resp_body, x->hbuf,
                                        sizeof x->hbuf);
        if (n == HTTP_PARSE_INCOMPLETE)
            return 1;
        if (n == HTTP_PARSE_ERROR) {
            if (h.err)
                log_msg(LOG_WARN, "upstream %s: %s", gname, h.err);
            respond_error(px, x, 502);
            return 1;
        }
        if (h.status < 200) {
            memmove(x->dbuf, x->dbuf + n, x->dlen - (size_t)n);
            x->dlen -= (size_t)n;
            continue;
        }
        x->status = h.status;
        x->client_keepalive = h.keepalive;
        x->up_reusable = h.reusable;
        x->hlen = h.len;
        x->hoff = 0;
        x->head_done = 1;
        x->resp_done = !x->resp_body.active;
        size_t rest = x->dlen - (size_t)n;
        x->dlen = x->doff = 0;
        if (!rest)
            return 1;
        if (x->resp_body.aside) { /* framed anew from aside: rest <= UP_HEAD_MAX <= in_cap */
            memcpy(px->rbuf, x->dbuf + n, rest);
            return frame_body(px, x, px->rbuf, rest);
        }
        memmove(x->dbuf, x->dbuf + n, rest);
        return frame_body(px, x, x->dbuf, rest);
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

static int upstream_to_dbuf(struct proxy *px, struct xfer *x)
{
    if (x->resp_done || x->errored)
        return 0;
    if (x->head_done && x->doff == x->dlen)
        dbuf_drained(x);
    size_t cap = x->head_done ? sizeof x->dbuf : UP_HEAD_MAX;
    if (x->dlen == cap || !x->up_readable)
        return 0; /* back-pressure: the client has not taken it yet */
    /* a chunked body is read aside and framed anew into dbuf */
    int aside = x->head_done && x->resp_body.aside;
    char *to = aside ? px->rbuf : x->dbuf + x->dlen;
    size_t want = cap - x->dlen;
    if (aside && want > px->in_cap)
        want = px->in_cap;
    ssize_t n;
    do
        n = read(x->up_fd, to, want);
    while (n < 0 && errno == EINTR);
    if (n < 0) {
        if (errno == EAGAIN) {
            x->up_readable = 0;
            return 0;
        }
        log_cut_short(px, x, strerror(errno));
        return upstream_failed(px, x, 0);
    }
    x->up_progress = 1;
    x->up_read_full = (size_t)n == want;
    if (n == 0) {
        if (x->head_done && x->codec->response_ends_at_close(&x->resp_body)) {
            /* the codec ends its own framing: the last of herd's chunks */
            struct reframe_out o = {x->dbuf, x->dlen, sizeof x->dbuf, x->dspill,
                                    x->dspill_len};
            x->codec->response_body(&x->resp_body, NULL, 0, &o);
            x->dlen = o.len;
            x->dspill_len = (uint8_t)o.over_len;
            x->resp_done = 1;
            return 1;
        }
        if (!x->head_done && x->got_bytes) {
            log_msg(LOG_WARN, "upstream %s: closed inside the response head",
                    px->groups[x->group].cfg->name);
            respond_error(px, x, 502);
            return 1;
        }
        log_cut_short(px, x, "closed");
        return upstream_failed(px, x, 0);
    }
    if (!x->got_bytes)
        stall_answered(px, x);
    x->got_bytes = 1;
    if (!x->head_done) {
        x->dlen += (size_t)n;
        int rc = parse_head(px, x);
        if (rc > 0 && !x->head_done && x->dlen >= UP_HEAD_MAX) {
            log_msg(LOG_WARN, "upstream %s: response head too large",
                    px->groups[x->group].cfg->name);
            respond_error(px, x, 502);
        }
        return rc;
    }
    return frame_body(px, x, to, (size_t)n);
}

static int dbuf_to_client(struct proxy *px, struct xfer *x)
{
    if (!client_owed(x))
        return 0;
    struct iovec iov[3];
    int niov = 0;
    if (x->continue_left)
        iov[niov++] = (struct iovec){(void *)(CONTINUE_LINE + CONTINUE_LEN - x->continue_left),
                                     x->continue_left};
    if (x->head_done) {
        if (x->hoff < x->hlen)
            iov[niov++] = (struct iovec){x->hbuf + x->hoff, x->hlen - x->hoff};
        iov[niov++] = (struct iovec){x->dbuf + x->doff, x->dlen - x->doff};
    }
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)niov};
    int more = x->resp_done && client_closes_after(px, x);
    ssize_t n;
    do
        n = client_send(x, &m, more);
    while (n == -EINTR);
    if (n < 0) {
        if (n == -EAGAIN)
            return 0;
        return abort_client(px, x);
    }
    SB_ADD(px->step->slot->bytes_out, (uint64_t)n);
    size_t left = (size_t)n;
    size_t from_continue = left < x->continue_left ? left : x->continue_left;
    x->continue_left = (uint8_t)(x->continue_left - from_continue);
    left -= from_continue;
    size_t h = x->hlen - x->hoff;
    size_t from_head = left < h ? left : h;
    x->hoff += from_head;
    left -= from_head;
    x->doff += left;
    x->body_sent += left;
    if (x->head_done && x->doff == x->dlen)
        dbuf_drained(x);
    x->client_progress = 1;
    return 1;
}

/* Is the upstream connection silent (nothing to read, no close)? A
 * look only when an event said otherwise (x->up_unread), or when the read
 * the answer ended in filled its buffer (x->up_read_full): bytes past the
 * answer that came with it are still in the socket, and their edge was
 * the one that read used. A recv for every exchange would cost the hot
 * path a syscall. */
static int up_silent(const struct xfer *x)
{
    return (!x->up_unread && !x->up_read_full) || up_fd_silent(x->up_fd);
}

/* The exchange is over: account, pool the upstream connection, and hand
 * the client back after this event batch (its next request may be
 * proxied again; doing that here would nest). */
static void finish(struct proxy *px, struct xfer *x)
{
    void *client = x->client;
    int reuse = x->up_reusable && x->req_done && x->uoff == x->ulen && !x->errored &&
                !x->up_wdead && up_silent(x);
    up_release(px, x, reuse);
    account(px, x);
    px->drv->client_timer(px->drv_arg, client, UT_NONE);
    if (client_closes_after(px, x)) {
        x->st->linger = x->st->linger || !x->req_done; /* 0 unless closing was set */
        x->st->closing = 1;
    }
    xfer_put(px, x);
    px->drv->client_done(px->drv_arg, client);
}

/* Timers after a round of moves: the upstream's (connect, send, read)
 * and the client's (send while it blocks, header while its body is due).
 * Each restarts when its side made progress or changed state. */
static void set_timers(struct proxy *px, struct xfer *x)
{
    if (x->up_fd >= 0 && !x->connecting) {
        struct up_conn *uc = &px->ups[x->up_fd];
        /* The read timeout runs once the whole request went up (or the
         * upstream answered early, or stopped taking the body), as nginx's
         * proxy_read_timeout: a client slow with its body is the body
         * timer's, not the upstream's fault. */
        int q = x->uoff < x->ulen && !x->resp_done && !x->up_wdead ? QU_SEND
                : !x->resp_done && (x->req_done || x->got_bytes || x->up_wdead) &&
                  (!x->head_done || x->dlen < sizeof x->dbuf) ? QU_READ
                                                             : QU_NONE;
        if (q == QU_NONE) {
            up_disarm(uc);
        } else if (q != uc->queue || x->up_progress) {
            up_arm(px, uc, q);
        }
        if (x->req_done && x->uoff == x->ulen && !x->got_bytes && !x->errored)
            stall_arm(px, x);
    }
    x->up_progress = 0;
    int q = client_owed(x) ? UT_SEND
            : !x->req_done && !x->errored && x->ulen < px->ucap ? UT_BODY
                                                                : UT_NONE;
    /* progress restarts the send timer; the body clock only counts bytes */
    if (q != x->client_timer || (x->client_progress && q == UT_SEND)) {
        x->client_timer = (uint8_t)q;
        px->drv->client_timer(px->drv_arg, x->client, q);
    }
    x->client_progress = 0;
}

/* Moves bytes every way they can go until nothing moves (edge-triggered:
 * every side is tried until EAGAIN or a full buffer, whose drain is
 * noticed here, in the same loop). */
static void pump(struct proxy *px, struct xfer *x)
{
    for (;;) {
        int moved = 0, r;
        if ((r = client_to_ubuf(px, x)) < 0)
            return;
        moved |= r;
        if (x->up_fd >= 0 && !x->connecting) {
            if ((r = ubuf_to_upstream(x)) < 0)
                return;
            moved |= r;
            if (x->up_fd >= 0 && (r = upstream_to_dbuf(px, x)) < 0)
                return;
            moved |= r;
        }
        if ((r = dbuf_to_client(px, x)) < 0)
            return;
        moved |= r;
        if (x->resp_done && !client_owed(x)) {
            finish(px, x);
            return;
        }
        if (!moved)
            break;
    }
    set_timers(px, x);
}

/* A 503 for servers that are all busy says when to come back (RFC 9110
 * 10.2.3): the header goes in after the status line of the error page. */
static void add_retry_after(struct xfer *x)
{
    static const char h[] = "Retry-After: 1\r\n";
    char *eol = memchr(x->hbuf, '\n', x->hlen);
    if (!eol || x->hlen + sizeof h - 1 > sizeof x->hbuf)
        return;
    size_t at = (size_t)(eol + 1 - x->hbuf);
    memmove(x->hbuf + at + sizeof h - 1, x->hbuf + at, x->hlen - at);
    memcpy(x->hbuf + at, h, sizeof h - 1);
    x->hlen += sizeof h - 1;
}

static void client_addr(const struct step_conn *st, char *buf, size_t n)
{
    if (st->peer_family == AF_INET || st->peer_family == AF_INET6)
        inet_ntop(st->peer_family, st->peer, buf, (socklen_t)n);
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

/* The path the upstream gets for req: NULL (the target as sent) unless the
 * route strips its prefix; then the normalised path after it, encoded
 * again, in px->spath. */
static const struct http_str *upstream_path(struct proxy *px, int route,
                                            const struct http_request *req,
                                            struct http_str *out)
{
    const struct proxy_route *r = &px->cfg->routes[route];
    if (!r->strip)
        return NULL;
    int n = path_normalize(req->path.p, req->path.len, px->path, px->path_cap);
    long k = n < 0 ? -1 : proxy_strip_prefix(r, px->path, (size_t)n, px->spath, px->spath_cap);
    if (k < 0) /* cannot happen for a path that matched its route: send "/" */
        k = 1, px->spath[0] = '/';
    *out = (struct http_str){px->spath, (uint32_t)k};
    return out;
}

long upstream_start(struct proxy *px, void *client, int fd, SSL *ssl, struct step_conn *st,
                    int route, const struct http_request *req, const char *head,
                    size_t head_len, const char *body, size_t body_len, struct xfer **xp)
{
    struct xfer *x = xfer_get(px);
    *xp = x;
    if (!x)
        return -1;
    memset(x, 0, offsetof(struct xfer, ubuf));
    x->client = client;
    x->client_fd = fd;
    x->client_ssl = ssl;
    x->st = st;
    x->group = px->cfg->routes[route].group;
    x->codec = px->groups[x->group].codec;
    x->up_fd = -1;
    x->client_minor = req->minor;
    x->head_request = req->method == HTTP_HEAD;
    /* a stop is weighed when the answer's head is made (stop_closes): the
     * driver knows what input it holds only after this start */
    x->client_keepalive = http_wants_keepalive(req) &&
                          st->nreq < px->cfg->http.keepalive_requests;
    if (alog_on(px->step->alog))
        keep_loghead(x, head, head_len);
    char addr[64];
    client_addr(st, addr, sizeof addr);
    struct http_str path;
    const struct upstream_req_info info = {addr, px->groups[x->group].cfg->name,
                                           px->cfg->proxy_pass_underscores,
                                           upstream_path(px, route, req, &path),
                                           .https = ssl != NULL};
    long hl = px->cfg->routes[route].fastcgi
                  ? upstream_fcgi_head(px, x, req, x->ubuf, px->ucap - px->in_cap)
                  : x->codec->request_head(req, &info, x->ubuf, px->ucap - px->in_cap);
    long took = 0;
    x->codec->request_body_start(&x->req_body, req, px->cfg->http.max_header_size);
    if (hl == -2 || hl == -3) { /* FastCGI: no script (any more), or no length */
        x->req_done = !x->req_body.active;
        x->client_keepalive = x->client_keepalive && x->req_done;
        respond_error(px, x, hl == -2 ? 404 : 411);
        /* a whole request leaves what follows it (pipelined) unread */
        return x->req_done ? 0 : (long)body_len;
    }
    if (hl < 0) {
        x->req_done = !x->req_body.active;
        x->client_keepalive = 0;
        respond_error(px, x, 431);
        return (long)body_len;
    }
    x->ulen = (size_t)hl;
    x->may_retry = (uint8_t)proxy_may_retry(req);
    if (x->req_body.active) {
        /* the head left in_cap bytes, the most body that came with it */
        struct reframe_out o = {x->ubuf, x->ulen, px->ucap + px->uslack, NULL, 0};
        took = x->codec->request_body(&x->req_body, body, body_len, px->cfg->http.max_body_size,
                                      &o);
        if (took < 0) {
            x->client_keepalive = 0;
            respond_error(px, x, body_error_status(took));
            return (long)body_len;
        }
        x->ulen = o.len;
        x->req_done = !x->req_body.active;
        /* As nginx does: we take the body, so we say go ahead ourselves
         * (the upstream never sees the Expect header). An HTTP/1.0 client
         * does not know 100 Continue (RFC 9110 10.1.1): it just sends. */
        if (!x->req_done && x->client_minor && expects_continue(req))
            send_continue(x);
    } else {
        x->req_done = 1;
    }
    if (x->req_done) /* a next request may have come with this one */
        step_saw_next(st, body + took, body_len - (size_t)took);
    if (up_connect(px, x) < 0) {
        if (!x->busy) /* a busy server was logged as such */
            log_msg(LOG_ERROR, "upstream %s: no server reachable",
                    px->groups[x->group].cfg->name);
        respond_error(px, x, x->busy ? 503 : 502);
        if (x->busy)
            add_retry_after(x);
    }
    return took;
}

void upstream_kick(struct proxy *px, struct xfer *x)
{
    pump(px, x);
}

void upstream_client_event(struct proxy *px, struct xfer *x, uint32_t events)
{
    /* The client left (reset, or closed while its request is upstream:
     * client_left): free the upstream now, not when its answer comes. */
    if (events & (EPOLLHUP | EPOLLERR)) {
        client_gone(px, x);
        return;
    }
    if ((events & (EPOLLIN | EPOLLRDHUP)) && client_left(px, x) < 0)
        return;
    pump(px, x);
}

int upstream_client_check(struct proxy *px, struct xfer *x)
{
    /* a peek per wake-up while the client waits for the head; after it,
     * a client that left shows when a send fails */
    if (x->head_done && x->hoff == x->hlen)
        return 0;
    return client_left(px, x);
}

void upstream_abort(struct proxy *px, struct xfer *x)
{
    /* a request the upstream is still working on: say the client left (a
     * courtesy; the close that follows is the signal every server sees).
     * Only at a record boundary: all that ubuf held went out. */
    if (x->codec->abort && x->up_fd >= 0 && !x->connecting && x->ulen && x->uoff == x->ulen &&
        !x->resp_done)
        (void)!send(x->up_fd, x->codec->abort, x->codec->abort_len,
                    MSG_NOSIGNAL | MSG_DONTWAIT);
    up_release(px, x, 0);
    /* Closed by the driver with the request's body overdue and nothing
     * answered: its body timer (a client that left says 499 first; a stop
     * that cuts a body still in time logs nothing). nginx logs it 408. */
    if (!x->status && !x->req_done && !x->errored &&
        body_clock_deadline(&x->st->body, px->cfg->body_timeout_ms, px->cfg->body_min_rate) <=
            clock_now_ms())
        x->status = 408;
    if (x->status)
        account(px, x);
    xfer_put(px, x);
}

/* ---- upstream events ---- */

/* The connect of x failed or timed out: mark the server down and try the
 * next one; 502 (504 for a timeout) when none is left. */
static void connect_failed(struct proxy *px, struct xfer *x, const char *why, int timeout)
{
    mark_down(px, x, why);
    up_release(px, x, 0);
    x->tries++;
    if (up_connect(px, x) < 0)
        respond_error(px, x, timeout ? 504 : 502);
}

void upstream_event(struct proxy *px, int fd, uint32_t gen, uint32_t events)
{
    if (fd < 0 || fd >= px->max_fds)
        return;
    struct up_conn *uc = &px->ups[fd];
    /* An event for an fd closed (and maybe reused) earlier in this batch
     * carries the old generation: drop it. */
    if (!uc->open || uc->gen != gen)
        return;
    if (!uc->xfer) {
        /* A pooled connection has nothing to say: the server closed it. */
        if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
            up_idle_closed(px, uc);
        return;
    }
    upstream_ready(px, uc->xfer, events);
}

void upstream_ready(struct proxy *px, struct xfer *x, uint32_t events)
{
    int fd = x->up_fd;
    if (fd < 0) {
        pump(px, x);
        return;
    }
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
        x->up_readable = 1;
    /* A close that came with the answer's last bytes, or bytes after its
     * end: the exchange stops reading at the end, and an edge-triggered
     * set reports neither again, so the pool would not see them (its
     * idle watch waits for an edge) and hand the next request a dead
     * connection (a POST: 502) or those bytes as its answer. */
    if ((events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) || (x->resp_done && (events & EPOLLIN)))
        x->up_unread = 1;
    if (x->connecting) {
        if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
            return;
        int err = 0;
        socklen_t len = sizeof err;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
            err = errno;
        if (err) {
            connect_failed(px, x, strerror(err), 0);
        } else {
            x->connecting = 0;
            x->up_progress = 1;
        }
    }
    pump(px, x);
}

/* x's upstream timer of queue q expired. */
static void timed_out(struct proxy *px, struct xfer *x, int q)
{
    const char *gname = px->groups[x->group].cfg->name;
    if (q == QU_CONNECT) {
        connect_failed(px, x, "connect timed out", 1);
    } else {
        /* a server that stopped answering is skipped like one that cannot
         * be connected (nginx counts timeouts in max_fails too) */
        if (q == QU_READ)
            mark_down(px, x, "read timed out");
        else
            log_msg(LOG_WARN, "upstream %s: send timed out", gname);
        if (upstream_failed(px, x, 1) < 0)
            return;
    }
    pump(px, x);
}

/* ---- timers ---- */

static void timer_fired(struct proxy *px, struct up_conn *uc)
{
    int q = uc->queue;
    uc->queue = QU_NONE;
    if (uc->xfer)
        timed_out(px, uc->xfer, q);
    else
        up_idle_closed(px, uc);
}

static void expire(struct proxy *px, struct timerq *q)
{
    struct tq_node *n;
    while ((n = tq_pop_expired(q, clock_now_ms())) != NULL)
        timer_fired(px, container_of(n, struct up_conn, timer));
}

void upstream_expire(struct proxy *px)
{
    expire(px, &px->q_connect);
    expire(px, &px->q_read);
    expire(px, &px->q_send);
    up_stall_expire(px);
}

int64_t upstream_next_deadline(const struct proxy *px)
{
    int64_t next = -1;
    const struct timerq *qs[] = {&px->q_connect, &px->q_read, &px->q_send, &px->q_stall};
    for (int i = 0; i < 4; i++) {
        int64_t d = tq_next_deadline(qs[i]);
        if (d >= 0 && (next < 0 || d < next))
            next = d;
    }
    return next;
}

int upstream_fd(const struct xfer *x) { return x->up_fd; }

int upstream_connecting(const struct xfer *x) { return x->connecting; }

int64_t upstream_deadline(const struct proxy *px, const struct xfer *x)
{
    if (x->up_fd < 0)
        return -1;
    const struct up_conn *uc = &px->ups[x->up_fd];
    int64_t d = uc->queue != QU_NONE ? uc->timer.deadline_ms : -1;
    if (tq_linked(&uc->stall) && (d < 0 || uc->stall.deadline_ms < d))
        d = uc->stall.deadline_ms;
    return d;
}

void upstream_timeout(struct proxy *px, struct xfer *x)
{
    struct up_conn *uc = &px->ups[x->up_fd];
    int64_t now = clock_now_ms();
    /* this thread's stall checks that are due, x's among them (or run
     * already by another exchange's wake-up) */
    up_stall_expire(px);
    if (uc->queue == QU_NONE || uc->timer.deadline_ms > now)
        return;
    int q = uc->queue;
    up_disarm(uc);
    timed_out(px, x, q);
}

/* The coro model: one process, --threads kernel threads running one
 * coroutine per connection (src/coro). A connection's code reads like the
 * iterative model's blocking loop (wait for a request, answer it, repeat),
 * and a read or write that would block parks the coroutine in the
 * scheduler's netpoll instead of blocking the kernel thread.
 *
 * Socket layout: one shared listen socket; an acceptor coroutine per
 * listen address accepts until EAGAIN and spawns each connection on the
 * least-loaded kernel thread. Idle threads steal runnable coroutines from
 * busy ones.
 *
 * A coroutine may move between kernel threads, so everything per thread
 * (file cache, access-log buffer, scoreboard slot) is looked up afresh
 * after any wait, and a coroutine is pinned while it holds file-cache
 * references. An idle keep-alive connection holds no buffer: only its
 * stack pages and the socket. Signals stay with the main thread, as in the
 * threads model. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/signals.h"
#include "core/timerq.h"
#include "coro/sched.h"
#include "core/bufpool.h"
#include "http/pp.h"
#include "models/coro_idle.h"
#include "models/coro_proxy.h"
#include "models/coro_warm.h"
#include "models/linger.h"
#include "models/models.h"
#include "models/plan_write.h"
#include "models/sizing.h"
#include "models/upstream.h"
#include "models/step.h"
#include "net/accept.h"
#include "net/tls.h"
#include "net/tls_ctx.h"
#include "proc/accesslog.h"
#include "proc/handover.h"
#include "proc/status.h"

#define REFUSE_BATCH 1024 /* refusals in a row before the acceptor yields */
#define BUFS_KEPT 64      /* free buffers a thread keeps per pool */
/* After a read at once that found nothing, this many new connections wait
 * in the netpoll before their first read, as in the event loop
 * (READ_SKIP_AFTER_MISS in evloop.c). */
#define READ_SKIP_AFTER_MISS 15

struct cthread {
    struct http_ctx http;
    struct step_ctx step;
    struct bufpool inbufs;   /* connections' input buffers, M.in_cap each */
    struct bufpool outbufs;  /* response heads of a batch, M.out_cap each */
    struct alog alog;
    struct sb_slot *slot;
    struct proxy *proxy;     /* NULL without proxy routes */
    unsigned read_skip;      /* new connections to wait on before reading */
    struct coro_warm warm;   /* cold file windows read in (models/coro_warm.h) */
} __attribute__((aligned(64)));

struct listener {
    int fd;
    int tcp;
    int proxy;         /* connections start with a PROXY protocol header */
    int tls;           /* connections speak TLS */
    int room_fd;       /* eventfd: a place freed while at --max-connections */
    struct acceptor ac;
};


static struct {
    const struct serve_config *cfg;
    const struct worker_env *env;
    struct sched *s;
    struct cthread *ct;
    struct sb_slot *own_slots;
    int n;
    size_t in_cap, out_cap;
    uint64_t nconns, nidle;    /* atomics: the whole process's */
    uint64_t max_conns;
    struct listener ls[CONFIG_MAX_LISTEN];
    int nls;
    int handing_over;          /* stopping for a reload: idle connections move on
                                * (atomic: handing_over() reads it) */
    int64_t ho_pending;        /* atomic: handed over, not yet acknowledged */
} M;

/* A TERM after the HUP turns it off from the main thread. */
static int handing_over(void) { return __atomic_load_n(&M.handing_over, __ATOMIC_ACQUIRE); }

/* The kernel thread's state: call again after anything that may park. */
static struct cthread *here(void)
{
    return &M.ct[coro_thread_index()];
}

/* Slot 0 carries the process's connection counts (slots only sum). */
static void count(uint64_t *counter, int delta, int is_idle)
{
    uint64_t v = __atomic_add_fetch(counter, (uint64_t)(int64_t)delta, __ATOMIC_RELAXED);
    if (is_idle)
        SB_SET(M.ct[0].slot->idle, v);
    else
        SB_SET(M.ct[0].slot->active, v);
}

/* A connection closed. At --max-connections its place goes to a client
 * waiting in a backlog at once: the acceptors looked every 10 ms, which
 * held clients that make one request each to about 100 a second per
 * acceptor at the limit (review 22: 165-300 req/s against 42 K on the
 * event loop). */
static void conn_closed(void)
{
    uint64_t left = __atomic_sub_fetch(&M.nconns, 1, __ATOMIC_RELAXED);
    SB_SET(M.ct[0].slot->active, left);
    if (left + 1 < M.max_conns)
        return;
    uint64_t one = 1;
    for (int l = 0; l < M.nls; l++)
        if (M.ls[l].room_fd >= 0 && write(M.ls[l].room_fd, &one, sizeof one) < 0) {
            /* EAGAIN: the counter is full, so the acceptor wakes anyway */
        }
}

/* Waits for fd to allow `events`: 0 to retry, -1 to give up. */
static int wait_io(int fd, uint32_t events, int64_t deadline, int flags)
{
    int r = coro_wait_fd(fd, events, deadline, flags);
    return r < 0 ? -1 : 0;
}

/* After a file window: the thread's other coroutines go first, those
 * that wait for I/O too (models/plan_write.h). */
static void take_turn(void *arg)
{
    (void)arg;
    coro_yield_polling();
}

/* After a response that closes with input maybe unread: closing now would
 * send RST and could destroy the response, so read until the peer closes
 * (or the linger time ends). Our side is shut first (after an answer
 * that said close, plan_write or coro_proxy_run shut it already; not after
 * a broken body); TLS says close_notify before. */
static void linger_close(int fd, SSL *ssl)
{
    if (ssl)
        tls_close_notify(ssl);
    shutdown(fd, SHUT_WR);
    char buf[4096];
    int64_t deadline = clock_now_ms() + LINGER_TIMEOUT_MS;
    for (int i = 0; i < LINGER_READS_MAX * 16; i++) {
        ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0 && !ssl) /* read from the client all the same; over TLS, records left
                            * undecrypted, and bytes_in counts HTTP bytes */
            SB_ADD(here()->slot->bytes_in, (uint64_t)n);
        if (n > 0 || (n < 0 && errno == EINTR))
            continue;
        if (n < 0 && errno == EAGAIN && wait_io(fd, EPOLLIN, deadline, 0) == 0)
            continue;
        return;
    }
}

/* HANDED: idle on a reload, to be passed to the new generation. */
enum { CLOSE = 0, GO_ON = 1, LINGER = 2, IDLE = 3, HANDED = 4 };

/* A connection, alive across its coroutines: between requests it has no
 * coroutine (and no stack) at all, only this and a wait in the netpoll. */
/* 144 bytes per connection (80 of them the request step's state); the
 * buffers come from the thread's pools only while a request is in progress. */
struct conn_state {
    int fd;
    uint32_t len;
    uint8_t idle;      /* counted in M.nidle */
    uint8_t drain;     /* a reload could not hand it over: answer with close */
    uint8_t read_first; /* a proxy exchange ended, or an answer waited to be
                         * sent: its waits may have taken the socket's edge,
                         * TLS may hold decrypted bytes, and what is there
                         * came before the answer ended (pipelined) */
    char *in;          /* only while a request is in progress (thread pools) */
    SSL *ssl;          /* TLS listener: the transport (net/tls.h), else NULL */
    struct coro_idle_link idle_link; /* in the idle list while idle */
    int64_t wait_deadline; /* the end of its wait for a request (header or keep-alive
                            * timeout), once set: kept across a reload's move */
    struct step_conn sc; /* the request step's state */
};

/* Room in the send buffer, through the netpoll: the send timeout counts
 * from the last progress. */
static int wait_writable(void *arg, int fd)
{
    struct conn_state *st = arg;
    /* what the client sends meanwhile came before this answer ended: read
     * it before waiting, and it counts as pipelined (serve) */
    st->read_first = 1;
    return wait_io(fd, EPOLLOUT, clock_now_ms() + M.cfg->send_timeout_ms, 0) < 0 ? -1 : 0;
}

static void set_idle(struct conn_state *st, int idle)
{
    if (st->idle != idle) {
        st->idle = idle;
        count(&M.nidle, idle ? 1 : -1, 1);
        if (idle)
            coro_idle_add(&st->idle_link, st->fd);
        else
            coro_idle_remove(&st->idle_link);
    }
}

/* recv, or the TLS transport: bytes, 0 at the end, or -errno. */
static ssize_t conn_recv(struct conn_state *st, void *buf, size_t n)
{
    if (st->ssl)
        return tls_read(st->ssl, buf, n);
    ssize_t r = recv(st->fd, buf, n, MSG_DONTWAIT);
    return r < 0 ? -errno : r;
}

/* What to wait for before reading again: TLS may need to write first. */
static uint32_t tls_wants(const struct conn_state *st)
{
    return st->ssl && SSL_want_write(st->ssl) ? EPOLLOUT : EPOLLIN;
}

/* A PROXY header before the TLS handshake (see step_take_pp): peeked
 * until whole, then consumed exactly. 0 taken, -1 to close. */
static int take_raw_pp(struct conn_state *st, int64_t deadline)
{
    char buf[PP_V2_MAX];
    for (;;) {
        ssize_t n = recv(st->fd, buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (wait_io(st->fd, EPOLLIN, deadline, 0) < 0)
                return -1;
            continue;
        }
        long k = n > 0 ? step_take_pp(&here()->step, &st->sc, buf, (size_t)n) : -1;
        if (k < 0)
            return -1;
        if (k > 0)
            return recv(st->fd, buf, (size_t)k, MSG_DONTWAIT) == k ? 0 : -1;
        if (wait_io(st->fd, EPOLLIN, deadline, 0) < 0)
            return -1;
    }
}

/* The end of c's wait for a request (its first: the header timeout; else
 * keep-alive), set now if it is not yet: a connection that moved at a
 * reload keeps the deadline it had (adopt), or reloads more often than
 * the timeout would keep it open for good. */
static int64_t request_wait_deadline(struct conn_state *st, int64_t timeout_ms)
{
    if (!st->wait_deadline)
        st->wait_deadline = clock_now_ms() + timeout_ms;
    return st->wait_deadline;
}

static int64_t request_timeout_ms(const struct conn_state *st)
{
    return st->sc.nreq ? M.cfg->keepalive_timeout_ms : M.cfg->header_timeout_ms;
}

/* How long st has waited for its request, for the handover message. */
static uint32_t request_waited_ms(const struct conn_state *st)
{
    return st->wait_deadline ? tq_waited_of(request_timeout_ms(st), st->wait_deadline,
                                            clock_now_ms())
                             : 0;
}

/* The TLS handshake, within the header timeout: 0 done, -1 failed.
 * *deadline is set to that timeout's end, which the first request head
 * shares (it runs from accept). */
static int handshake(struct conn_state *st, int64_t *deadline_out)
{
    int64_t deadline = request_wait_deadline(st, M.cfg->header_timeout_ms);
    *deadline_out = deadline;
    if (st->sc.await_pp && take_raw_pp(st, deadline) < 0)
        return -1;
    enum tls_fail why;
    int rc;
    while ((rc = tls_handshake(st->ssl, &why)) == -EAGAIN) {
        /* Nothing read yet: on a reload it moves, as a plain one with no
         * byte yet does, and the next generation handshakes afresh. */
        int movable = !st->drain && tls_untouched(st->ssl) &&
                      (!coro_stopping() || handing_over());
        int w = coro_wait_fd(st->fd, tls_wants(st), deadline, movable ? CORO_INTERRUPTIBLE : 0);
        if (w == -ECANCELED && movable) {
            if (handing_over())
                return 1;
            continue; /* a plain stop: it waits on for its handshake */
        }
        if (w < 0) {
            SB_ADD(here()->slot->tls_failed[TLS_FAIL_TIMEOUT], 1);
            return -1;
        }
    }
    if (rc < 0) {
        SB_ADD(here()->slot->tls_failed[why], 1);
        if (why == TLS_FAIL_PLAIN_HTTP)
            tls_refuse_plain_http(st->fd);
        return -1;
    }
    SB_ADD(here()->slot->tls_handshakes, 1);
    if (SSL_session_reused(st->ssl))
        SB_ADD(here()->slot->tls_resumed, 1);
    return 0;
}

/* Before a file window: one not in the page cache is read in first, and
 * the coroutine waits for it as it waits for room, its send timeout
 * running (models/coro_warm.h). */
static int warm_window(void *arg, struct fc_entry *f, off_t off, off_t stop, unsigned char *cold)
{
    const struct conn_state *st = arg;
    struct cthread *t = here();
    return coro_warm_window(&t->warm, t->slot, st->fd, f, off, stop, cold,
                            clock_now_ms() + M.cfg->send_timeout_ms);
}

/* Answers every complete request in st->in through the request step:
 * GO_ON (read more), CLOSE, or LINGER (close after draining the peer). */
static int answer_buffered(struct conn_state *st, int64_t *head_deadline)
{
    size_t pos = 0;
    int ret = GO_ON;
    /* Pinned while the heads buffer is out of this thread's pool and from
     * a file-cache lookup to its release: both belong to this thread. */
    coro_pin(1);
    struct cthread *t = here();
    char *outbuf = NULL;
    const struct plan_waits waits = {.room = wait_writable, .turn = take_turn,
                                      .warm = warm_window, .arg = st};
    while (pos < st->len && ret == GO_ON) {
        /* While handing over on a reload, answers keep the connection alive
         * (it moves on once idle), unless it cannot move. Asked per request:
         * a stop may begin during a proxy exchange, and the request held
         * behind it is then answered with close. */
        t->step.stopping = (uint8_t)(coro_stopping() && (!handing_over() || st->drain));
        if (!outbuf && !(outbuf = bufpool_get(&t->outbufs))) {
            ret = CLOSE;
            break;
        }
        struct http_out out = {outbuf, 0, M.out_cap};
        struct http_request req;
        struct step_result r;
        int in_body = step_in_body(&st->sc);
        enum step_action a = step_next(&t->step, &st->sc, st->in + pos, st->len - pos, &req,
                                       &out, &r);
        pos += r.used;
        if (in_body && !step_in_body(&st->sc)) /* the next head's time starts now */
            *head_deadline = clock_now_ms() + M.cfg->header_timeout_ms;
        if (a == STEP_MORE)
            break;
        if (a == STEP_UPSTREAM) {
            size_t left;
            enum coro_proxy_end e = coro_proxy_run(t->proxy, st->fd, st->ssl, &st->sc, r.route,
                                                   &req, st->in, pos, r.head_len, st->len,
                                                   &left);
            ret = e == CP_KEEP ? GO_ON : e == CP_LINGER ? LINGER : CLOSE;
            st->read_first = 1;
            pos = 0;
            st->len = (uint32_t)left;
            *head_deadline = clock_now_ms() + M.cfg->header_timeout_ms;
            continue;
        }
        if (a != STEP_ANSWER) {
            /* a broken body drains first (the step set linger); a bad
             * PROXY header closes at once */
            ret = st->sc.linger ? LINGER : CLOSE;
            break;
        }
        uint64_t sent = 0;
        if (!st->ssl)
            plan_inline_body(&out, &r.plan); /* one buffer: a send (plan_write.h) */
        int rc = plan_write(st->fd, st->ssl, &out, &r.plan, &waits, &sent);
        SB_ADD(t->slot->bytes_out, sent);
        if (r.plan.file)
            fc_release(r.plan.file);
        *head_deadline = clock_now_ms() + M.cfg->header_timeout_ms;
        if (r.body_started) /* its clock starts once its head is answered */
            body_clock_start(&st->sc.body, clock_now_ms());
        if (rc < 0)
            ret = CLOSE;
        else if (r.plan.close)
            /* after a wait (read_first) or a file's body, input may have
             * come meanwhile: looked for, as models/linger.h says */
            ret = r.plan.linger || ((st->read_first || r.plan.file) &&
                                    linger_input_waiting(st->fd))
                      ? LINGER
                      : CLOSE;
    }
    if (outbuf)
        bufpool_put(&t->outbufs, outbuf);
    coro_pin(0);
    memmove(st->in, st->in + pos, st->len - pos);
    st->len -= pos;
    return ret;
}

/* Serves requests until the connection is to close, or is idle between
 * requests (IDLE: the caller parks it without a stack). It reads before it
 * waits: a resumed connection's edge is consumed, a TLS handshake's last
 * record may have carried the request, and a fresh (plain) connection's
 * request may have come right behind the handshake, and then one answered
 * with close never enters the netpoll (no epoll_ctl at all). A fresh one
 * waits first for a while after such a read found nothing. */
static int serve(struct conn_state *st, int fresh, int64_t head_deadline)
{
    const struct serve_config *cfg = M.cfg;
    int fd = st->fd;
    if (!head_deadline)
        head_deadline = st->sc.nreq ? clock_now_ms() + cfg->header_timeout_ms
                                    : request_wait_deadline(st, cfg->header_timeout_ms);
    int drained = 0, probe = 0;
    if (fresh) {
        struct cthread *t = here();
        drained = t->read_skip > 0;
        if (drained)
            t->read_skip--;
        probe = !drained;
    }
    for (;;) {
        int after_answer = 0;
        if (st->len) {
            int r = answer_buffered(st, &head_deadline);
            if (r != GO_ON)
                return r;
            if (st->read_first) { /* no edge will say so: read before waiting */
                drained = st->read_first = 0;
                after_answer = 1;
            }
        }
        int between = !st->len && !step_in_body(&st->sc) && st->sc.nreq > 0;
        if (!st->len && st->in) {
            /* Idle connections own no buffers. */
            bufpool_put(&here()->inbufs, st->in);
            st->in = NULL;
        }
        if (between && drained)
            return !coro_stopping() || st->drain ? IDLE : handing_over() ? HANDED : CLOSE;
        /* Inside a request the header timeout bounds the wait: the first
         * head is due a header timeout after accept, and bytes trickling in
         * do not extend it; a body runs on its own clock. Edge-triggered
         * netpoll: wait only once a read came back short (the socket is
         * drained); after a full one, read on. */
        int64_t deadline = step_in_body(&st->sc)
                               ? body_clock_deadline(&st->sc.body, cfg->body_timeout_ms,
                                                     cfg->body_min_rate)
                               : head_deadline;
        /* A fresh connection with no byte yet moves on a reload as an idle
         * one does: kept, it held this worker to its shutdown timeout,
         * which then closed it under a request still due. */
        int movable = !st->len && !st->sc.nreq && !st->ssl && !st->drain &&
                      !st->sc.await_pp && (!coro_stopping() || handing_over());
        if (drained) {
            int w = coro_wait_fd(fd, tls_wants(st), deadline,
                                 movable ? CORO_INTERRUPTIBLE : 0);
            if (w == -ECANCELED && movable) {
                if (handing_over())
                    return HANDED;
                continue; /* a plain stop: it waits on for its request */
            }
            if (w < 0)
                return CLOSE;
        }
        if (!st->in && !(st->in = bufpool_get(&here()->inbufs)))
            return CLOSE;
        for (;;) {
            ssize_t n = conn_recv(st, st->in + st->len, M.in_cap - st->len);
            if (n == -EINTR)
                continue;
            if (probe) {
                here()->read_skip = n == -EAGAIN ? READ_SKIP_AFTER_MISS : 0;
                probe = 0;
            }
            if (n == -EAGAIN) {
                drained = 1; /* a wakeup for another event: wait again */
                break;
            }
            if (n <= 0)
                return CLOSE;
            if (after_answer)
                step_saw_next(&st->sc, st->in + st->len, (size_t)n);
            /* TLS gives a record at a time: only -EAGAIN says drained.
             * After an answer, the exchange's or the write's waits may have
             * taken the edge of an EOF behind these bytes: read on. */
            drained = !st->ssl && !after_answer && (size_t)n < M.in_cap - st->len;
            if (between)
                head_deadline = clock_now_ms() + cfg->header_timeout_ms;
            st->wait_deadline = 0; /* a request began: its wait is over */
            st->len += (size_t)n;
            SB_ADD(here()->slot->bytes_in, (uint64_t)n);
            break;
        }
    }
}

/* Passes an idle connection to the master for the new generation (issue
 * 13, proc/handover.h): 1 when it went (its fd and state are gone here),
 * 0 when it must stay and drain. */
static int hand_over(struct conn_state *st)
{
    int ch = M.env->handover_fd;
    /* TLS state lives in this process's OpenSSL only: such a connection
     * stays and drains (its next request is answered with close), unless
     * OpenSSL has read nothing of it yet. */
    int tls_fresh = st->ssl && !st->sc.nreq && tls_untouched(st->ssl);
    if (st->ssl && !tls_fresh)
        st->drain = 1;
    if (ch < 0 || st->len || st->drain)
        return 0;
    int domain = AF_INET;
    socklen_t dlen = sizeof domain;
    getsockopt(st->fd, SOL_SOCKET, SO_DOMAIN, &domain, &dlen);
    struct handover_msg h = {.kind = HO_CONN,
                             .tcp = domain != AF_UNIX,
                             .state_len = sizeof st->sc | (tls_fresh ? HO_TLS_FRESH : 0),
                             .count = request_waited_ms(st)};
    memcpy(h.state, &st->sc, sizeof st->sc);
    __atomic_add_fetch(&M.ho_pending, 1, __ATOMIC_ACQ_REL);
    coro_fd_forget(st->fd); /* out of our netpoll before it moves */
    if (handover_send(ch, &h, NULL, st->fd) < 0) {
        __atomic_sub_fetch(&M.ho_pending, 1, __ATOMIC_ACQ_REL);
        st->drain = 1;
        return 0;
    }
    if (st->in)
        bufpool_put(&here()->inbufs, st->in);
    if (st->ssl)
        tls_free(st->ssl); /* it sent nothing: it frees silently */
    close(st->fd);
    coro_idle_closed(&st->idle_link);
    free(st);
    conn_closed();
    return 1;
}

/* A connection's coroutine: the first after accept, and a new one each
 * time an idle connection turns readable (or its keep-alive time ends, or
 * a graceful stop cancels the wait). */
static void *conn_main(void *arg)
{
    struct conn_state *st = arg;
    /* idle: parked without a stack, as a fresh one that could not move on
     * a reload is too; its wakeup took the edge, so it reads first */
    int resumed = st->sc.nreq > 0 || st->idle;
    int r = GO_ON;
    if (resumed) {
        set_idle(st, 0);
        /* A stop that ends the wait of one already left to drain (a TERM
         * after the HUP, or the shutdown timeout) closes it: handed again,
         * it would wait once more and keep the worker alive for good. */
        if (coro_start_result() == -ECANCELED && handing_over() && !st->drain)
            r = HANDED;
        else if (coro_start_result() < 0)
            r = CLOSE;
    }
    /* after a handshake, the first head has what is left of its time */
    int64_t head_deadline = 0;
    /* (resumed too: one whose move failed waited as an idle one, and is
     * woken by its ClientHello) */
    if (r == GO_ON && st->ssl && !SSL_is_init_finished(st->ssl)) {
        int h = handshake(st, &head_deadline);
        r = h < 0 ? CLOSE : h > 0 ? HANDED : GO_ON;
    }
    if (r == GO_ON)
        r = serve(st, !resumed && !st->ssl, head_deadline);
    if (r == HANDED && hand_over(st))
        return NULL;
    if (r == HANDED)
        r = IDLE; /* it stays: its next request is answered with close */
    if (r == IDLE) {
        set_idle(st, 1);
        int64_t deadline = request_wait_deadline(st, M.cfg->keepalive_timeout_ms);
        /* one that could not move waits on through a reload's stop
         * (within the shutdown timeout): its request may be on the wire;
         * a TERM after the HUP closes it (CORO_DRAINING) */
        if (coro_spawn_on_ready(st->fd, EPOLLIN, deadline,
                                st->drain ? CORO_DRAINING : CORO_INTERRUPTIBLE,
                                conn_main, st))
            return NULL;
        set_idle(st, 0);
        r = CLOSE;
    }
    if (r == LINGER)
        linger_close(st->fd, st->ssl);
    if (st->in)
        bufpool_put(&here()->inbufs, st->in);
    if (st->ssl)
        tls_free(st->ssl);
    coro_fd_forget(st->fd);
    close(st->fd);
    coro_idle_closed(&st->idle_link);
    free(st);
    conn_closed();
    return NULL;
}

/* A connection from the handover channel: served from here on as if just
 * accepted, with its request-step state and unparsed bytes. */
static void adopt(const struct handover_msg *h, const char *in, int fd)
{
    struct conn_state *c = calloc(1, sizeof *c);
    if (!c || (h->state_len & ~HO_TLS_FRESH) != sizeof c->sc || h->in_len > M.in_cap ||
        (h->in_len && !(c->in = bufpool_get(&here()->inbufs)))) {
        log_msg(LOG_ERROR, "handover: cannot take a connection (%s): closing it",
                c ? "from another build, or out of memory" : "out of memory");
        free(c);
        close(fd);
        return;
    }
    if (h->state_len & HO_TLS_FRESH) {
        void *ctx = M.env->tls ? tls_server_ctx(M.env->tls) : NULL;
        if (!ctx || !(c->ssl = tls_open(ctx, fd))) {
            log_msg(LOG_ERROR, "handover: a TLS connection, and %s: closing it",
                    ctx ? "out of memory" : "this generation serves no TLS");
            if (c->in)
                bufpool_put(&here()->inbufs, c->in);
            free(c);
            close(fd);
            return;
        }
    }
    c->fd = fd;
    memcpy(&c->sc, h->state, sizeof c->sc);
    if (h->count)
        c->wait_deadline = tq_deadline_after(request_timeout_ms(c), h->count, clock_now_ms());
    if (h->in_len)
        memcpy(c->in, in, h->in_len);
    c->len = h->in_len;
    /* bounced back, or came while we stop ourselves: it stays and drains */
    c->drain = h->kind == HO_BOUNCE || coro_stopping();
    count(&M.nconns, 1, 0);
    if (!coro_spawn(M.s, -1, 0, conn_main, c)) {
        log_msg(LOG_ERROR, "no stack for a handed-over connection: closing it");
        count(&M.nconns, -1, 0);
        if (c->in)
            bufpool_put(&here()->inbufs, c->in);
        if (c->ssl)
            tls_free(c->ssl);
        close(fd);
        free(c);
    }
}

/* Takes what the master sends on the handover channel: connections to
 * adopt, ones bounced back, acknowledgements. It outlives a stop until
 * what we handed over is acknowledged or bounced, and on a reload until
 * no connection is left that could still be handed over. */
static void *handover_main(void *arg)
{
    (void)arg;
    int ch = M.env->handover_fd;
    static char in[HANDOVER_IN_MAX];
    for (;;) {
        struct handover_msg h;
        int fd;
        int rc = handover_next(ch, &h, in, sizeof in, &fd);
        if (rc == -EAGAIN) {
            /* On a reload a busy connection is handed over when it goes
             * idle, maybe long after the stop, and may come back bounced
             * (the master is upgrading again): read until none is left. */
            if (coro_stopping() && __atomic_load_n(&M.ho_pending, __ATOMIC_ACQUIRE) <= 0 &&
                (!handing_over() || __atomic_load_n(&M.nconns, __ATOMIC_ACQUIRE) == 0))
                break;
            /* stopped: poll for the acknowledgements, not interruptibly */
            int64_t deadline = coro_stopping() ? clock_now_ms() + 20 : -1;
            int flags = coro_stopping() ? 0 : CORO_INTERRUPTIBLE;
            rc = coro_wait_fd(ch, EPOLLIN, deadline, flags);
            /* a cancelled uninterruptible wait: the stop is at once now */
            if (rc < 0 && rc != -ETIMEDOUT && (rc != -ECANCELED || !flags))
                break;
            continue;
        }
        if (rc == 0)
            break; /* the master has gone */
        if (h.kind == HO_ACK || h.kind == HO_BOUNCE)
            __atomic_sub_fetch(&M.ho_pending, h.kind == HO_ACK ? (int64_t)h.count : 1,
                               __ATOMIC_ACQ_REL);
        if (h.kind != HO_ACK)
            adopt(&h, in, fd);
    }
    coro_fd_forget(ch);
    return NULL;
}

/* Runs an accepted connection in a coroutine of its own. */
static void start_conn(struct listener *l, int fd, const struct sockaddr_storage *peer)
{
    struct conn_state *c = calloc(1, sizeof *c);
    if (!c) {
        log_msg(LOG_ERROR, "out of memory for a new connection: closing it");
        close(fd);
        return;
    }
    if (l->tls && !(c->ssl = tls_open(tls_server_ctx(M.env->tls), fd))) {
        close(fd);
        free(c);
        return;
    }
    c->fd = fd;
    step_conn_init(&c->sc, &here()->step, l->tcp ? peer : NULL, !l->tcp, l->proxy);
    SB_ADD(here()->slot->accepted, 1);
    count(&M.nconns, 1, 0);
    if (!coro_spawn(M.s, -1, 0, conn_main, c)) {
        log_msg(LOG_ERROR, "no stack for a new connection: closing it");
        count(&M.nconns, -1, 0);
        if (c->ssl)
            tls_free(c->ssl);
        close(fd);
        free(c);
    }
}

/* Stopping: what is queued on the socket now was meant for us, and the
 * last close of a listen socket (a reload that removed its address)
 * resets it; take it, and it is answered like the fresh connections. */
static void take_backlog(struct listener *l)
{
    struct sockaddr_storage peer;
    int fd;
    while (__atomic_load_n(&M.nconns, __ATOMIC_RELAXED) < M.max_conns &&
           (fd = net_accept(&l->ac, l->fd, &peer)) >= 0)
        start_conn(l, fd, &peer);
}

/* At --max-connections: waits wait_ms, or less when a connection closes
 * (conn_closed); -1 when the server stops. */
static int wait_for_room(struct listener *l, int wait_ms)
{
    if (l->room_fd < 0) /* no eventfd: it looks every wait_ms */
        return coro_sleep(wait_ms) < 0 ? -1 : 0;
    int rc = coro_wait_fd(l->room_fd, EPOLLIN, clock_now_ms() + wait_ms, CORO_INTERRUPTIBLE);
    uint64_t n;
    if (read(l->room_fd, &n, sizeof n) < 0) {
        /* EAGAIN: the deadline came first */
    }
    return rc == -ECANCELED ? -1 : 0;
}

static void *acceptor_main(void *arg)
{
    struct listener *l = arg;
    time_t last_log = 0;
    unsigned refused = 0;
    while (!coro_stopping()) {
        if (__atomic_load_n(&M.nconns, __ATOMIC_RELAXED) >= M.max_conns) {
            /* A client waiting takes an idle connection's place; one
             * shut down already is on its way out (soon: its own thread
             * reads the end and closes it). The rest wait in the backlog
             * until some close. */
            int wait_ms = 10;
            if (coro_idle_shutting()) {
                wait_ms = 1;
            } else if (net_backlog_waiting(l->fd)) {
                if (coro_idle_make_room()) {
                    wait_ms = 1;
                } else if (clock_wall() != last_log) {
                    last_log = clock_wall();
                    log_msg(LOG_WARN, "%lu connections: at --max-connections, not accepting",
                            (unsigned long)M.nconns);
                }
            }
            if (wait_for_room(l, wait_ms) < 0)
                break;
            continue;
        }
        struct sockaddr_storage peer;
        int fd = net_accept(&l->ac, l->fd, &peer);
        if (fd >= 0) {
            start_conn(l, fd, &peer);
            continue;
        }
        if (fd == -EAGAIN) {
            if (coro_wait_fd(l->fd, EPOLLIN, -1, CORO_INTERRUPTIBLE) == -ECANCELED)
                break;
            continue;
        }
        if (fd == -ECONNREFUSED || fd == -EMFILE) {
            if (clock_wall() != last_log) {
                last_log = clock_wall();
                log_msg(LOG_CRIT, "out of file descriptors: refusing connections (%ld so far)%s",
                        l->ac.refused, fd == -EMFILE ? "; not accepting for now" : "");
            }
            /* No spare fd: stop for a while, as the event loop does; never
             * spin here while the connections that would free fds wait. A
             * flood of refusals yields now and then for the same reason. */
            if (fd == -EMFILE) {
                if (coro_sleep(NET_ACCEPT_BACKOFF_MS) < 0)
                    break;
            } else if (++refused % REFUSE_BATCH == 0) {
                coro_yield();
            }
            continue;
        }
        log_msg(LOG_ERROR, "accept: %s", strerror(-fd));
        coro_sleep(10);
    }
    /* Stopping: no new connections (a closed socket refuses them). */
    coro_fd_forget(l->fd);
    take_backlog(l);
    close(l->fd);
    l->fd = -1;
    return NULL;
}

static void thread_idle(int index, void *arg)
{
    (void)arg;
    alog_flush(&M.ct[index].alog);
    /* Pooled upstream connections are in this thread's epoll, but no
     * coroutine waits on them: a close by the server woke the thread. */
    if (M.ct[index].proxy)
        upstream_sweep_idle(M.ct[index].proxy, coro_fd_take_unwaited);
}

static int route_of(void *px, const struct http_request *req)
{
    return upstream_route(px, req);
}

static int setup(const struct serve_config *cfg, const struct worker_env *env)
{
    M.cfg = cfg;
    M.env = env;
    M.n = env->nthreads > 0 ? env->nthreads : 1;
    M.in_cap = sizing_in_cap(cfg);
    M.out_cap = sizing_out_cap(cfg);
    int fds = sizing_fd_limit();
    /* one count for the whole process: coroutines move between threads */
    M.max_conns = sizing_max_conns(cfg, fds, 1, 0);
    M.ct = aligned_alloc(64, (size_t)M.n * sizeof *M.ct);
    M.own_slots = calloc((size_t)M.n, sizeof *M.own_slots);
    if (!M.ct || !M.own_slots)
        return -1;
    memset(M.ct, 0, (size_t)M.n * sizeof *M.ct);
    /* A file cache per thread, all in the one fd table. */
    struct filecache_limits lim = sizing_file_cache(fds, M.n);
    for (int i = 0; i < M.n; i++) {
        struct cthread *t = &M.ct[i];
        t->slot = env->slot ? env->slot + i : &M.own_slots[i];
        alog_init(&t->alog, env->log_fd, cfg->access_log_format, t->slot);
        t->http.cfg = &cfg->http;
        t->http.status = status_page;
        t->http.status_arg = (void *)env->sb;
        t->http.routes = cfg->routes;
        t->http.nroutes = cfg->nroutes;
        t->http.fc = fc_create(cfg->docroot, &lim);
        if (!t->http.fc) {
            log_msg(LOG_CRIT, "cannot open docroot %s: %s", cfg->docroot, strerror(errno));
            return -1;
        }
        t->step = (struct step_ctx){.cfg = cfg, .http = &t->http, .slot = t->slot,
                                    .alog = &t->alog};
        /* An exchange runs pinned to its thread, on this thread's pool. */
        int max_fds = fds > 1 << 20 ? 1 << 20 : (int)fds;
        t->proxy = coro_proxy_create(cfg, &t->step, &t->step.stopping, M.in_cap, max_fds,
                                     env->sb, M.n, i);
        if (cfg->nroutes && !t->proxy)
            return -1;
        if (t->proxy) {
            t->step.route = route_of;
            t->step.route_arg = t->proxy;
        }
        /* Buffers move between threads' pools with their coroutines; each
         * pool is only touched by its own thread. */
        bufpool_init(&t->inbufs, M.in_cap, BUFS_KEPT);
        bufpool_init(&t->outbufs, M.out_cap, BUFS_KEPT);
    }
    struct sched_opts o = {.nthreads = M.n, .stack_size = cfg->coro_stack,
                           .thread_idle = thread_idle};
    M.s = sched_create(&o);
    if (!M.s)
        return -1;
    for (int i = 0; i < M.n; i++)
        coro_warm_setup(&M.ct[i].warm, M.s, i);
    for (int l = 0; env->listen_fds && l < cfg->nlisten; l++) {
        struct listener *ls = &M.ls[M.nls++];
        ls->fd = env->listen_fds[l * env->nthreads];
        ls->tcp = cfg->listen[l].family != AF_UNIX;
        ls->proxy = cfg->listen_proxy[l];
        ls->tls = cfg->listen_tls[l];
        ls->room_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); /* -1: it polls, as before */
        acceptor_init(&ls->ac);
        if (!coro_spawn(M.s, l % M.n, 0, acceptor_main, ls))
            return -1;
    }
    if (env->handover_fd >= 0 && !coro_spawn(M.s, 0, 0, handover_main, NULL))
        return -1;
    return 0;
}

static void teardown(void)
{
    sched_destroy(M.s);
    for (int i = 0; M.ct && i < M.n; i++) {
        alog_close(&M.ct[i].alog);
        if (M.ct[i].http.fc)
            fc_destroy(M.ct[i].http.fc);
        bufpool_destroy(&M.ct[i].inbufs);
        bufpool_destroy(&M.ct[i].outbufs);
        coro_proxy_destroy(M.ct[i].proxy);
        coro_warm_close(&M.ct[i].warm);
    }
    for (int l = 0; l < M.nls; l++) {
        acceptor_close(&M.ls[l].ac);
        if (M.ls[l].room_fd >= 0)
            close(M.ls[l].room_fd);
    }
    free(M.ct);
    free(M.own_slots);
}

int coro_model_run(const struct serve_config *cfg, const struct worker_env *env)
{
    clock_update();
    if (setup(cfg, env) < 0 || sched_start(M.s) < 0) {
        log_msg(LOG_CRIT, "coro: cannot start");
        if (M.s)
            sched_stop(M.s, 3);
        teardown();
        return 1;
    }
    for (int i = 0; i < M.n; i++)
        SB_SET(M.ct[i].slot->ready, 1); /* a binary upgrade waits for every worker's */
    int64_t deadline = -1;
    for (;;) {
        struct pollfd p[2] = {{.fd = env->signal_fd, .events = POLLIN},
                              {.fd = sched_done_fd(M.s), .events = POLLIN}};
        int n = poll(p, 2, deadline < 0 ? -1 : 100);
        if (n < 0 && errno != EINTR)
            break;
        clock_update();
        if (p[1].revents)
            break;
        int sig;
        while ((sig = signals_read(env->signal_fd)) > 0) {
            if (sig == SIGQUIT) {
                log_msg(LOG_NOTICE, "SIGQUIT: exiting at once");
                sched_stop(M.s, 3);
            } else if (sig == SIGHUP && env->handover_fd < 0) {
                log_msg(LOG_NOTICE, "signal %d ignored (no master process in this mode)", sig);
            } else if ((sig == SIGTERM || sig == SIGINT || sig == SIGHUP) && deadline < 0) {
                /* HUP: a reload; idle connections move to the new generation */
                __atomic_store_n(&M.handing_over, sig == SIGHUP, __ATOMIC_RELEASE);
                deadline = clock_now_ms() + cfg->shutdown_timeout_ms;
                sched_stop(M.s, 1);
            } else if ((sig == SIGTERM || sig == SIGINT) && handing_over()) {
                /* TERM after a HUP: the server stops, nothing is handed
                 * over now, and the idle connections left behind close */
                __atomic_store_n(&M.handing_over, 0, __ATOMIC_RELEASE);
                sched_stop(M.s, 2);
            }
        }
        if (deadline >= 0 && clock_now_ms() >= deadline) {
            log_msg(LOG_WARN, "shutdown timeout: closing %lu connections",
                    (unsigned long)__atomic_load_n(&M.nconns, __ATOMIC_RELAXED));
            sched_stop(M.s, 3);
            deadline = INT64_MAX;
        }
    }
    teardown();
    return 0;
}

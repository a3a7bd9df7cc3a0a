/* The event loop's side of a hitless reload (issue 13, proc/handover.h):
 * a draining worker passes idle connections to the master, which passes
 * them to the new generation, and a new worker adopts them as if just
 * accepted, with their request-step state. A connection that cannot move
 * stays and drains: its next request is answered with Connection: close;
 * nothing is closed while a request may be on its way to us. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "models/evloop_internal.h"
#include "net/tls.h"
#include "proc/handover.h"

#define RETRY_MS 20 /* a full channel: try the refused connections again */

_Static_assert(sizeof(struct step_conn) <= HANDOVER_STATE_MAX, "step_conn outgrew a handover");

/* Connections sent and not yet acknowledged (or bounced back), for the
 * whole process: the threads model's loops share one channel. */
static int64_t pending;

int conn_handover_settled(void)
{
    return __atomic_load_n(&pending, __ATOMIC_ACQUIRE) <= 0;
}

/* A TLS connection whose OpenSSL has read nothing: the next process
 * handshakes afresh (with the certificate a reload loaded). */
static int tls_fresh(const struct conn *c)
{
    return c->ssl && c->handshaking && tls_untouched(c->ssl);
}

int conn_hand_over(struct evloop *ev, struct conn *c)
{
    /* A TLS connection's state lives in this process's OpenSSL only: it
     * stays and drains (its next request is answered with close), unless
     * OpenSSL has read nothing of it yet. */
    if (ev->ho_fd < 0 || (c->ssl && !tls_fresh(c)) || c->out || c->xfer || c->lingering ||
        c->st.closing || c->drain == DRAIN_KEEP || step_in_body(&c->st) ||
        c->in_len > HANDOVER_IN_MAX)
        return -1;
    struct handover_msg h = {.kind = HO_CONN, .tcp = c->tcp,
                             .state_len = sizeof c->st | (c->ssl ? HO_TLS_FRESH : 0),
                             .in_len = c->in_len, .count = conn_waited_ms(ev, c)};
    memcpy(h.state, &c->st, sizeof c->st);
    int fd = conn_fd(ev, c);
    __atomic_add_fetch(&pending, 1, __ATOMIC_ACQ_REL);
    if (handover_send(ev->ho_fd, &h, c->in, fd) < 0) {
        __atomic_sub_fetch(&pending, 1, __ATOMIC_ACQ_REL);
        return -1;
    }
    /* The socket lives on in flight: only our epoll interest and fd go.
     * (A closed fd whose file lives on would stay in our epoll set.) */
    loop_del(&ev->loop, fd);
    conn_close(ev, c);
    return 0;
}

/* A connection from the channel: served from here on as if we had
 * accepted it, with its state and unparsed bytes. */
static void adopt(struct evloop *ev, const struct handover_msg *h, const char *in, int fd)
{
    int tls = (h->state_len & HO_TLS_FRESH) != 0;
    size_t state_len = h->state_len & ~HO_TLS_FRESH;
    if (tls && !ev->tls_ctx) {
        log_msg(LOG_ERROR, "handover: a TLS connection, and this generation serves no TLS: "
                "closing it");
        close(fd);
        return;
    }
    if (state_len != sizeof(struct step_conn) || h->in_len > ev->in_cap ||
        conn_open(ev, fd, h->tcp, 0, tls, NULL) < 0) {
        if (state_len != sizeof(struct step_conn) || h->in_len > ev->in_cap) {
            log_msg(LOG_ERROR, "handover: a connection from another build or with a "
                    "larger head than ours: closing it");
            close(fd);
        }
        return;
    }
    struct conn *c = &ev->conns[fd];
    memcpy(&c->st, h->state, sizeof c->st);
    c->drain = h->kind == HO_BOUNCE ? DRAIN_KEEP : DRAIN_NO;
    if (ev->stopping && !c->drain)
        c->drain = ev->handing_over ? DRAIN_RETRY : DRAIN_KEEP;
    if (h->in_len) {
        c->in = bufpool_get(&ev->inbufs);
        if (!c->in) {
            conn_close(ev, c);
            return;
        }
        memcpy(c->in, in, h->in_len);
        c->in_len = h->in_len;
        conn_proxy_resume(ev, c); /* answers what is complete, arms its timer */
        return;
    }
    conn_set_timer_waited(ev, c, c->st.nreq ? Q_KEEPALIVE : Q_HEADER, h->count);
}

void conn_handover_receive(struct evloop *ev)
{
    for (;;) {
        struct handover_msg h;
        int fd;
        /* the shared read buffer holds the bytes until adopt copies them */
        int rc = handover_next(ev->ho_fd, &h, ev->rbuf, ev->in_cap, &fd);
        if (rc == -EAGAIN)
            return;
        if (rc == 0) { /* the master has gone */
            loop_del(&ev->loop, ev->ho_fd);
            ev->ho_fd = -1;
            return;
        }
        if (h.kind == HO_ACK) {
            __atomic_sub_fetch(&pending, (int64_t)h.count, __ATOMIC_ACQ_REL);
            continue;
        }
        if (h.kind == HO_BOUNCE)
            __atomic_sub_fetch(&pending, 1, __ATOMIC_ACQ_REL);
        adopt(ev, &h, ev->rbuf, fd);
    }
}

/* Hands over the connections of q that wait for their next request (those
 * that cannot move are marked to drain); returns how many stay. A fresh
 * one with no byte yet moves too (a TLS one if OpenSSL has read nothing):
 * kept, it held the old worker to its shutdown timeout, which then closed
 * it under a request still due within the header timeout. */
static int hand_over_queue(struct evloop *ev, struct timerq *q)
{
    int stay = 0;
    struct tq_node *n = q->head.next;
    while (n != &q->head) {
        struct tq_node *next = n->next;
        struct conn *c = container_of(n, struct conn, timer);
        if (c->in_len == 0 && (c->st.nreq || !c->ssl || tls_fresh(c)) &&
            c->drain != DRAIN_KEEP && !c->st.await_pp) {
            if (conn_hand_over(ev, c) < 0) {
                c->drain = DRAIN_RETRY;
                stay++;
            }
        }
        n = next;
    }
    return stay;
}

int conn_handover_retry(struct evloop *ev)
{
    static __thread int64_t next_at;
    if (!ev->handing_over || ev->ho_fd < 0)
        return -1;
    int64_t now = clock_now_ms();
    if (next_at && now < next_at)
        return (int)(next_at - now);
    int stay = hand_over_queue(ev, &ev->q_keepalive) + hand_over_queue(ev, &ev->q_header);
    next_at = stay ? now + RETRY_MS : 0;
    return stay ? RETRY_MS : -1;
}

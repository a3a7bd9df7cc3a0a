/* The uring model's side of a hitless reload (issue 13, proc/handover.h),
 * as models/conn_handover.c is the event loop's. An idle connection's
 * multishot receive holds the socket in the ring, so it moves only once
 * that receive has ended: its cancel goes first, bytes that land meanwhile
 * travel with it as unparsed input, and then the fd and the request-step
 * state go to the master, which passes them to the new generation. One
 * that cannot move (channel full, too much input, its peer closed) stays
 * and drains: its next request is answered with Connection: close. The
 * new worker polls its channel through the ring and adopts what comes. */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "models/uring_internal.h"
#include "proc/handover.h"

_Static_assert(sizeof(struct step_conn) <= HANDOVER_STATE_MAX, "step_conn outgrew a handover");

/* Sent and not yet acknowledged (or bounced back). */
static int64_t pending;
static char rbuf[HANDOVER_IN_MAX];

int uring_handover_settled(void)
{
    return pending <= 0;
}

static void arm_poll(struct uring_loop *u)
{
    struct io_uring_sqe *sqe = uring_sqe(&u->ring);
    io_uring_prep_poll_multishot(sqe, u->ho_fd, POLLIN);
    io_uring_sqe_set_data64(sqe, uring_tag(UK_HANDOVER, 0, 0));
}

/* An idle connection on a reload: its receive stops first. */
static void idle(struct uring_loop *u, struct uconn *c)
{
    if (c->handing || c->drain)
        return; /* on its way, or staying */
    if (u->ho_fd < 0 || c->st.await_pp) {
        c->drain = 1;
        uconn_keep(u, c);
        return;
    }
    c->handing = 1;
    if (c->recv_on)
        uconn_stop_recv(u, c);
    else
        u->ho.recv_ended(u, c);
}

/* The receive of a connection being moved has ended: send it, with what
 * it received meanwhile, or keep it. */
static void recv_ended(struct uring_loop *u, struct uconn *c)
{
    c->handing = 0;
    if (c->eof || c->nheld || c->in_len > HANDOVER_IN_MAX || c->out || c->xfer) {
        c->drain = 1;
        uconn_keep(u, c);
        return;
    }
    struct handover_msg h = {.kind = HO_CONN, .tcp = c->tcp, .state_len = sizeof c->st,
                             .in_len = c->in_len, .count = uconn_waited_ms(u, c)};
    memcpy(h.state, &c->st, sizeof c->st);
    pending++;
    if (handover_send(u->ho_fd, &h, c->in, uconn_fd(u, c)) < 0) {
        pending--;
        c->drain = 1;
        uconn_keep(u, c);
        return;
    }
    uconn_close(u, c); /* the socket lives on in flight */
}

void uring_handover_setup(struct uring_loop *u, int ho_fd)
{
    u->ho_fd = ho_fd;
    u->ho.idle = idle;
    u->ho.recv_ended = recv_ended;
    if (ho_fd >= 0)
        arm_poll(u);
}

void uring_handover_begin(struct uring_loop *u)
{
    u->handing_over = u->ho_fd >= 0;
    if (!u->handing_over)
        return;
    struct tq_node *n = u->q_keepalive.head.next;
    while (n != &u->q_keepalive.head) {
        struct tq_node *next = n->next;
        idle(u, container_of(n, struct uconn, timer));
        n = next;
    }
    /* Fresh ones with no byte yet move too: kept, one held this worker to
     * its shutdown timeout, which then closed it under a request still due
     * within the header timeout. */
    n = u->q_header.head.next;
    while (n != &u->q_header.head) {
        struct tq_node *next = n->next;
        struct uconn *c = container_of(n, struct uconn, timer);
        if (!c->in_len && !c->nheld && !c->st.nreq)
            idle(u, c);
        n = next;
    }
}

void uring_handover_on_poll(struct uring_loop *u, uint32_t cqe_flags)
{
    if (u->ho_fd < 0)
        return;
    if (!(cqe_flags & IORING_CQE_F_MORE))
        arm_poll(u);
    for (;;) {
        struct handover_msg h;
        int fd;
        int rc = handover_next(u->ho_fd, &h, rbuf, sizeof rbuf, &fd);
        if (rc == -EAGAIN)
            return;
        if (rc == 0) { /* the master has gone */
            u->ho_fd = -1;
            return;
        }
        if (h.kind == HO_ACK) {
            pending -= h.count;
            continue;
        }
        if (h.kind == HO_BOUNCE)
            pending--;
        if (h.state_len == (sizeof(struct step_conn) | HO_TLS_FRESH)) {
            /* from a TLS model's generation: uring serves no TLS */
            log_msg(LOG_ERROR, "handover: a TLS connection, and this generation serves no "
                    "TLS: closing it");
            close(fd);
            continue;
        }
        if (h.state_len != sizeof(struct step_conn) || h.in_len > u->in_cap) {
            log_msg(LOG_ERROR, "handover: a connection from another build or with a "
                    "larger head than ours: closing it");
            close(fd);
            continue;
        }
        uconn_adopt(u, fd, h.tcp, h.state, rbuf, h.in_len,
                    h.kind == HO_BOUNCE || u->stopping, h.count);
    }
}

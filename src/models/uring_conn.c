/* A connection of the uring model: bytes from multishot receives go through
 * the request step, answers out through uring_send.c. A receive lands in a
 * provided buffer shared by all connections; the requests in it are
 * answered from there, and only bytes left over (a partial head, or input
 * that arrives while an answer is still on its way) are copied into a
 * buffer of the connection's own, so an idle connection holds none. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "models/linger.h"
#include "models/uring_internal.h"

static struct timerq *queue_of(struct uring_loop *u, enum uq q)
{
    switch (q) {
    case UQ_HEADER: return &u->q_header;
    case UQ_KEEPALIVE: return &u->q_keepalive;
    case UQ_SEND: return &u->q_send;
    case UQ_LINGER: return &u->q_linger;
    case UQ_BODY: return &u->q_body;
    default: return NULL;
    }
}

void uconn_arm(struct uring_loop *u, struct uconn *c, enum uq q)
{
    if (q == UQ_BODY)
        body_clock_start(&c->st.body, clock_now_ms());
    tq_arm(queue_of(u, q), &c->timer, clock_now_ms());
    if ((c->queue == UQ_KEEPALIVE) != (q == UQ_KEEPALIVE))
        SB_ADD(u->slot->idle, q == UQ_KEEPALIVE ? 1 : -1);
    c->queue = (uint8_t)q;
}

/* c waits for a request (its first: the header timeout; else keep-alive),
 * as if it had waited waited_ms already. */
static void arm_request_wait(struct uring_loop *u, struct uconn *c, uint32_t waited_ms)
{
    enum uq q = c->st.nreq ? UQ_KEEPALIVE : UQ_HEADER;
    uconn_arm(u, c, q);
    if (waited_ms)
        tq_arm_waited(queue_of(u, q), &c->timer, waited_ms, clock_now_ms());
}

uint32_t uconn_waited_ms(struct uring_loop *u, const struct uconn *c)
{
    if (c->queue != UQ_KEEPALIVE && c->queue != UQ_HEADER)
        return 0;
    return tq_waited(queue_of(u, c->queue), &c->timer, clock_now_ms());
}

void uconn_disarm(struct uring_loop *u, struct uconn *c)
{
    tq_unlink(&c->timer);
    if (c->queue == UQ_KEEPALIVE)
        SB_ADD(u->slot->idle, -1);
    c->queue = UQ_NONE;
}

/* A receive takes no more than c->in has room for, where the kernel can
 * bound it: input that comes while an answer is on its way then always
 * fits, and what follows waits in the socket, the client held back by
 * TCP as on the event loop. Unbounded, it goes on delivering until a
 * cancel lands, and what c->in cannot take is held in receive buffers,
 * and past URING_HELD_MAX of them dropped. A lingering connection is
 * bounded too, though it throws what it reads away: unbounded, a drain
 * of hundreds of KB kept one receive looping, and the peer's close could
 * go unseen until the linger timeout. */
static void arm_recv(struct uring_loop *u, struct uconn *c)
{
    int fd = uconn_fd(u, c);
    uint32_t cap = 0;
    if (u->recv_bounded) {
        cap = (uint32_t)(u->in_cap - c->in_len);
        if (!cap)
            return; /* the input waiting is served first (pump, settle) */
    }
    struct io_uring_sqe *sqe = uring_sqe(&u->ring);
    uring_prep_recv_bounded(sqe, fd, &u->bufs, cap);
    if (cap && u->recv_bounded == URING_RECV_BOUND_REFUSED)
        sqe->off = 1; /* test: a field every receive refuses */
    io_uring_sqe_set_data64(sqe, uring_tag(UK_RECV, c->gen, (uint32_t)fd));
    c->recv_on = 1;
    c->recv_bounded = cap != 0;
}

static void cancel_recv(struct uring_loop *u, struct uconn *c)
{
    struct io_uring_sqe *sqe = uring_sqe(&u->ring);
    io_uring_prep_cancel64(sqe, uring_tag(UK_RECV, c->gen, (uint32_t)uconn_fd(u, c)), 0);
    io_uring_sqe_set_data64(sqe, uring_tag(UK_NONE, 0, 0));
}

/* A new connection's state; its receive is armed by the caller, once any
 * input it brings is stored (the receive's bound is c->in's room). */
static struct uconn *open_conn(struct uring_loop *u, int fd, int tcp, int pp,
                               const struct sockaddr_storage *peer)
{
    if (fd >= u->max_fds) {
        close(fd);
        return NULL;
    }
    struct uconn *c = &u->conns[fd];
    uint32_t gen = (c->gen + 1) & UR_GEN_MASK;
    memset(c, 0, sizeof *c);
    c->gen = gen;
    c->open = 1;
    c->tcp = (uint8_t)tcp;
    step_conn_init(&c->st, &u->step, peer, !tcp, pp);
    u->nconns++;
    SB_SET(u->slot->active, u->nconns);
    uconn_arm(u, c, UQ_HEADER);
    return c;
}

void uconn_open(struct uring_loop *u, int fd, int tcp, int pp,
                const struct sockaddr_storage *peer)
{
    struct uconn *c = open_conn(u, fd, tcp, pp, peer);
    if (c)
        arm_recv(u, c);
}

static void drop_input(struct uring_loop *u, struct uconn *c)
{
    for (int i = 0; i < c->nheld; i++)
        uring_buf_return(&u->bufs, c->held->bid[(c->held->head + i) % URING_HELD_MAX]);
    u->held -= c->nheld;
    if (c->held)
        bufpool_put(&u->heldbufs, (char *)c->held);
    c->held = NULL;
    c->nheld = 0;
    c->held_off = 0;
    if (c->in)
        bufpool_put(&u->inbufs, c->in);
    c->in = NULL;
    c->in_len = 0;
}

void uconn_close(struct uring_loop *u, struct uconn *c)
{
    if (!c->open)
        return;
    if (c->out)
        uout_abandon(u, c);
    if (c->xfer)
        u->px.abort(u, c);
    /* The ring holds the socket while a receive is armed: cancel it, or
     * the peer never sees our FIN. */
    if (c->recv_on)
        cancel_recv(u, c);
    drop_input(u, c);
    uconn_disarm(u, c);
    close(uconn_fd(u, c));
    c->open = 0;
    c->recv_on = 0;
    c->gen = (c->gen + 1) & UR_GEN_MASK;
    u->nconns--;
    SB_SET(u->slot->active, u->nconns);
}

struct uconn *uconn_idle_victim(struct uring_loop *u, int64_t *from)
{
    int64_t now = clock_now_ms();
    struct tq_node *n = u->q_keepalive.head.next;
    *from = 0;
    for (int i = 0; i < IDLE_VICTIM_LOOKS && n != &u->q_keepalive.head; i++, n = n->next) {
        struct uconn *c = container_of(n, struct uconn, timer);
        /* the ones after it turned idle later still */
        if ((*from = idle_victim_from(tq_waited(&u->q_keepalive, n, now), now)))
            return NULL;
        /* its next request already sent: closing would lose it for a
         * client that does not retry */
        if (!c->in_len && !c->nheld && !linger_input_waiting(uconn_fd(u, c)))
            return c;
    }
    return NULL;
}

/* Answers the requests in data[0..len) through the request step, all in
 * one send; returns the bytes used and says in *next how the send went.
 * Stops at an incomplete request, a full batch, a file to sendfile or a
 * close. */
static size_t serve_batch(struct uring_loop *u, struct uconn *c, const char *data, size_t len,
                          int *served, enum uout_next *next)
{
    *next = UOUT_NONE;
    struct uout *o = uout_get(u, c);
    if (!o) {
        *next = UOUT_CLOSE;
        return len;
    }
    size_t pos = 0;
    /* While handing over on a reload, answers keep the connection alive
     * (it moves on once idle), unless it cannot move. */
    u->step.stopping = (uint8_t)uconn_answers_close(u, c);
    while (pos < len && !c->st.closing && uout_room(u, o)) {
        struct step_result r;
        enum step_action a = step_next(&u->step, &c->st, data + pos, len - pos, &u->req,
                                       &u->out, &r);
        pos += r.used;
        if (a == STEP_MORE)
            break;
        if (a == STEP_UPSTREAM) {
            /* The exchange owns the socket once the answers before it are
             * out (till then the request is parsed again each time); the
             * receive's last buffers reach it first (client_input). */
            if (o->bytes || o->file) {
                step_put_back(&c->st);
                break;
            }
            if (c->recv_on && !c->cancelling) {
                cancel_recv(u, c);
                c->cancelling = 1;
            }
            long took = u->px.start(u, c, r.route, &u->req, data + pos, r.head_len,
                                     data + pos + r.head_len, len - pos - r.head_len);
            if (took < 0) {
                uout_free(u, o);
                *next = UOUT_CLOSE;
                return len;
            }
            pos += r.head_len + (size_t)took;
            break;
        }
        if (a != STEP_ANSWER) {
            /* no valid PROXY header, or a broken body: answers already
             * batched still go out (after a body, lingering: st.linger) */
            log_debug("connection %d: closing without an answer", uconn_fd(u, c));
            c->st.closing = 1;
            pos = len;
            break;
        }
        (*served)++;
        if (uout_add(u, o, &r.plan))
            break;
    }
    if (o->bytes || o->file) {
        c->out = o;
        *next = uout_start(u, c);
    } else {
        uout_free(u, o);
    }
    return pos;
}

/* Batch after batch while each goes out at once (a file sendfile took
 * whole): the next batch is served here, not from inside the send, so
 * the caller's input is never served twice. */
static size_t serve(struct uring_loop *u, struct uconn *c, const char *data, size_t len,
                    int *served)
{
    size_t pos = 0;
    for (;;) {
        enum uout_next next;
        pos += serve_batch(u, c, data + pos, len - pos, served, &next);
        if (next == UOUT_DONE && pos < len && !c->st.closing)
            continue;
        if (next == UOUT_WAIT || next == UOUT_CLOSE)
            uconn_after_output(u, c, next);
        return pos;
    }
}

static void finish_closing(struct uring_loop *u, struct uconn *c, int waited)
{
    shutdown(uconn_fd(u, c), SHUT_WR); /* sends the corked answer (plan_write.h) */
    /* a receive that is off (cancelled to hold input back) leaves what
     * came since in the socket, as a wait does */
    int look = waited || !c->recv_on;
    if ((!c->st.linger && !(look && linger_input_waiting(uconn_fd(u, c)))) || c->eof) {
        uconn_close(u, c);
        return;
    }
    /* Closing with unread input makes the kernel send RST, which can destroy
     * the answer before the client reads it: read on (discarding) until the
     * peer closes or the linger timer fires (models/linger.h). The receive
     * an exchange or held input cancelled starts again for it. */
    c->lingering = 1;
    drop_input(u, c);
    if (!c->recv_on)
        arm_recv(u, c);
    uconn_arm(u, c, UQ_LINGER);
}

/* Moves held receive buffers into c->in while it has room. 1 if it did. */
static int refill(struct uring_loop *u, struct uconn *c)
{
    int moved = 0;
    while (c->nheld) {
        if (!c->in && !(c->in = bufpool_get(&u->inbufs)))
            return moved;
        struct uheld *h = c->held;
        size_t room = u->in_cap - c->in_len;
        size_t left = h->len[h->head] - c->held_off;
        size_t n = left < room ? left : room;
        if (!n)
            return moved;
        memcpy(c->in + c->in_len, uring_buf(&u->bufs, h->bid[h->head]) + c->held_off, n);
        c->in_len += (uint32_t)n;
        c->held_off += (uint16_t)n;
        moved = 1;
        if (n < left)
            return moved;
        uring_buf_return(&u->bufs, h->bid[h->head]);
        h->head = (uint8_t)((h->head + 1) % URING_HELD_MAX);
        c->held_off = 0;
        u->held--;
        if (--c->nheld == 0) {
            bufpool_put(&u->heldbufs, (char *)h);
            c->held = NULL;
        }
    }
    return moved;
}

/* No answer on its way: the timer that fits what the connection waits for. */
static void settle(struct uring_loop *u, struct uconn *c, int served)
{
    if (c->eof) {
        uconn_close(u, c); /* whatever is left can never become a request */
        return;
    }
    if (c->nheld == 0 && !c->recv_on)
        arm_recv(u, c);
    if (step_in_body(&c->st)) {
        /* a body runs on its own clock from its head's answer */
        if (served || c->queue != UQ_BODY)
            uconn_arm(u, c, UQ_BODY);
    } else if (c->in_len) {
        /* a head must arrive whole within the header timeout of its first byte */
        if (served || c->queue != UQ_HEADER)
            uconn_arm(u, c, UQ_HEADER);
    } else if (u->stopping && !c->drain) {
        if (u->handing_over)
            u->ho.idle(u, c); /* to the new generation */
        else
            uconn_close(u, c);
    } else if (c->st.nreq || served) {
        uconn_arm(u, c, UQ_KEEPALIVE);
    } else if (c->queue != UQ_HEADER) {
        uconn_arm(u, c, UQ_HEADER); /* only a PROXY header so far */
    }
}

/* Serves what c has buffered until it waits for input or output. skip:
 * c->in was just served already. */
static void pump(struct uring_loop *u, struct uconn *c, int served, int skip)
{
    int waited = c->waited;
    c->waited = 0;
    if (c->st.closing && (c->in_len || c->nheld))
        c->st.linger = 1; /* input a proxied request that closes left unread */
    for (;;) {
        if (c->in_len && !skip) {
            size_t pos = serve(u, c, c->in, c->in_len, &served);
            if (!c->open)
                return;
            c->in_len = c->st.closing ? 0 : c->in_len - (uint32_t)pos;
            if (c->in_len && pos)
                memmove(c->in, c->in + pos, c->in_len);
        }
        skip = 0;
        if (c->xfer) {
            if (c->kick)
                u->px.kick(u, c); /* the input left is stored: it may move now */
            return;
        }
        if (c->out)
            return; /* on its way: uconn_after_output goes on */
        if (c->st.closing) {
            finish_closing(u, c, waited);
            return;
        }
        if (!refill(u, c))
            break;
    }
    if (!c->in_len && c->in) {
        bufpool_put(&u->inbufs, c->in);
        c->in = NULL;
    }
    settle(u, c, served);
}

void uconn_after_output(struct uring_loop *u, struct uconn *c, enum uout_next next)
{
    if (next == UOUT_WAIT)
        uconn_arm(u, c, UQ_SEND); /* progress restarts the send timeout */
    else if (next == UOUT_CLOSE)
        uconn_close(u, c);
    else if (next == UOUT_DONE)
        pump(u, c, 1, 0); /* close, or serve what waits (c->waited: uring_send.c) */
}

/* Input while an answer is on its way: buffered, up to c->in's room and
 * then URING_HELD_MAX receive buffers; the receive is cancelled meanwhile,
 * so a client that sends without reading waits in its socket. */
static void keep_busy_input(struct uring_loop *u, struct uconn *c, unsigned bid, size_t len)
{
    if (c->st.closing) { /* it closes after the answer on its way */
        uring_buf_return(&u->bufs, bid);
        return;
    }
    if (c->out || c->xfer) /* sent before an answer ended */
        step_saw_next(&c->st, uring_buf(&u->bufs, bid), len);
    size_t took = 0;
    if (!c->nheld && (c->in || (c->in = bufpool_get(&u->inbufs)))) {
        size_t room = u->in_cap - c->in_len;
        took = len < room ? len : room;
        memcpy(c->in + c->in_len, uring_buf(&u->bufs, bid), took);
        c->in_len += (uint32_t)took;
        if (took == len) {
            uring_buf_return(&u->bufs, bid);
            return;
        }
    }
    /* Holders may take half the ring at most: the rest keeps every other
     * connection receiving. */
    if (c->nheld == URING_HELD_MAX || u->held >= u->held_max) {
        uring_buf_return(&u->bufs, bid);
        if (c->handing || (c->xfer && u->px.reads_body(u, c))) {
            log_debug("connection %d: input piles up while it reads no answers",
                      uconn_fd(u, c));
            uconn_close(u, c);
            return;
        }
        /* What piles up behind an answer on its way is the client's next
         * requests: they are dropped, and the connection closes after that
         * answer, lingering, where cutting it now would lose the answer. */
        log_debug("connection %d: input piles up behind an answer: closing after it",
                  uconn_fd(u, c));
        drop_input(u, c);
        c->st.closing = 1;
        c->st.linger = 1;
        return;
    }
    if (!c->nheld) {
        c->held = (struct uheld *)(void *)bufpool_get(&u->heldbufs);
        if (!c->held) {
            uring_buf_return(&u->bufs, bid);
            uconn_close(u, c);
            return;
        }
        c->held->head = 0;
        c->held_off = (uint16_t)took;
        if (c->recv_on && !c->cancelling) {
            cancel_recv(u, c);
            c->cancelling = 1;
        }
    }
    struct uheld *h = c->held;
    int at = (h->head + c->nheld++) % URING_HELD_MAX;
    u->held++;
    h->bid[at] = (uint16_t)bid;
    h->len[at] = (uint16_t)len;
}

/* A fresh receive on a connection with nothing pending: answered straight
 * from the receive buffer; only the bytes left over are copied. */
static void serve_fresh(struct uring_loop *u, struct uconn *c, unsigned bid, size_t len)
{
    const char *data = uring_buf(&u->bufs, bid);
    int served = 0;
    size_t pos = serve(u, c, data, len, &served);
    if (c->open && !c->st.closing && pos < len) {
        c->in = bufpool_get(&u->inbufs);
        if (!c->in) {
            uring_buf_return(&u->bufs, bid);
            uconn_close(u, c);
            return;
        }
        memcpy(c->in, data + pos, len - pos);
        c->in_len = (uint32_t)(len - pos);
    }
    uring_buf_return(&u->bufs, bid);
    if (c->open && !c->out)
        pump(u, c, served, 1);
}

/* A receive completion while an exchange owns c: input goes to c's
 * buffers for the pump (client_input), which reads the socket itself only
 * once the receive has ended; an EOF it finds there too. Likewise once
 * the exchange has ended within this round (c->resuming): served now, the
 * next request's exchange would find the socket still in the proxy's
 * epoll set, which lets go of it only at the resume, and fail; the
 * resume serves what was stored, in order. */
static void exchange_input(struct uring_loop *u, struct uconn *c, int res, uint32_t flags)
{
    if (!c->recv_on)
        c->cancelling = 0;
    if (res > 0) {
        unsigned bid = flags >> IORING_CQE_BUFFER_SHIFT;
        SB_ADD(u->slot->bytes_in, (uint64_t)res);
        keep_busy_input(u, c, bid, (size_t)res);
        if (!c->open)
            return;
    } else if (res == 0) {
        c->eof = 1;
    }
    u->px.client_ready(u, c);
}

void uconn_on_recv(struct uring_loop *u, struct uconn *c, int res, uint32_t flags)
{
    if (!(flags & IORING_CQE_F_MORE))
        c->recv_on = 0;
    if (res == -EINVAL && c->recv_bounded) {
        /* a kernel without bounded receives: from here on unbounded, as if
         * this one had been cancelled */
        if (u->recv_bounded)
            log_msg(LOG_NOTICE, "io_uring: this kernel cannot bound a multishot receive; "
                                "input that piles up behind an answer is held, and "
                                "dropped past %d buffers", URING_HELD_MAX);
        u->recv_bounded = 0;
        c->recv_bounded = 0;
        res = -ECANCELED;
    }
    if (c->xfer || c->resuming) {
        exchange_input(u, c, res, flags);
        return;
    }
    if (!c->recv_on)
        c->cancelling = 0; /* an exchange's cancel that lands after it ended */
    if (c->handing) {
        /* moving on a reload: what lands travels with it */
        if (res > 0) {
            SB_ADD(u->slot->bytes_in, (uint64_t)res);
            keep_busy_input(u, c, flags >> IORING_CQE_BUFFER_SHIFT, (size_t)res);
            if (!c->open)
                return;
        } else if (res == 0 || (res != -ECANCELED && res != -ENOBUFS)) {
            c->eof = 1;
        }
        if (!c->recv_on)
            u->ho.recv_ended(u, c);
        return;
    }
    if (res < 0) {
        if (res == -ECANCELED || res == -ENOBUFS) {
            /* our cancel while input piles up (or for an exchange that
             * has ended since), or the buffers ran out for a moment:
             * receive again unless input is held; a lingering connection
             * reads on until the peer's EOF */
            if (!c->recv_on && !c->nheld)
                arm_recv(u, c);
            return;
        }
        if (!c->recv_on)
            uconn_close(u, c);
        return;
    }
    if (res == 0) {
        c->eof = 1;
        if (!c->out)
            uconn_close(u, c); /* an answer on its way finishes first */
        return;
    }
    unsigned bid = flags >> IORING_CQE_BUFFER_SHIFT;
    SB_ADD(u->slot->bytes_in, (uint64_t)res);
    if (c->lingering || c->st.closing) {
        uring_buf_return(&u->bufs, bid);
        if (c->lingering && !c->recv_on)
            arm_recv(u, c); /* its bound was reached: read on */
        return;
    }
    if (c->out || c->in || c->nheld) {
        keep_busy_input(u, c, bid, (size_t)res);
        if (c->open && !c->out)
            pump(u, c, 0, 0);
        return;
    }
    serve_fresh(u, c, bid, (size_t)res);
}

size_t uconn_take_input(struct uring_loop *u, struct uconn *c, char *buf, size_t n)
{
    if (!c->in_len)
        refill(u, c);
    size_t k = c->in_len < n ? c->in_len : n;
    if (!k)
        return 0;
    memcpy(buf, c->in, k);
    c->in_len -= (uint32_t)k;
    memmove(c->in, c->in + k, c->in_len);
    return k;
}

void uconn_resume(struct uring_loop *u, struct uconn *c)
{
    /* closing with a linger reads on: that needs the receive */
    if (c->st.closing && c->st.linger && !c->recv_on && !c->nheld)
        arm_recv(u, c);
    c->waited = 1;
    pump(u, c, 1, 0);
}

void uconn_stop_recv(struct uring_loop *u, struct uconn *c)
{
    if (c->recv_on && !c->cancelling) {
        cancel_recv(u, c);
        c->cancelling = 1;
    }
}

void uconn_keep(struct uring_loop *u, struct uconn *c)
{
    c->handing = 0;
    if (c->eof && !c->in_len && !c->nheld) {
        uconn_close(u, c);
        return;
    }
    if (c->in_len || c->nheld) {
        pump(u, c, 0, 0); /* answered with close: it could not move */
        return;
    }
    if (!c->recv_on)
        arm_recv(u, c);
    uint32_t waited_ms = uconn_waited_ms(u, c); /* its deadline stays */
    arm_request_wait(u, c, waited_ms);
}

void uconn_adopt(struct uring_loop *u, int fd, int tcp, const void *state, const char *in,
                 size_t in_len, int drain, uint32_t waited_ms)
{
    struct uconn *c = open_conn(u, fd, tcp, 0, NULL);
    if (!c)
        return;
    memcpy(&c->st, state, sizeof c->st);
    c->drain = (uint8_t)drain;
    if (in_len) {
        if (!(c->in = bufpool_get(&u->inbufs))) {
            uconn_close(u, c);
            return;
        }
        memcpy(c->in, in, in_len);
        c->in_len = (uint32_t)in_len;
        pump(u, c, 0, 0); /* arms the receive once it waits for input (settle) */
        return;
    }
    arm_recv(u, c);
    arm_request_wait(u, c, waited_ms);
}

/* The body queue's timer fired: 1 when the body kept its rate, and its
 * timer is queued again for the extended deadline. */
static int body_extended(struct uring_loop *u, struct uconn *c)
{
    const struct serve_config *cfg = u->cfg;
    int64_t now = clock_now_ms();
    int64_t due = body_clock_deadline(&c->st.body, cfg->body_timeout_ms, cfg->body_min_rate);
    if (due <= now)
        return 0;
    int64_t cap = now + cfg->body_timeout_ms; /* at most one timeout ahead: FIFO order */
    tq_arm_at(&u->q_body, &c->timer, due < cap ? due : cap);
    return 1;
}

void uconn_timeout(struct uring_loop *u, struct uconn *c)
{
    if (c->queue == UQ_BODY && body_extended(u, c))
        return;
    log_debug("connection %d: %s timeout", uconn_fd(u, c),
              c->lingering ? "linger" : c->out ? "send" : c->queue == UQ_BODY ? "body"
              : c->in_len ? "header" : "idle");
    if (c->queue == UQ_KEEPALIVE)
        SB_ADD(u->slot->idle, -1);
    c->queue = UQ_NONE;
    uconn_close(u, c);
}

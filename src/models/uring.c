/* The io_uring model: one ring per worker process, on its own SO_REUSEPORT
 * socket. Connections arrive by multishot accept, input by multishot
 * receives into provided buffers, answers leave by sendmsg SQEs; every SQE
 * of a completion round goes in with the one io_uring_submit_and_wait that
 * also waits for the next round. Timeouts live in the same FIFO queues as
 * the event loop's, behind one IORING_OP_TIMEOUT for the nearest deadline,
 * so a request costs no timer syscall. */
#include "models/uring.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/signals.h"
#include "models/linger.h"
#include "models/sizing.h"
#include "models/upstream_uring.h"
#include "models/uring_internal.h"
#include "net/accept.h"
#include "proc/status.h"

#define RING_ENTRIES 1024
#define RECV_BUFS 2048      /* provided buffers: a power of two */
#define RECV_BUF_SIZE 4096
#define CQE_BATCH 256
#define MAX_LISTENERS 64
#define ACCEPT_MULTISHOT_ROOM 64 /* free connection slots for a multishot accept */

struct listener {
    int fd;
    uint8_t tcp, proxy;
    uint8_t armed;          /* a multishot accept is in the ring */
    uint8_t multishot;      /* ...a multishot one */
    uint8_t cancelled;      /* ...and its cancel too */
    uint8_t watched;        /* at --max-connections: a poll for a client waiting
                             * in the backlog is in the ring (make_room) */
    uint8_t unwatched;      /* ...and its cancel too */
    uint8_t waiting;        /* ...and it said one waits */
    uint8_t backlog_seen;   /* checks in a row that found clients queued while
                             * the accept was armed (look_for_lost_wakeups) */
};

struct server {
    struct uring_loop u;
    const struct worker_env *env;
    struct sb_slot own_slot;
    struct alog alog;
    struct listener ls[MAX_LISTENERS];
    int nls;
    int64_t stop_deadline;
    int64_t accept_retry_at;    /* out of fds: not accepting until then */
    int64_t timeout_at;         /* the armed IORING_OP_TIMEOUT, or -1 */
    int64_t backlog_check_at;   /* next look_for_lost_wakeups */
    int64_t victim_at;          /* an idle connection may give its place then (make_room) */
    struct __kernel_timespec ts;
    time_t last_limit_log;
    int ring_ok;
};

static int want_peer(struct server *s)
{
    return alog_on(&s->alog) || s->u.cfg->http.status_path[0] || s->u.cfg->nroutes;
}

static int accepting(struct server *s)
{
    struct uring_loop *u = &s->u;
    return !u->stopping && !s->accept_retry_at && u->nconns < u->max_conns;
}

/* At --max-connections a listener is polled for a client waiting in its
 * backlog (make_room acts on it). The poll is one-shot; a stop cancels it
 * (the ring's hold on the socket would keep it open past its close). */
static void sync_watch(struct server *s, struct listener *l, uint32_t i)
{
    struct uring_loop *u = &s->u;
    uint64_t tag = uring_tag(UK_BACKLOG, 0, i);
    int full = !u->stopping && !s->accept_retry_at && u->nconns >= u->max_conns;
    if (full && !l->watched && !l->waiting && !l->armed && l->fd >= 0) {
        struct io_uring_sqe *sqe = uring_sqe(&u->ring);
        io_uring_prep_poll_add(sqe, l->fd, POLLIN);
        io_uring_sqe_set_data64(sqe, tag);
        l->watched = 1;
        l->unwatched = 0;
    } else if (u->stopping && l->watched && !l->unwatched) {
        struct io_uring_sqe *sqe = uring_sqe(&u->ring);
        io_uring_prep_poll_remove(sqe, tag);
        io_uring_sqe_set_data64(sqe, uring_tag(UK_NONE, 0, 0));
        l->unwatched = 1;
    }
    if (!full)
        l->waiting = 0;
}

/* Arms or cancels each listener's accept to match accepting(). Far from
 * --max-connections a multishot accept takes the whole backlog in one go;
 * near it, one connection per accept, so the rest waits in the backlog as
 * it does in the other models (a multishot accept cancelled at the limit
 * would have taken a burst past it). */
static void sync_accepts(struct server *s)
{
    struct uring_loop *u = &s->u;
    int on = accepting(s);
    int multi = u->nconns < u->max_conns && u->max_conns - u->nconns > ACCEPT_MULTISHOT_ROOM;
    for (int i = 0; i < s->nls; i++) {
        struct listener *l = &s->ls[i];
        uint64_t tag = uring_tag(UK_ACCEPT, 0, (uint32_t)i);
        if (on && !l->armed && l->fd >= 0) {
            struct io_uring_sqe *sqe = uring_sqe(&u->ring);
            if (multi)
                io_uring_prep_multishot_accept(sqe, l->fd, NULL, NULL,
                                               SOCK_NONBLOCK | SOCK_CLOEXEC);
            else
                io_uring_prep_accept(sqe, l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
            io_uring_sqe_set_data64(sqe, tag);
            l->armed = 1;
            l->multishot = (uint8_t)multi;
            l->cancelled = 0;
        } else if ((!on || (l->multishot && !multi)) && l->armed && !l->cancelled) {
            struct io_uring_sqe *sqe = uring_sqe(&u->ring);
            io_uring_prep_cancel64(sqe, tag, 0);
            io_uring_sqe_set_data64(sqe, uring_tag(UK_NONE, 0, 0));
            l->cancelled = 1;
        }
        sync_watch(s, l, (uint32_t)i);
    }
}

static void log_limit(struct server *s, int level, const char *msg)
{
    if (clock_wall() != s->last_limit_log) {
        s->last_limit_log = clock_wall();
        log_msg(level, "%s", msg);
    }
}

static void take(struct server *s, struct listener *l, int fd)
{
    struct uring_loop *u = &s->u;
    SB_ADD(u->slot->accepted, 1);
    struct sockaddr_storage peer;
    socklen_t plen = sizeof peer;
    int have_peer = want_peer(s) && getpeername(fd, (struct sockaddr *)&peer, &plen) == 0;
    uconn_open(u, fd, l->tcp, l->proxy, have_peer ? &peer : NULL);
}

static void release_listener(struct server *s, struct listener *l);

/* An accept (the ring's, or make_room's own) failed with err: but for an
 * empty backlog or a client gone already, accepting stops for a while, as
 * the event loop's does, and says why. */
static void accept_failed(struct server *s, int err)
{
    if (err == EAGAIN || err == ECONNABORTED)
        return;
    if (err == EMFILE || err == ENFILE)
        log_limit(s, LOG_CRIT, "out of file descriptors: not accepting for now");
    else
        log_msg(LOG_ERROR, "accept: %s", strerror(err));
    s->accept_retry_at = clock_now_ms() + NET_ACCEPT_BACKOFF_MS;
}

static void on_accept(struct server *s, uint32_t i, int res, uint32_t flags)
{
    struct listener *l = &s->ls[i];
    if (!(flags & IORING_CQE_F_MORE))
        l->armed = 0;
    if (res >= 0)
        take(s, l, res);
    release_listener(s, l);
    if (res < 0) {
        if (res != -ECANCELED)
            accept_failed(s, -res);
        return;
    }
    /* While stopping, a connection the ring took before its cancel landed
     * is served like the fresh ones (its answer says close): closing it
     * would drop a request that a reload's new worker could have served.
     * At --max-connections the warning waits for a client that must wait
     * (make_room). */
}

/* Stopping: what is queued on a listen socket now was meant for us, and
 * its last close (a reload that removed its address) would reset it. */
static void take_backlog(struct server *s, struct listener *l)
{
    int fd;
    while (s->u.nconns < s->u.max_conns &&
           (fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0)
        take(s, l, fd);
}

/* Stopping: once the ring's accept on l is gone (its cancel or last
 * completion came), take what is queued and close l. Not before: a
 * connection whose wakeup went to the accept being cancelled is woken for
 * no one else (the new generation's accept on the same socket sleeps on),
 * and would wait in the backlog until the next connection came. */
static void release_listener(struct server *s, struct listener *l)
{
    if (!s->u.stopping || l->armed || l->watched || l->fd < 0)
        return;
    take_backlog(s, l);
    close(l->fd);
    l->fd = -1;
}

static int listeners_released(const struct server *s)
{
    for (int i = 0; i < s->nls; i++)
        if (s->ls[i].fd >= 0)
            return 0;
    return 1;
}

/* How often an armed accept is checked for a wakeup it missed, and how
 * many checks in a row must find clients queued before it is re-armed. */
#define BACKLOG_CHECK_MS 1000
#define BACKLOG_CHECKS 2

/* An accept armed in the ring waits on the listen socket as an exclusive
 * waiter: each new connection wakes one waiter. An old generation's
 * worker that could not leave its ring (stopped, stuck) until the master
 * killed it took those wakeups, and the connections they were for stayed
 * queued after it was gone, while this worker's accept slept on, until
 * the next connection came. A listener whose backlog holds clients at two
 * checks in a row gets its accept cancelled, and sync_accepts re-arms it:
 * a new accept takes what is queued at once. Under load the backlog is
 * seldom found full twice in a row, and a needless re-arm costs nothing
 * but the two SQEs. */
static void look_for_lost_wakeups(struct server *s)
{
    if (clock_now_ms() < s->backlog_check_at)
        return;
    s->backlog_check_at = clock_now_ms() + BACKLOG_CHECK_MS;
    for (int i = 0; i < s->nls; i++) {
        struct listener *l = &s->ls[i];
        if (!l->armed || l->cancelled || l->fd < 0) {
            l->backlog_seen = 0;
            continue;
        }
        if (!net_backlog_waiting(l->fd)) {
            l->backlog_seen = 0;
        } else if (++l->backlog_seen >= BACKLOG_CHECKS) {
            log_debug("listener %d: clients queued behind an armed accept: re-arming it", l->fd);
            struct io_uring_sqe *sqe = uring_sqe(&s->u.ring);
            io_uring_prep_cancel64(sqe, uring_tag(UK_ACCEPT, 0, (uint32_t)i), 0);
            io_uring_sqe_set_data64(sqe, uring_tag(UK_NONE, 0, 0));
            l->cancelled = 1;
            l->backlog_seen = 0;
        }
    }
}

/* A listener's backlog poll completed: a client waits (or the poll was
 * cancelled by a stop, which may now release the listener). */
static void on_backlog(struct server *s, uint32_t i, int res)
{
    struct listener *l = &s->ls[i];
    l->watched = 0;
    if (res > 0 && (res & POLLIN))
        l->waiting = 1;
    release_listener(s, l);
}

/* At --max-connections with a client waiting in a backlog, the connection
 * idle the longest between requests gives its place, as on the event
 * loop (conn_idle_victim) and as nginx reuses idle keep-alive connections.
 * Run at a round's end, when every completion is handled: a request that
 * came for an idle connection is either served already or still in its
 * socket, where the victim's peek sees it. The client is accepted here,
 * before the victim closes: every full worker on a listen socket they
 * share (a unix socket) is told a client waits, and each closed a
 * connection for the one client (review 21). */
static void make_room(struct server *s)
{
    struct uring_loop *u = &s->u;
    s->victim_at = 0;
    if (u->nconns < u->max_conns || u->stopping) /* every round: the cheap test first */
        return;
    int waiting = 0;
    for (int i = 0; i < s->nls; i++)
        waiting |= s->ls[i].waiting;
    if (!waiting)
        return;
    struct uconn *idle = uconn_idle_victim(u, &s->victim_at);
    if (!idle) {
        /* none idle (long enough) now: tried again at each round's end
         * until one is, a round at s->victim_at at the latest */
        log_limit(s, LOG_WARN, "at --max-connections, not accepting");
        return;
    }
    for (int i = 0; i < s->nls; i++) {
        struct listener *l = &s->ls[i];
        if (!l->waiting || l->fd < 0)
            continue;
        l->waiting = 0; /* polled again (sync_watch) while at the limit */
        int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            accept_failed(s, errno); /* EAGAIN: another worker took it */
            continue;
        }
        log_debug("connection %d: idle, closed for a new one (at --max-connections)",
                  uconn_fd(u, idle));
        uconn_close(u, idle);
        take(s, l, fd);
        /* one a round: the polls sync_watch arms again say whether more wait */
        for (int j = 0; j < s->nls; j++)
            s->ls[j].waiting = 0;
        return;
    }
}

static void close_idle(struct uring_loop *u)
{
    struct tq_node *n = u->q_keepalive.head.next;
    while (n != &u->q_keepalive.head) {
        struct tq_node *next = n->next;
        uconn_close(u, container_of(n, struct uconn, timer));
        n = next;
    }
}

/* Graceful stop: no new connections, idle ones closed now, busy ones after
 * their current answer (no keep-alive while stopping), fresh ones once
 * their request is answered or their header timeout fires. On a reload
 * (hand_over) idle connections move to the new generation instead, and
 * busy ones once they are idle (uring_handover.c). */
static void begin_stop(struct server *s, int hand_over)
{
    struct uring_loop *u = &s->u;
    if (u->stopping && u->handing_over && !hand_over) {
        /* TERM after a HUP: the server stops, nothing is handed over now */
        u->handing_over = 0;
        close_idle(u);
    }
    if (u->stopping)
        return;
    u->stopping = 1;
    s->stop_deadline = clock_now_ms() + u->cfg->shutdown_timeout_ms;
    sync_accepts(s);
    for (int i = 0; i < s->nls; i++) {
        if (s->ls[i].fd < 0)
            continue;
        if (s->ls[i].armed)
            take_backlog(s, &s->ls[i]); /* now; the rest when its cancel completes */
        release_listener(s, &s->ls[i]); /* takes the backlog once it is not armed */
    }
    if (hand_over && u->ho_fd >= 0)
        uring_handover_begin(u);
    else
        close_idle(u);
    log_debug("stopping: %u connections to finish", u->nconns);
}

/* Returns 1 to stop at once. */
static int on_signals(struct server *s, int sfd)
{
    int sig;
    while ((sig = signals_read(sfd)) > 0) {
        if (sig == SIGTERM || sig == SIGINT) {
            begin_stop(s, 0);
        } else if (sig == SIGHUP) { /* from the master: a reload */
            if (s->u.ho_fd >= 0)
                begin_stop(s, 1);
            else
                log_msg(LOG_NOTICE, "signal %d ignored (no master process in this mode)", sig);
        } else if (sig == SIGQUIT) {
            log_msg(LOG_NOTICE, "SIGQUIT: exiting at once");
            return 1;
        }
    }
    return 0;
}

static void arm_signals(struct server *s)
{
    struct io_uring_sqe *sqe = uring_sqe(&s->u.ring);
    io_uring_prep_poll_multishot(sqe, s->env->signal_fd, POLLIN);
    io_uring_sqe_set_data64(sqe, uring_tag(UK_SIGNAL, 0, 0));
}

static int64_t next_deadline(struct server *s)
{
    struct uring_loop *u = &s->u;
    int64_t next = -1;
    struct timerq *qs[] = {&u->q_header, &u->q_keepalive, &u->q_send, &u->q_linger,
                           &u->q_body};
    for (size_t i = 0; i < sizeof qs / sizeof qs[0]; i++) {
        int64_t d = tq_next_deadline(qs[i]);
        if (d >= 0 && (next < 0 || d < next))
            next = d;
    }
    if (u->stopping && (next < 0 || s->stop_deadline < next))
        next = s->stop_deadline;
    if (s->accept_retry_at && (next < 0 || s->accept_retry_at < next))
        next = s->accept_retry_at;
    if (!u->stopping && (next < 0 || s->backlog_check_at < next))
        next = s->backlog_check_at;
    if (s->victim_at && !u->stopping && (next < 0 || s->victim_at < next))
        next = s->victim_at;
    int64_t up_due = uproxy_next_deadline(u);
    if (up_due >= 0 && (next < 0 || up_due < next))
        next = up_due;
    int64_t log_due = alog_due_ms(&s->alog); /* a batch of log records waits */
    if (log_due >= 0 && (next < 0 || log_due < next))
        next = log_due;
    return next;
}

/* One IORING_OP_TIMEOUT at a time for the nearest deadline. A later
 * deadline leaves an earlier timeout armed (one early wakeup, then it is
 * armed again), so keep-alive requests, which only push deadlines later,
 * never touch it. */
static void arm_timeout(struct server *s)
{
    int64_t next = next_deadline(s);
    if (next < 0 || (s->timeout_at >= 0 && s->timeout_at <= next))
        return;
    /* COARSE clock: a few ms late is fine, early would spin */
    int64_t at = next + 5;
    struct timespec mono;
    clock_gettime(CLOCK_MONOTONIC, &mono);
    int64_t now = (int64_t)mono.tv_sec * 1000 + mono.tv_nsec / 1000000;
    if (at < now)
        at = now;
    s->ts.tv_sec = at / 1000;
    s->ts.tv_nsec = at % 1000 * 1000000;
    struct io_uring_sqe *sqe = uring_sqe(&s->u.ring);
    io_uring_prep_timeout(sqe, &s->ts, 0, IORING_TIMEOUT_ABS);
    io_uring_sqe_set_data64(sqe, (uint64_t)UK_TIMEOUT << 60 | (uint64_t)next);
    s->timeout_at = next;
}

static void expire(struct uring_loop *u, struct timerq *q)
{
    struct tq_node *n;
    while ((n = tq_pop_expired(q, clock_now_ms())) != NULL)
        uconn_timeout(u, container_of(n, struct uconn, timer));
}

/* Returns 1 to stop at once. */
static int dispatch(struct server *s, uint64_t tag, int res, uint32_t flags)
{
    struct uring_loop *u = &s->u;
    uint32_t id = uring_tag_id(tag);
    struct uconn *c = id < (uint32_t)u->max_fds ? &u->conns[id] : NULL;
    int live = c && c->open && c->gen == uring_tag_gen(tag);
    switch (uring_tag_kind(tag)) {
    case UK_ACCEPT:
        on_accept(s, id, res, flags);
        break;
    case UK_RECV:
        if (live)
            uconn_on_recv(u, c, res, flags);
        else if (flags & IORING_CQE_F_BUFFER) /* for a connection closed meanwhile */
            uring_buf_return(&u->bufs, flags >> IORING_CQE_BUFFER_SHIFT);
        break;
    case UK_SEND:
    case UK_WARM: { /* may be for a connection closed meanwhile: uring_send.c tells */
        struct uconn *oc = NULL;
        enum uout_next next = uring_tag_kind(tag) == UK_SEND ? uout_on_send(u, tag, res, &oc)
                                                             : uout_on_warm(u, tag, res, &oc);
        if (oc)
            uconn_after_output(u, oc, next);
        break;
    }
    case UK_POLLOUT:
        if (live && c->polling)
            uconn_after_output(u, c, uout_on_pollout(u, c, res));
        break;
    case UK_SIGNAL:
        if (!(flags & IORING_CQE_F_MORE))
            arm_signals(s);
        return on_signals(s, s->env->signal_fd);
    case UK_EPOLL:
        uproxy_on_poll(u, flags);
        break;
    case UK_HANDOVER:
        uring_handover_on_poll(u, flags);
        break;
    case UK_BACKLOG:
        if (id < (uint32_t)s->nls)
            on_backlog(s, id, res);
        break;
    case UK_TIMEOUT:
        if ((int64_t)(tag & ((1ULL << 60) - 1)) == s->timeout_at)
            s->timeout_at = -1;
        break;
    default:
        break;
    }
    return 0;
}

/* Takes every completion there is; returns 1 to stop at once. */
static int reap(struct server *s)
{
    struct uring_loop *u = &s->u;
    struct io_uring_cqe *cqes[CQE_BATCH];
    struct { uint64_t tag; int res; uint32_t flags; } got[CQE_BATCH];
    unsigned n;
    while ((n = io_uring_peek_batch_cqe(&u->ring, cqes, CQE_BATCH)) > 0) {
        /* copied out first: handling them queues SQEs, which may submit */
        for (unsigned i = 0; i < n; i++)
            got[i] = (typeof(got[0])){cqes[i]->user_data, cqes[i]->res, cqes[i]->flags};
        io_uring_cq_advance(&u->ring, n);
        for (unsigned i = 0; i < n; i++)
            if (dispatch(s, got[i].tag, got[i].res, got[i].flags))
                return 1;
        if (n < CQE_BATCH)
            break;
    }
    return 0;
}

static int setup_listeners(struct server *s)
{
    const struct serve_config *cfg = s->u.cfg;
    const struct worker_env *env = s->env;
    for (int i = 0; env->listen_fds && i < cfg->nlisten && i < MAX_LISTENERS; i++) {
        struct listener *l = &s->ls[i];
        l->fd = env->listen_fds[i * (env->nthreads > 0 ? env->nthreads : 1)];
        l->tcp = cfg->listen[i].family != AF_UNIX;
        l->proxy = (uint8_t)cfg->listen_proxy[i];
        s->nls++;
    }
    return 0;
}

static int setup(struct server *s, const struct serve_config *cfg, const struct worker_env *env)
{
    struct uring_loop *u = &s->u;
    u->cfg = cfg;
    s->env = env;
    s->timeout_at = -1;
    u->slot = env->slot ? env->slot : &s->own_slot;
    alog_init(&s->alog, env->log_fd, cfg->access_log_format, u->slot);
    u->alog = &s->alog;
    u->max_fds = sizing_fd_limit();
    u->max_conns = sizing_max_conns(cfg, u->max_fds, 1, 0);
    u->conns = calloc((size_t)u->max_fds, sizeof *u->conns);
    u->warm_sink = malloc(FILE_WINDOW);
    u->in_cap = sizing_in_cap(cfg);
    u->out_cap = 65536 + sizing_out_cap(cfg); /* heads of a pipelined batch */
    if (!u->conns || !u->warm_sink)
        log_fatal("out of memory at start");
    bufpool_init(&u->inbufs, u->in_cap, 256);
    bufpool_init(&u->outbufs, sizeof(struct uout) + u->out_cap, 256);
    bufpool_init(&u->heldbufs, sizeof(struct uheld), 64);
    struct filecache_limits lim = sizing_file_cache(u->max_fds, 1);
    u->http.cfg = &cfg->http;
    u->http.status = status_page;
    u->http.status_arg = (void *)env->sb;
    u->http.routes = cfg->routes;   /* "/api" redirects to a route's "/api/" */
    u->http.nroutes = cfg->nroutes;
    u->http.fc = fc_create(cfg->docroot, &lim);
    if (!u->http.fc) {
        log_msg(LOG_CRIT, "cannot open docroot %s: %s", cfg->docroot, strerror(errno));
        return -1;
    }
    tq_init(&u->q_header, cfg->header_timeout_ms);
    tq_init(&u->q_keepalive, cfg->keepalive_timeout_ms);
    tq_init(&u->q_send, cfg->send_timeout_ms);
    tq_init(&u->q_linger, LINGER_TIMEOUT_MS);
    tq_init(&u->q_body, cfg->body_timeout_ms);
    u->step = (struct step_ctx){.cfg = cfg, .http = &u->http, .slot = u->slot,
                                .alog = u->alog, .route_arg = u};
    int rc = uring_ring_init(&u->ring, RING_ENTRIES);
    if (rc < 0) {
        log_msg(LOG_CRIT, "io_uring is not permitted here (io_uring_queue_init: %s); "
                          "use --model reuseport", strerror(-rc));
        return -1;
    }
    s->ring_ok = 1;
    rc = uring_bufs_init(&u->bufs, &u->ring, 0, RECV_BUFS, RECV_BUF_SIZE);
    u->held_max = RECV_BUFS / 2;
    /* Test-only: HERD_TEST_UNBOUNDED_RECV=1 stands for a kernel without
     * bounded receives, so the suite covers holding too; =refused makes
     * the kernel refuse the first bounded receives as such a kernel does. */
    const char *unbounded = getenv("HERD_TEST_UNBOUNDED_RECV");
    u->recv_bounded = !unbounded ? 1 : !strcmp(unbounded, "1") ? 0
                      : !strcmp(unbounded, "refused") ? URING_RECV_BOUND_REFUSED : 1;
    if (rc < 0) {
        log_msg(LOG_CRIT, "io_uring: cannot register receive buffers: %s", strerror(-rc));
        return -1;
    }
    if (uproxy_create(u) < 0)
        return -1;
    if (u->proxy) {
        u->step.route = uproxy_route;
        u->px.start = uproxy_start;
        u->px.kick = uproxy_kick;
        u->px.abort = uproxy_abort;
        u->px.client_ready = uproxy_client_ready;
        u->px.reads_body = uproxy_reads_body;
    }
    uring_handover_setup(u, env->handover_fd);
    setup_listeners(s);
    if (env->signal_fd >= 0)
        arm_signals(s);
    return 0;
}

/* A worker whose ring still had operations in flight after quiesce_ring:
 * its memory is kept (reachable, so no leak is reported) rather than freed
 * under a kernel that may still use it; the process exits next. */
static struct server *kept_at_exit;

/* Before the ring goes: every operation still in it is cancelled and its
 * completion awaited (for a second at most), so no send, receive or read
 * of the kernel's touches the memory freed next. io_uring_queue_exit
 * alone returns before the kernel has cancelled what is in flight. Called
 * with every connection closed: a send's completion frees its orphan. */
static void quiesce_ring(struct server *s)
{
    struct uring_loop *u = &s->u;
    struct io_uring_sqe *sqe = uring_sqe(&u->ring);
    io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY | IORING_ASYNC_CANCEL_ALL);
    io_uring_sqe_set_data64(sqe, uring_tag(UK_NONE, 0, 0));
    for (int round = 0; round < 50; round++) {
        struct __kernel_timespec ts = {.tv_nsec = 20 * 1000000};
        struct io_uring_cqe *cqe;
        int rc = io_uring_submit_and_wait_timeout(&u->ring, &cqe, 1, &ts, NULL);
        if (rc < 0 && rc != -EINTR && !u->orphans)
            break; /* a quiet 20 ms (-ETIME) with nothing of ours in flight */
        unsigned head, n = 0;
        io_uring_for_each_cqe(&u->ring, head, cqe) {
            uint64_t tag = cqe->user_data;
            struct uconn *none = NULL;
            if (uring_tag_kind(tag) == UK_SEND)
                uout_on_send(u, tag, cqe->res, &none);
            else if (uring_tag_kind(tag) == UK_WARM)
                uout_on_warm(u, tag, cqe->res, &none);
            else if (uring_tag_kind(tag) == UK_ACCEPT && cqe->res >= 0)
                close(cqe->res);
            n++;
        }
        io_uring_cq_advance(&u->ring, n);
    }
    if (u->orphans)
        kept_at_exit = s;
}

static void teardown(struct server *s)
{
    struct uring_loop *u = &s->u;
    for (int fd = 0; u->conns && fd < u->max_fds; fd++)
        if (u->conns[fd].open)
            uconn_close(u, &u->conns[fd]);
    uproxy_destroy(u);
    alog_close(&s->alog); /* the lines of exchanges those closes ended */
    for (int i = 0; i < s->nls; i++)
        if (s->ls[i].fd >= 0)
            close(s->ls[i].fd);
    if (s->ring_ok) {
        quiesce_ring(s);
        io_uring_queue_exit(&u->ring);
        if (kept_at_exit == s)
            return; /* its buffers, file-cache entries, pools and sink stay */
        uring_bufs_destroy(&u->bufs, NULL);
    }
    while (u->orphans) {
        struct uout *o = u->orphans;
        u->orphans = o->next;
        uout_free(u, o);
    }
    if (u->http.fc)
        fc_destroy(u->http.fc);
    bufpool_destroy(&u->inbufs);
    bufpool_destroy(&u->outbufs);
    bufpool_destroy(&u->heldbufs);
    free(u->warm_sink);
    free(u->conns);
}

/* Returns 1 when the loop is done (stopped, or drained while stopping). */
static int round_end(struct server *s)
{
    struct uring_loop *u = &s->u;
    if (s->accept_retry_at && clock_now_ms() >= s->accept_retry_at)
        s->accept_retry_at = 0;
    uproxy_after_round(u);
    expire(u, &u->q_header);
    expire(u, &u->q_keepalive);
    expire(u, &u->q_send);
    expire(u, &u->q_linger);
    expire(u, &u->q_body);
    alog_tick(&s->alog);
    if (u->stopping) {
        /* and not before the master placed what we handed over: what it
         * bounces back is ours to drain */
        if (u->nconns == 0 && uring_handover_settled() && listeners_released(s))
            return 1;
        if (clock_now_ms() >= s->stop_deadline) {
            log_msg(LOG_WARN, "shutdown timeout: closing %u connections", u->nconns);
            return 1;
        }
    }
    make_room(s);
    look_for_lost_wakeups(s);
    sync_accepts(s);
    arm_timeout(s);
    uring_bufs_publish(&u->bufs);
    return 0;
}

int uring_run(const struct serve_config *cfg, const struct worker_env *env)
{
    struct server *s = calloc(1, sizeof *s);
    if (!s)
        log_fatal("out of memory at start");
    for (int i = 0; i < MAX_LISTENERS; i++)
        s->ls[i].fd = -1;
    clock_update();
    if (setup(s, cfg, env) < 0) {
        teardown(s);
        free(s);
        return 1;
    }
    struct uring_loop *u = &s->u;
    SB_SET(u->slot->ready, 1); /* a binary upgrade waits for every worker's */
    while (!round_end(s)) {
        int rc = io_uring_submit_and_wait(&u->ring, 1);
        if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY)
            log_fatal("io_uring_submit_and_wait: %s", strerror(-rc));
        clock_update();
        if (reap(s))
            break;
    }
    teardown(s);
    if (kept_at_exit != s)
        free(s);
    return 0;
}

#include "models/evloop.h"

#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/signals.h"
#include "models/evloop_internal.h"
#include "models/linger.h"
#include "models/sizing.h"
#include "models/upstream_evloop.h"
#include "net/tls_ctx.h"
#include "proc/dispatch.h"
#include "proc/status.h"

#define MAX_EVENTS 512
#define MAX_LISTENERS 64
#define REFUSE_BATCH 1024 /* refusals per wakeup before the loop's other work */
/* Connections per wakeup read at once (conn_open_read); the rest of the
 * backlog joins epoll unread, so a flood of new connections cannot hold
 * the loop away from the connections it already has. */
#define READ_AT_ONCE_MAX 64
/* After a read at once that found nothing, this many connections join
 * epoll unread before the next try. Whether the request is there at
 * accept depends on the client: over loopback a busy wrk writes it well
 * after the handshake (every read at once came back -EAGAIN, one wasted
 * read per connection, bench/RESULTS.md section 13). */
#define READ_SKIP_AFTER_MISS 15

struct listener {
    int fd;
    int tcp;
    int proxy;          /* connections start with a PROXY protocol header */
    int tls;            /* connections speak TLS */
};

struct server {
    struct evloop ev;
    const struct worker_env *env;
    struct sb_slot own_slot; /* used when there is no shared scoreboard */
    struct alog alog;
    struct listener ls[MAX_LISTENERS];
    int nls;
    struct acceptor ac;
    int64_t stop_deadline;
    int64_t accept_retry_at; /* not accepting until then (out of fds), or 0 */
    int listeners_out;       /* at --max-connections: the listeners left our epoll */
    time_t last_limit_log;
};

static int route_of(void *ev, const struct http_request *req)
{
    return proxy_route(ev, req);
}

static void slot_freed(struct evloop *ev)
{
    if (ev->accept_paused)
        ev->accept_resume = 1;
}

/* The client's address is needed by the access log, the proxy
 * (X-Forwarded-For) and the status page's access list. */
static int want_peer(struct server *s)
{
    return alog_on(&s->alog) || s->ev.proxy || s->ev.cfg->http.status_path[0];
}

/* Puts the listeners in our epoll set, or takes them out. A worker at
 * --max-connections leaves the wait queue of a socket it shares with
 * EPOLLEXCLUSIVE (prefork; a shared socket of threads): woken while it
 * waits for timers, it took the one wakeup of each new connection and
 * accepted nothing, so the connections sat in the backlog while the other
 * workers, with room, slept. Added again, a listener reports what its
 * backlog holds. */
static void watch_listeners(struct server *s, int on)
{
    if (s->listeners_out == !on)
        return;
    s->listeners_out = !on;
    for (int i = 0; i < s->nls; i++) {
        if (s->ls[i].fd < 0)
            continue;
        if (!on) {
            loop_del(&s->ev.loop, s->ls[i].fd);
            continue;
        }
        uint32_t events = EPOLLIN | LOOP_EDGE | (s->env->exclusive ? LOOP_EXCLUSIVE : 0);
        if (loop_add(&s->ev.loop, s->ls[i].fd, events, TAG_LISTEN | (uint64_t)i) < 0)
            log_msg(LOG_ERROR, "epoll_ctl: %s", strerror(errno));
    }
}

/* Stops accepting on every listener of this loop until the timer retries
 * (the listeners are edge-triggered, so their events meanwhile are
 * ignored and the backlog waits for the retry). */
static void accept_back_off(struct server *s, int64_t ms)
{
    s->accept_retry_at = clock_now_ms() + ms;
    watch_listeners(s, 0); /* the others take the wakeups meanwhile */
}

/* At --max-connections a client taken in (accepted, or received from the
 * channel) closes the idle connection conn_idle_victim chose for it. */
static void give_place(struct evloop *ev, struct conn *idle)
{
    log_debug("connection %d: idle, closed for a new one (at --max-connections)",
              conn_fd(ev, idle));
    conn_close(ev, idle);
}

/* Accepts until EAGAIN. Out of fds, connections are refused (the spare fd)
 * or, with no spare, accepting stops for a while: never a loop that spins
 * on EMFILE while the connections that would free fds wait. */
static void accept_from(struct server *s, struct listener *l, int from_event)
{
    struct evloop *ev = &s->ev;
    struct sockaddr_storage peer, *pp = want_peer(s) ? &peer : NULL;
    int got = 0, refused = 0;
    while (l->fd >= 0 && !s->accept_retry_at) {
        struct conn *idle = NULL;
        if (ev->nconns >= ev->max_conns && !(idle = conn_idle_victim(ev))) {
            /* Leave the rest in the backlog; a closing connection, one
             * turning idle, or the victim_at timer resumes us. */
            ev->accept_paused = 1;
            watch_listeners(s, 0);
            /* The timer looks again every 50 ms while busy keep-alive
             * clients hold the limit, whether or not anyone waits: the
             * warning is for a client kept waiting, not for each look. */
            if (clock_wall() != s->last_limit_log && net_backlog_waiting(l->fd)) {
                s->last_limit_log = clock_wall();
                log_msg(LOG_WARN, "%u connections: at --max-connections, not accepting",
                        ev->nconns);
            }
            return;
        }
        int fd = net_accept(&s->ac, l->fd, pp);
        if (fd >= 0 && idle)
            give_place(ev, idle);
        if (fd >= 0) {
            got++;
            SB_ADD(ev->slot->accepted, 1);
            /* TLS reads through its handshake; a stopping loop (begin_stop
             * taking its backlog) opens connections as it always did. */
            if (!l->tls && !ev->stopping && got <= READ_AT_ONCE_MAX && !ev->read_skip) {
                ev->read_skip = conn_open_read(ev, fd, l->tcp, l->proxy, pp)
                                    ? 0 : READ_SKIP_AFTER_MISS;
            } else {
                if (ev->read_skip && !l->tls)
                    ev->read_skip--;
                conn_open(ev, fd, l->tcp, l->proxy, l->tls, pp);
            }
            continue;
        }
        if (fd == -EAGAIN) {
            /* Another worker took it (or the herd woke us all): worth counting. */
            if (from_event && !got)
                SB_ADD(ev->slot->empty_wakeups, 1);
            return;
        }
        if (fd == -ECONNREFUSED || fd == -EMFILE) {
            if (clock_wall() != s->last_limit_log) {
                s->last_limit_log = clock_wall();
                log_msg(LOG_CRIT, "out of file descriptors: refusing connections (%ld so far)%s",
                        s->ac.refused, fd == -EMFILE ? "; not accepting for now" : "");
            }
            if (fd == -EMFILE)
                accept_back_off(s, NET_ACCEPT_BACKOFF_MS);
            else if (++refused == REFUSE_BATCH)
                accept_back_off(s, 0); /* a flood: serve the others first */
            continue;
        }
        /* ENOBUFS, ENOMEM...: the backlog may hold more, and no new edge
         * comes for it, so retry on the timer. */
        log_msg(LOG_ERROR, "accept: %s", strerror(-fd));
        accept_back_off(s, NET_ACCEPT_BACKOFF_MS);
        return;
    }
}

/* A flag (PROXY protocol, TLS) of the listener a connection the master
 * passed us came through: only asked when listeners differ, by the
 * connection's local address (a wildcard listener matches any address on
 * its port). */
static int dispatched_flag(struct server *s, int fd, const uint8_t *flag)
{
    const struct serve_config *cfg = s->ev.cfg;
    int some = 0, all = 1;
    for (int i = 0; i < cfg->nlisten; i++) {
        some |= flag[i];
        all &= flag[i];
    }
    if (!some || all)
        return some;
    struct sockaddr_storage me;
    socklen_t len = sizeof me;
    if (getsockname(fd, (struct sockaddr *)&me, &len) < 0)
        return 0;
    for (int i = 0; i < cfg->nlisten; i++) {
        const struct sockaddr_storage *l = &cfg->listen[i].ss;
        if (l->ss_family != me.ss_family)
            continue;
        if (me.ss_family == AF_INET) {
            const struct sockaddr_in *a = (const void *)l, *b = (const void *)&me;
            if (a->sin_port == b->sin_port &&
                (a->sin_addr.s_addr == INADDR_ANY || a->sin_addr.s_addr == b->sin_addr.s_addr))
                return flag[i];
        } else if (me.ss_family == AF_INET6) {
            const struct sockaddr_in6 *a = (const void *)l, *b = (const void *)&me;
            if (a->sin6_port == b->sin6_port &&
                (IN6_IS_ADDR_UNSPECIFIED(&a->sin6_addr) ||
                 IN6_ARE_ADDR_EQUAL(&a->sin6_addr, &b->sin6_addr)))
                return flag[i];
        }
    }
    return 0;
}

/* dispatch: connections accepted by the master arrive over the channel. */
static void receive_connections(struct server *s)
{
    struct evloop *ev = &s->ev;
    int fds[64];
    for (;;) {
        /* At --max-connections the rest wait in the channel (and the master
         * routes new ones to other workers); a closing connection resumes us. */
        uint32_t room = ev->max_conns > ev->nconns ? ev->max_conns - ev->nconns : 0;
        struct conn *idle = NULL;
        if (!room && !(idle = conn_idle_victim(ev))) {
            ev->accept_paused = 1;
            SB_SET(ev->slot->full, 1);
            return;
        }
        unsigned lost;
        int n = dispatch_receive(s->env->channel_fd, fds, idle ? 1 : room < 64 ? (int)room : 64,
                                 &lost);
        if (n > 0 && idle)
            give_place(ev, idle);
        if (lost) {
            /* Taken from the channel all the same: the master reads what a
             * worker took by its accepted count (proc/dispatch.c), and one
             * left behind by these looked loaded for good, so rr and least
             * passed it over (after an fd flood one worker got nothing). */
            SB_ADD(ev->slot->accepted, lost);
            s->ac.refused += lost;
            if (clock_wall() != s->last_limit_log) {
                s->last_limit_log = clock_wall();
                log_msg(LOG_CRIT, "out of file descriptors: refusing connections (%ld so far); "
                        "the master's were closed on arrival", s->ac.refused);
            }
        }
        if (n <= 0) {
            if (n == 0 && !ev->stopping) {
                /* The master dropped us (reload or stop): serve what we have. */
                loop_del(&ev->loop, s->env->channel_fd);
            }
            return;
        }
        for (int i = 0; i < n; i++) {
            /* Passed to us just before a reload: served, then it moves on
             * once idle (its request may be on the wire). On a stop it closes. */
            if (ev->stopping && !ev->handing_over) {
                close(fds[i]);
                continue;
            }
            SB_ADD(ev->slot->accepted, 1);
            struct sockaddr_storage peer;
            socklen_t plen = sizeof peer;
            int have_peer = want_peer(s) &&
                            getpeername(fds[i], (struct sockaddr *)&peer, &plen) == 0;
            const struct serve_config *cfg = ev->cfg;
            conn_open(ev, fds[i], 1, dispatched_flag(s, fds[i], cfg->listen_proxy),
                      dispatched_flag(s, fds[i], cfg->listen_tls), have_peer ? &peer : NULL);
        }
        if (n < 64 && (uint32_t)n < room)
            return;
    }
}

static void accept_all(struct server *s)
{
    s->ev.accept_paused = 0;
    if (SB_GET(s->ev.slot->full))
        SB_SET(s->ev.slot->full, 0);
    watch_listeners(s, 1);
    for (int i = 0; i < s->nls; i++)
        accept_from(s, &s->ls[i], 0);
    if (s->env->channel_fd >= 0)
        receive_connections(s);
}

static void close_idle(struct evloop *ev, struct timerq *q)
{
    struct tq_node *n = q->head.next;
    while (n != &q->head) {
        struct tq_node *next = n->next;
        conn_close(ev, container_of(n, struct conn, timer));
        n = next;
    }
}

/* Graceful stop: no new connections, idle ones closed now, busy ones closed
 * after their current response (may_keepalive is off while stopping).
 * On a reload (hand_over) idle connections move to the new generation
 * instead, and busy ones once they are idle (models/conn_handover.c). */
static void begin_stop(struct server *s, int hand_over)
{
    struct evloop *ev = &s->ev;
    if (ev->stopping && ev->handing_over && !hand_over) {
        /* TERM after a HUP: the server stops, nothing is handed over now */
        ev->handing_over = 0;
        close_idle(ev, &ev->q_keepalive);
    }
    if (ev->stopping)
        return;
    ev->stopping = 1;
    ev->handing_over = hand_over && ev->ho_fd >= 0;
    s->stop_deadline = clock_now_ms() + ev->cfg->shutdown_timeout_ms;
    /* The listen sockets live on in the next generation (reload, upgrade),
     * so close() alone would leave them in our epoll: an exclusive waiter
     * that swallows wakeups meant for the new workers, and a connection
     * left in the backlog until the next one comes (a client that waits
     * timed out). Leave the wait queue first, then take what we may
     * already have been woken for: from here every wakeup goes to the
     * others. */
    for (int i = 0; i < s->nls; i++) {
        if (s->ls[i].fd < 0)
            continue;
        loop_del(&ev->loop, s->ls[i].fd);
        accept_from(s, &s->ls[i], 0);
        close(s->ls[i].fd);
        s->ls[i].fd = -1;
    }
    /* Idle keep-alive connections close now. Fresh ones without a byte yet
     * stay: their request may be on its way, and it gets its answer (with
     * Connection: close) or the header timeout, within the stop deadline.
     * On a reload both move to the new generation instead. */
    if (ev->handing_over)
        conn_handover_retry(ev);
    else
        close_idle(ev, &ev->q_keepalive);
    log_debug("stopping: %u connections to finish", ev->nconns);
}

/* Returns 1 to stop at once. */
static int on_signals(struct server *s, int sfd)
{
    int sig;
    while ((sig = signals_read(sfd)) > 0) {
        switch (sig) {
        case SIGTERM:
        case SIGINT:
            begin_stop(s, 0);
            break;
        case SIGHUP: /* from the master: a reload */
            if (s->ev.ho_fd >= 0) {
                begin_stop(s, 1);
                break;
            }
            log_msg(LOG_NOTICE, "signal %d ignored (no master process in this mode)", sig);
            break;
        case SIGQUIT:
            log_msg(LOG_NOTICE, "SIGQUIT: exiting at once");
            return 1;
        case SIGCHLD:
            break;
        case SIGUSR1: { /* --model single: no master reopens the error log for us */
            int rc = log_reopen(-1, -1);
            if (rc < 0)
                log_msg(LOG_ERROR, "error log: cannot reopen it: %s (keeping the old file)",
                        strerror(-rc));
            else
                log_msg(LOG_NOTICE, "reopened the error log");
            break;
        }
        default:
            log_msg(LOG_NOTICE, "signal %d ignored (no master process in this mode)", sig);
            break;
        }
    }
    return 0;
}

static void expire(struct evloop *ev, struct timerq *q)
{
    struct tq_node *n;
    while ((n = tq_pop_expired(q, clock_now_ms())) != NULL)
        conn_timeout(ev, container_of(n, struct conn, timer));
}

static int next_timeout(struct server *s)
{
    struct evloop *ev = &s->ev;
    int64_t next = -1;
    struct timerq *qs[] = {&ev->q_header, &ev->q_keepalive, &ev->q_send, &ev->q_linger,
                           &ev->q_body};
    for (size_t i = 0; i < sizeof qs / sizeof qs[0]; i++) {
        int64_t d = tq_next_deadline(qs[i]);
        if (d >= 0 && (next < 0 || d < next))
            next = d;
    }
    int64_t p = proxy_next_deadline(ev);
    if (p >= 0 && (next < 0 || p < next))
        next = p;
    if (ev->stopping && (next < 0 || s->stop_deadline < next))
        next = s->stop_deadline;
    if (s->accept_retry_at && !ev->stopping && (next < 0 || s->accept_retry_at < next))
        next = s->accept_retry_at;
    if (ev->accept_paused && ev->victim_at && !ev->stopping
        && (next < 0 || ev->victim_at < next))
        next = ev->victim_at;
    int64_t log_due = alog_due_ms(&s->alog);
    if (log_due >= 0 && (next < 0 || log_due < next))
        next = log_due;
    int retry = conn_handover_retry(ev);
    /* Done but for acknowledgements: another thread of the process may be
     * the one that reads them, and nothing would wake us. Once they are in
     * (another loop read them after our exit check), go round at once to
     * leave: sleeping to the stop deadline kept a reload 5 s on threads. */
    if (ev->stopping && ev->nconns == 0)
        retry = conn_handover_settled() ? 0 : retry >= 0 && retry < 10 ? retry : 10;
    if (retry >= 0 && (next < 0 || clock_now_ms() + retry < next))
        next = clock_now_ms() + retry;
    if (next < 0)
        return -1;
    int64_t wait = next - clock_now_ms();
    /* COARSE clocks tick every few ms: round up so we never spin early. */
    return wait <= 0 ? 0 : (int)(wait > 60000 ? 60000 : wait + 5);
}

static int setup(struct server *s, const struct serve_config *cfg, const struct worker_env *env)
{
    struct evloop *ev = &s->ev;
    ev->cfg = cfg;
    s->env = env;
    ev->slot = env->slot ? env->slot : &s->own_slot;
    alog_init(&s->alog, env->log_fd, cfg->access_log_format, ev->slot);
    ev->alog = &s->alog;
    ev->max_fds = sizing_fd_limit();
    int loops = env->loops_in_process > 1 ? env->loops_in_process : 1;
    ev->loops = loops;
    ev->loop_index = env->loop_index;
    ev->max_conns = sizing_max_conns(cfg, ev->max_fds, loops, env->loop_index);
    ev->conns = calloc((size_t)ev->max_fds, sizeof *ev->conns);
    ev->in_cap = sizing_in_cap(cfg);
    ev->rbuf = malloc(ev->in_cap);
    ev->out.cap = 65536 + sizing_out_cap(cfg); /* heads of a pipelined batch */
    ev->out.buf = malloc(ev->out.cap);
    if (!ev->conns || !ev->rbuf || !ev->out.buf)
        log_fatal("out of memory at start");
    bufpool_init(&ev->inbufs, ev->in_cap, 256);

    struct filecache_limits lim = sizing_file_cache(ev->max_fds, loops);
    ev->http.cfg = &cfg->http;
    ev->http.status = status_page;
    ev->http.status_arg = (void *)env->sb;
    ev->http.routes = cfg->routes;
    ev->http.nroutes = cfg->nroutes;
    ev->http.fc = fc_create(cfg->docroot, &lim);
    if (!ev->http.fc) {
        log_msg(LOG_CRIT, "cannot open docroot %s: %s", cfg->docroot, strerror(errno));
        return -1;
    }
    tq_init(&ev->q_header, cfg->header_timeout_ms);
    tq_init(&ev->q_keepalive, cfg->keepalive_timeout_ms);
    tq_init(&ev->q_send, cfg->send_timeout_ms);
    tq_init(&ev->q_linger, LINGER_TIMEOUT_MS);
    tq_init(&ev->q_body, cfg->body_timeout_ms);
    ev->tls_ctx = env->tls ? tls_server_ctx(env->tls) : NULL;
    proxy_create(ev);
    ev->hooks = (struct conn_hooks){.slot_freed = slot_freed, .proxy_start = proxy_start,
                                    .proxy_kick = proxy_kick,
                                    .proxy_client_event = proxy_client_event,
                                    .proxy_abort = proxy_abort,
                                    .hand_over = conn_hand_over};
    ev->step = (struct step_ctx){.cfg = cfg, .http = &ev->http, .slot = ev->slot,
                                 .alog = ev->alog, .route = ev->proxy ? route_of : NULL,
                                 .route_arg = ev};

    if (loop_init(&ev->loop) < 0)
        log_fatal("epoll_create1: %s", strerror(errno));
    conn_warm_setup(ev);
    acceptor_init(&s->ac);
    for (int i = 0; env->listen_fds && i < cfg->nlisten && i < MAX_LISTENERS; i++) {
        s->ls[i].fd = env->listen_fds[i * (env->nthreads > 0 ? env->nthreads : 1)];
        s->ls[i].tcp = cfg->listen[i].family != AF_UNIX;
        s->ls[i].proxy = cfg->listen_proxy[i];
        s->ls[i].tls = cfg->listen_tls[i];
        if (s->ls[i].tls && !ev->tls_ctx)
            log_fatal("listener %s: TLS without a context", cfg->listen[i].text);
        /* Edge-triggered: every wakeup accepts until EAGAIN (accept_from).
         * A socket shared with other workers wakes only one of them. */
        uint32_t events = EPOLLIN | LOOP_EDGE | (env->exclusive ? LOOP_EXCLUSIVE : 0);
        if (loop_add(&ev->loop, s->ls[i].fd, events, TAG_LISTEN | (uint64_t)i) < 0)
            log_fatal("epoll_ctl: %s", strerror(errno));
        s->nls++;
    }
    if (env->channel_fd >= 0 &&
        loop_add(&ev->loop, env->channel_fd, EPOLLIN | LOOP_EDGE, TAG_CHANNEL) < 0)
        log_fatal("epoll_ctl: %s", strerror(errno));
    ev->ho_fd = env->handover_fd;
    /* Level-triggered: rare, and every loop of a process reads it. */
    if (ev->ho_fd >= 0 && loop_add(&ev->loop, ev->ho_fd, EPOLLIN, TAG_HANDOVER) < 0)
        log_fatal("epoll_ctl: %s", strerror(errno));
    int sfd = env->signal_fd;
    if (sfd >= 0 && loop_add(&ev->loop, sfd, LOOP_IN, TAG_SIGNAL) < 0)
        log_fatal("epoll_ctl: %s", strerror(errno));
    return 0;
}

static void teardown(struct server *s)
{
    struct evloop *ev = &s->ev;
    /* Clients first: each takes its exchange's upstream connection along;
     * then the pooled ones. */
    for (int fd = 0; fd < ev->max_fds; fd++)
        if (ev->conns[fd].open)
            conn_close(ev, &ev->conns[fd]);
    proxy_destroy(ev);
    alog_close(&s->alog); /* the lines of exchanges those closes ended */
    warm_ring_close(&ev->warm);
    conn_yields_free(ev);
    for (int i = 0; i < s->nls; i++)
        if (s->ls[i].fd >= 0)
            close(s->ls[i].fd);
    if (ev->http.fc)
        fc_destroy(ev->http.fc);
    acceptor_close(&s->ac);
    loop_close(&ev->loop);
    bufpool_destroy(&ev->inbufs);
    free(ev->conns);
    free(ev->rbuf);
    free(ev->out.buf);
}

/* A cold file window is in the page cache now (models/conn_warm.c). */
static void window_read_in(void *arg, uint64_t tag, int res)
{
    (void)res;
    struct evloop *ev = arg;
    struct conn *c = conn_warm_done(ev, tag);
    if (c)
        conn_writable(ev, c);
}

/* The first n connections whose turn ended (before this round's wait) go
 * on; those that end a turn now wait for the next round (conn_turn.c). */
static void run_yields(struct evloop *ev, int n)
{
    for (int i = 0; i < n; i++) {
        struct conn *c = conn_yield_take(ev, i);
        if (c)
            conn_writable(ev, c);
    }
    conn_yields_drop(ev, n);
}

int evloop_run(const struct serve_config *cfg, const struct worker_env *env)
{
    int sfd = env->signal_fd;
    struct server *s = calloc(1, sizeof *s);
    if (!s)
        log_fatal("out of memory at start");
    clock_update();
    int status = 0;
    if (setup(s, cfg, env) < 0) {
        teardown(s);
        free(s);
        return 1;
    }
    struct evloop *ev = &s->ev;
    SB_SET(ev->slot->ready, 1); /* a binary upgrade waits for every worker's */
    struct epoll_event events[MAX_EVENTS];
    for (;;) {
        /* connections whose turn ended go on after this round: no sleep */
        int yields_due = ev->nyields;
        int n = loop_wait(&ev->loop, events, MAX_EVENTS, yields_due ? 0 : next_timeout(s));
        clock_update();
        if (n < 0 && n != -EINTR)
            log_fatal("epoll_wait: %s", strerror(-n));
        for (int i = 0; i < n; i++) {
            uint64_t tag = events[i].data.u64;
            if (tag & TAG_LISTEN) {
                if (!ev->stopping)
                    accept_from(s, &s->ls[tag & 0xffff], 1);
            } else if (tag == TAG_HANDOVER) {
                conn_handover_receive(ev);
            } else if (tag == TAG_WARM) {
                warm_ring_reap(&ev->warm, window_read_in, ev);
            } else if (tag & TAG_CHANNEL) {
                receive_connections(s);
            } else if (tag & TAG_SIGNAL) {
                if (on_signals(s, sfd))
                    goto out;
            } else if (tag & TAG_UPSTREAM) {
                proxy_upstream_event(ev, tag, events[i].events);
            } else {
                struct conn *c = &ev->conns[(uint32_t)tag];
                /* An event for an fd closed (and maybe reused) earlier in
                 * this batch carries the old generation: drop it. */
                if (c->open && c->gen == tag_gen(tag))
                    conn_event(ev, c, events[i].events);
            }
        }
        if (yields_due)
            run_yields(ev, yields_due);
        expire(ev, &ev->q_header);
        expire(ev, &ev->q_keepalive);
        expire(ev, &ev->q_send);
        expire(ev, &ev->q_linger);
        expire(ev, &ev->q_body);
        proxy_after_events(ev);
        /* After the timers: a header timeout that closes every connection
         * frees the slots a paused accept waits for, and the listener's or
         * channel's edge came long ago; checked before them, the resume
         * waited for an event that never came (a dispatch worker sat idle
         * with connections queued in its channel). */
        if (s->accept_retry_at && clock_now_ms() >= s->accept_retry_at) {
            s->accept_retry_at = 0;
            ev->accept_resume = 1;
        }
        if (ev->accept_paused && ev->victim_at && clock_now_ms() >= ev->victim_at) {
            ev->victim_at = 0;
            ev->accept_resume = 1;
        }
        if (ev->accept_resume) {
            ev->accept_resume = 0;
            if (!ev->stopping)
                accept_all(s);
        }
        alog_tick(&s->alog);
        if (ev->stopping) {
            /* and not before the master placed what we handed over: what
             * it bounces back is ours to drain */
            if (ev->nconns == 0 && conn_handover_settled())
                break;
            if (clock_now_ms() >= s->stop_deadline) {
                log_msg(LOG_WARN, "shutdown timeout: closing %u connections", ev->nconns);
                break;
            }
        }
    }
out:
    teardown(s);
    free(s);
    return status;
}

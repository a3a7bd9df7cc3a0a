/* The iterative model: the baseline. One worker serves one connection at a
 * time with blocking calls: wait for a connection, read a request, write
 * the response, repeat until the client is done, then take the next.
 *
 * Its weakness is the point of the lab: one slow client stalls everyone
 * queued behind it. The header and keep-alive timeouts bound how long (a
 * client trickling bytes is cut off), so the server cannot stall forever.
 * Waits use poll() on the socket and the signal fd, so TERM and QUIT are
 * still seen while a connection is open; the socket stays non-blocking,
 * so every wait has a deadline: the header timeout counts from accept
 * (also for a connection queued behind others), the send timeout from the
 * last byte the kernel took.
 *
 * Each wakeup accepts until EAGAIN into a FIFO (bounded) and then serves
 * those connections one by one: accepting one per wakeup would leave the
 * kernel's backlog full during a burst, and SYNs dropped there come back
 * only after TCP's retransmission backoff (1 s, 3 s, 7 s...).
 *
 * A graceful stop (TERM, and so a reload or an upgrade) accepts no more
 * but drains: every connection already in the FIFO is served (its clients
 * have sent their requests, and a close would reset them), each answer
 * with Connection: close. A connection found idle between requests when
 * the stop comes goes to the back of the FIFO, so it does not hold up
 * those behind it, and gets its next request answered when its turn comes
 * again (until --shutdown-timeout, when the master ends the worker). */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/signals.h"
#include "models/linger.h"
#include "models/models.h"
#include "models/plan_write.h"
#include "models/sizing.h"
#include "models/step.h"
#include "net/accept.h"
#include "proc/accesslog.h"
#include "proc/status.h"

#define ITER_QUEUE 1024

struct pending_conn {
    int fd;
    int tcp;
    int listener;
    int64_t accepted_ms;
    struct sockaddr_storage peer;
    uint8_t parked;         /* idle when the stop came: sc holds its state */
    uint8_t was_parked;     /* ...once: its next turn waits for its request */
    struct step_conn sc;
};

/* What serve_connection left of a connection. */
enum served { SERVED_DONE, SERVED_PARKED };

struct iter {
    const struct serve_config *cfg;
    const struct worker_env *env;
    struct http_ctx http;
    struct step_ctx step;
    struct sb_slot *slot, own_slot;
    struct alog *alog;
    size_t cap, out_cap;
    char *in, *out;
    struct http_request req;
    int stop;          /* 1 graceful, 2 at once */
    int others_queued; /* connections wait in the FIFO behind this one */
    int waited;        /* since the socket was last read dry, an answer waited for
                        * room: input may have come meanwhile */
};

static void check_signals(struct iter *it)
{
    int sig;
    while ((sig = signals_read(it->env->signal_fd)) > 0) {
        if (sig == SIGQUIT)
            it->stop = 2;
        else if ((sig == SIGTERM || sig == SIGINT) && !it->stop)
            it->stop = 1;
    }
    it->step.stopping = (uint8_t)(it->stop != 0); /* answers from now on close */
}

/* Waits until fd has any of events or the clock reaches deadline_ms;
 * signals are taken meanwhile. 1 ready, 0 deadline or stop at once, -1
 * error, 2 (may_park: an idle connection with others queued) a graceful
 * stop: the connection waits at the back instead. A deadline already past
 * still reports what is ready now. */
static int wait_fd_or_park(struct iter *it, int fd, short events, int64_t deadline_ms,
                           int may_park)
{
    for (;;) {
        if (may_park && it->stop)
            return 2;
        struct pollfd p[2] = {{.fd = fd, .events = events},
                              {.fd = it->env->signal_fd, .events = POLLIN}};
        int64_t left = deadline_ms - clock_now_ms();
        int n = poll(p, 2, left > 0 ? (int)(left < INT32_MAX ? left : INT32_MAX) : 0);
        clock_update();
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (p[1].revents)
            check_signals(it);
        if (it->stop == 2)
            return 0;
        if (p[0].revents)
            return 1;
        if (clock_now_ms() >= deadline_ms)
            return 0;
    }
}

static int wait_fd(struct iter *it, int fd, short events, int64_t deadline_ms)
{
    return wait_fd_or_park(it, fd, events, deadline_ms, 0);
}

/* Waits for room in the socket's send buffer: the send timeout counts
 * from the last progress, whether one call or many made it. */
static int wait_writable(void *arg, int fd)
{
    struct iter *it = arg;
    it->waited = 1;
    return wait_fd(it, fd, POLLOUT, clock_now_ms() + it->cfg->send_timeout_ms) > 0 ? 0 : -1;
}

/* After an answer that closes while the peer may still send: plan_write
 * shut our side; read and drop until the peer closes, so the close sends
 * no reset that could destroy the answer's unsent tail (models/linger.h).
 * This connection holds the worker meanwhile, as a slow one does. */
static void linger(struct iter *it, int fd)
{
    shutdown(fd, SHUT_WR); /* done already after an answer that said close */
    int64_t deadline = clock_now_ms() + LINGER_TIMEOUT_MS;
    for (int i = 0; i < LINGER_READS_MAX * 16; i++) {
        ssize_t n = recv(fd, it->in, it->cap, MSG_DONTWAIT);
        if (n > 0)
            SB_ADD(it->slot->bytes_in, (uint64_t)n); /* read from the client all the same */
        if (n > 0 || (n < 0 && errno == EINTR))
            continue;
        if (n < 0 && errno == EAGAIN && wait_fd(it, fd, POLLIN, deadline) > 0)
            continue;
        return;
    }
}

/* Serves one connection to its end through the request step, writing
 * each answer before the next request is parsed (so a pipelining client
 * that does not read holds no more than one response). pp: a PROXY
 * protocol header comes first. SERVED_PARKED: idle at a graceful stop
 * with others queued; pc keeps its state for a later turn. */
static enum served serve_connection(struct iter *it, struct pending_conn *pc, int pp)
{
    const struct serve_config *cfg = it->cfg;
    int fd = pc->fd;
    struct step_conn *scp = &pc->sc;
    if (!pc->parked)
        step_conn_init(scp, &it->step, pc->tcp ? &pc->peer : NULL, !pc->tcp, pp);
    pc->parked = 0;
    it->step.stopping = (uint8_t)(it->stop != 0);
    size_t len = 0;
    it->waited = 0;
    /* From accept, not from now: a connection that waited in our queue
     * behind a slow one has used that time (docs/SPEC-serve.md). */
    int64_t head_deadline = pc->accepted_ms + cfg->header_timeout_ms;
    /* One connection at a time: a file goes whole, cold or not. */
    const struct plan_waits waits = {.room = wait_writable, .arg = it};
    for (;;) {
        size_t pos = 0;
        for (;;) {
            struct http_out out = {it->out, 0, it->out_cap};
            struct step_result r;
            int in_body = step_in_body(scp);
            enum step_action a = step_next(&it->step, scp, it->in + pos, len - pos, &it->req,
                                           &out, &r);
            pos += r.used;
            if (in_body && !step_in_body(scp)) /* the next head's time starts now */
                head_deadline = clock_now_ms() + cfg->header_timeout_ms;
            if (a == STEP_MORE)
                break;
            if (a != STEP_ANSWER) {
                /* no upstream routes on iterative: only STEP_CLOSE; after a
                 * broken body, drain first (the step set linger) */
                if (scp->linger)
                    linger(it, fd);
                return SERVED_DONE;
            }
            uint64_t sent = 0;
            plan_inline_body(&out, &r.plan); /* one buffer: a send (plan_write.h) */
            int rc = plan_write(fd, NULL, &out, &r.plan, &waits, &sent);
            /* input that came while answers waited for room would reset
             * the close; answers written at once leave a window of
             * microseconds, not worth a peek per connection (as the event
             * loop judges it, conn.c finish_closing) */
            if (r.plan.file)
                fc_release(r.plan.file);
            head_deadline = clock_now_ms() + cfg->header_timeout_ms;
            if (r.body_started) /* its clock starts once its head is answered */
                body_clock_start(&scp->body, clock_now_ms());
            alog_flush(it->alog);
            if (rc < 0)
                return SERVED_DONE;
            SB_ADD(it->slot->bytes_out, sent);
            if (r.plan.close && (r.plan.linger || (it->waited && linger_input_waiting(fd))))
                linger(it, fd);
            if (r.plan.close)
                return SERVED_DONE;
        }
        memmove(it->in, it->in + pos, len - pos);
        len -= pos;
        /* Idle between requests: the keep-alive timeout; inside a head: the
         * header timeout (the first head is due a header timeout after
         * accept); inside a body: the body clock. */
        int64_t now = clock_now_ms();
        int idle = !len && !step_in_body(scp) && scp->nreq > 0;
        int64_t until = idle ? now + cfg->keepalive_timeout_ms
                        : step_in_body(scp)
                            ? body_clock_deadline(&scp->body, cfg->body_timeout_ms,
                                                  cfg->body_min_rate)
                            : head_deadline;
        if (idle)
            head_deadline = until + cfg->header_timeout_ms;
        int may_park = idle && it->others_queued && !pc->was_parked;
        int w = wait_fd_or_park(it, fd, POLLIN, until, may_park);
        if (w == 2) {
            pc->parked = pc->was_parked = 1; /* its next request waits for its next turn */
            return SERVED_PARKED;
        }
        if (w <= 0)
            return SERVED_DONE;
        ssize_t n = recv(fd, it->in + len, it->cap - len, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (n <= 0)
            return SERVED_DONE;
        if (idle)
            head_deadline = clock_now_ms() + cfg->header_timeout_ms;
        if ((size_t)n < it->cap - len)
            it->waited = 0; /* read dry: what came during a wait is in */
        len += (size_t)n;
        SB_ADD(it->slot->bytes_in, (uint64_t)n);
    }
}

int iterative_run(const struct serve_config *cfg, const struct worker_env *env)
{
    static struct iter it;
    static struct alog alog;
    it.cfg = cfg;
    it.env = env;
    it.slot = env->slot ? env->slot : &it.own_slot;
    it.cap = sizing_in_cap(cfg);
    it.in = malloc(it.cap);
    it.out_cap = sizing_out_cap(cfg);
    it.out = malloc(it.out_cap);
    struct filecache_limits lim = sizing_file_cache(sizing_fd_limit(), 1);
    it.http.cfg = &cfg->http;
    it.http.status = status_page;
    it.http.status_arg = (void *)env->sb;
    it.http.fc = fc_create(cfg->docroot, &lim);
    if (!it.in || !it.out || !it.http.fc) {
        log_msg(LOG_CRIT, "iterative: cannot start: %s", strerror(errno));
        return 1;
    }
    alog_init(&alog, env->log_fd, cfg->access_log_format, it.slot);
    it.alog = &alog;
    it.step = (struct step_ctx){.cfg = cfg, .http = &it.http, .slot = it.slot, .alog = &alog};
    struct acceptor ac;
    acceptor_init(&ac);
    /* Each queued connection holds its fd while it waits its turn: no more
     * than --max-connections (or the fd table's default) are taken, as on
     * the other models; the rest wait in the backlog. */
    uint32_t max_conns = sizing_max_conns(cfg, sizing_fd_limit(), 1, 0);
    int take = max_conns < ITER_QUEUE ? (int)max_conns : ITER_QUEUE;
    int nl = cfg->nlisten;
    struct pollfd p[CONFIG_MAX_LISTEN + 1];
    for (int l = 0; l < nl; l++)
        p[l] = (struct pollfd){.fd = env->listen_fds[l * env->nthreads], .events = POLLIN};
    p[nl] = (struct pollfd){.fd = env->signal_fd, .events = POLLIN};
    clock_update();
    SB_SET(it.slot->ready, 1);
    while (!it.stop) {
        int n = poll(p, (nfds_t)nl + 1, -1);
        if (n < 0 && errno != EINTR)
            break;
        clock_update();
        if (p[nl].revents)
            check_signals(&it);
        static struct pending_conn queue[ITER_QUEUE];
        int nq = 0;
        for (int l = 0; l < nl && !it.stop; l++) {
            if (!p[l].revents)
                continue;
            int tcp = cfg->listen[l].family != AF_UNIX;
            int got = 0;
            while (nq < take) {
                int fd = net_accept(&ac, p[l].fd, &queue[nq].peer);
                if (fd == -EMFILE) {
                    /* No fd to refuse with: the listener stays readable,
                     * so wait (for a signal at most) instead of spinning. */
                    struct pollfd sp = p[nl];
                    poll(&sp, 1, NET_ACCEPT_BACKOFF_MS);
                }
                if (fd < 0)
                    break;
                queue[nq].fd = fd;
                queue[nq].tcp = tcp;
                queue[nq].listener = l;
                queue[nq].accepted_ms = clock_now_ms();
                queue[nq].parked = queue[nq].was_parked = 0;
                nq++;
                got++;
                SB_ADD(it.slot->accepted, 1);
            }
            if (!got)
                SB_ADD(it.slot->empty_wakeups, 1);
        }
        /* Each connection accepted is served, also after a graceful stop
         * (its client has sent; a close would reset it). One idle at a
         * stop goes to the back: nq grows, by at most one per connection. */
        for (int i = 0; i < nq; i++) {
            struct pending_conn *pc = &queue[i];
            if (it.stop != 2) {
                SB_SET(it.slot->active, (uint64_t)(nq - i));
                clock_update();
                it.others_queued = i + 1 < nq;
                if (serve_connection(&it, pc, cfg->listen_proxy[pc->listener]) ==
                        SERVED_PARKED &&
                    nq < ITER_QUEUE) {
                    queue[nq++] = *pc;
                    continue;
                }
            }
            close(pc->fd);
        }
        SB_SET(it.slot->active, 0);
    }
    acceptor_close(&ac);
    alog_close(&alog); /* a batch the logger would not take yet is counted */
    fc_destroy(it.http.fc);
    free(it.in);
    free(it.out);
    return 0;
}

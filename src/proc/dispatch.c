#include "proc/dispatch.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "net/accept.h"

#define HELD_MAX 64 /* connections held while no worker can take one (>= 1) */
#define RETRY_MS 10 /* while holding: the next try, if no channel's EPOLLOUT comes first */
/* A worker that took nothing from its channel for this long while
 * connections waited there is stalled (stopped, swapped out, looping, or at
 * --max-connections): what waits is taken back and passed on. A working
 * loop drains its channel within milliseconds. */
#define STALL_MS 1000
#define STALL_CHECK_MS 250 /* how often channels with waiting connections are looked at */

struct channel {
    int fd;            /* master's end, -1 when unused */
    int rescue;        /* a copy of the worker's end, -1 when none: what its
                        * worker never took is taken back when it exits */
    uint8_t blocked;   /* last send hit EAGAIN */
    uint64_t sent;     /* connections passed; the worker counts what it took */
    uint64_t watch_taken;  /* its accepted count when watch_since began */
    int64_t watch_since;   /* since when connections wait and none was taken, or 0 */
    uint8_t stalled;       /* found stalled: given nothing taken back from another
                            * until its accepted count moves past stalled_taken */
    uint64_t stalled_taken;
};


struct held {
    int fd;
    int64_t since_ms;
};

struct dispatch {
    struct loop *loop;
    struct scoreboard *sb;
    int least;
    int64_t hold_max_ms;             /* a held connection is closed after this */
    int nlisten;
    int listen_fds[16];
    int paused;                      /* listen sockets removed from the loop */
    int64_t accept_retry_at;         /* out of fds: not accepting until then, or 0 */
    int next;                        /* round-robin cursor */
    struct acceptor ac;
    struct channel ch[SB_MAX_SLOTS];
    struct held held[HELD_MAX];
    int nheld;
    long shed;                       /* held connections closed past hold_max_ms */
    time_t last_held_log, last_shed_log, last_accept_log, last_stall_log;
};

struct dispatch *dispatch_create(struct loop *l, const int *listen_fds, const int *tcp, int n,
                                 struct scoreboard *sb, int least, int64_t hold_max_ms)
{
    (void)tcp;
    struct dispatch *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->loop = l;
    d->sb = sb;
    d->least = least;
    d->hold_max_ms = hold_max_ms;
    d->nlisten = n > 16 ? 16 : n;
    for (int i = 0; i < SB_MAX_SLOTS; i++)
        d->ch[i].fd = d->ch[i].rescue = -1;
    acceptor_init(&d->ac);
    for (int i = 0; i < d->nlisten; i++) {
        d->listen_fds[i] = listen_fds[i];
        /* Level-triggered: a wakeup we do not finish comes back. */
        if (loop_add(l, listen_fds[i], EPOLLIN, DISPATCH_TAG_LISTEN | (uint64_t)i) < 0)
            log_fatal("epoll_ctl: %s", strerror(errno));
    }
    return d;
}

int dispatch_channel(struct dispatch *d, int slot)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return -errno;
    if (d->ch[slot].fd >= 0)
        dispatch_drop(d, slot);
    dispatch_exited(d, slot, 0);
    /* Every send uses MSG_DONTWAIT: the master never blocks on a worker. */
    d->ch[slot].fd = sv[0];
    d->ch[slot].rescue = fcntl(sv[1], F_DUPFD_CLOEXEC, 0); /* -1: none, as before */
    d->ch[slot].blocked = 0;
    d->ch[slot].sent = SB_GET(d->sb->slots[slot].accepted);
    d->ch[slot].watch_since = 0;
    d->ch[slot].stalled = 0;
    if (loop_add(d->loop, sv[0], EPOLLOUT | EPOLLET, DISPATCH_TAG_CHANNEL | (uint64_t)slot) < 0)
        log_msg(LOG_ERROR, "epoll_ctl channel: %s", strerror(errno));
    return sv[1];
}

void dispatch_drop(struct dispatch *d, int slot)
{
    if (d->ch[slot].fd < 0)
        return;
    close(d->ch[slot].fd);
    d->ch[slot].fd = -1;
}

/* Sends one fd; 0 sent, -EAGAIN full, other -errno broken. */
static int send_fd(int ch, int fd)
{
    char byte = 'c';
    struct iovec iov = {&byte, 1};
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } u;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                       .msg_controllen = sizeof u.buf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof(int));
    for (;;) {
        if (sendmsg(ch, &m, MSG_DONTWAIT | MSG_NOSIGNAL) == 1)
            return 0;
        if (errno != EINTR)
            return -errno;
    }
}

/* Connections passed to slot s that its worker has not taken yet. */
static uint64_t unclaimed(struct dispatch *d, int s)
{
    uint64_t taken = SB_GET(d->sb->slots[s].accepted);
    return d->ch[s].sent > taken ? d->ch[s].sent - taken : 0;
}

/* Sort key: with --dispatch least, open plus unclaimed connections; with
 * rr, the unclaimed ones only, so rr order holds among workers that keep
 * up (all at 0 in the normal case) and a stalled worker stops getting
 * connections after the first few. A worker at --max-connections comes
 * after every other. */
static uint64_t load_of(struct dispatch *d, int s)
{
    uint64_t u = unclaimed(d, s);
    /* at --max-connections: tried after the others (one found stalled is
     * not: passed over once it holds one, it must get its share again as
     * soon as it runs, and nothing tells the master when that is) */
    if (SB_GET(d->sb->slots[s].full))
        u += 1ULL << 40;
    if (d->least)
        return SB_GET(d->sb->slots[s].active) + u;
    return u;
}

/* The order to try workers in: round-robin from the cursor, stably sorted
 * by load_of. Fills order[], returns the count. */
static int candidates(struct dispatch *d, int *order)
{
    int n = 0;
    int total = (int)d->sb->nslots;
    uint64_t key[SB_MAX_SLOTS];
    for (int k = 0; k < total; k++) {
        int s = (d->next + k) % total;
        if (d->ch[s].fd >= 0 && !d->ch[s].blocked) {
            key[n] = load_of(d, s);
            order[n++] = s;
        }
    }
    /* insertion sort; n is the worker count, small */
    for (int i = 1; i < n; i++) {
        int s = order[i], j = i;
        uint64_t k = key[i];
        while (j > 0 && key[j - 1] > k) {
            order[j] = order[j - 1];
            key[j] = key[j - 1];
            j--;
        }
        order[j] = s;
        key[j] = k;
    }
    return n;
}

/* A send error that says the worker's end is closed: the worker has
 * exited (it closes its end only by exiting), and its respawn brings a new
 * channel. Every other error leaves the channel in place. */
static int worker_gone(int err)
{
    return err == -EPIPE || err == -ECONNRESET || err == -ENOTCONN;
}

/* Passes fd to some worker. Returns 0, -EAGAIN when every channel is full,
 * or the error that stops every channel alike: -ETOOMANYREFS (the fds in
 * flight in the channels count against our RLIMIT_NOFILE until the workers
 * take them, unless we have CAP_SYS_RESOURCE), -ENOMEM... Those are
 * back-pressure like a full channel: the caller holds fd and tries later. */
static int pass(struct dispatch *d, int fd)
{
    int order[SB_MAX_SLOTS];
    int n = candidates(d, order);
    for (int i = 0; i < n; i++) {
        int s = order[i];
        int rc = send_fd(d->ch[s].fd, fd);
        if (rc == 0) {
            d->ch[s].sent++;
            d->next = (s + 1) % (int)d->sb->nslots;
            close(fd);
            return 0;
        }
        if (rc == -EAGAIN || rc == -ENOBUFS) {
            d->ch[s].blocked = 1; /* EPOLLOUT (edge) clears it */
            continue;
        }
        if (worker_gone(rc)) {
            log_msg(LOG_ERROR, "dispatch to slot %d: %s (the worker has exited)", s,
                    strerror(-rc));
            dispatch_drop(d, s);
            continue;
        }
        return rc;
    }
    return -EAGAIN;
}

static void set_paused(struct dispatch *d, int paused)
{
    if (d->paused == paused)
        return;
    d->paused = paused;
    for (int i = 0; i < d->nlisten; i++) {
        if (d->listen_fds[i] < 0)
            continue;
        if (paused)
            loop_del(d->loop, d->listen_fds[i]);
        else
            loop_add(d->loop, d->listen_fds[i], EPOLLIN, DISPATCH_TAG_LISTEN | (uint64_t)i);
    }
}

/* One line a second at most of each kind: a flood must not flood the log. */
static int may_log(time_t *last)
{
    if (clock_wall() == *last)
        return 0;
    *last = clock_wall();
    return 1;
}

/* Why nobody took the held connections (rc from pass). */
static void log_held(struct dispatch *d, int rc)
{
    if (!may_log(&d->last_held_log))
        return;
    if (rc == -EAGAIN)
        log_msg(LOG_WARN, "dispatch: every worker channel is full; not accepting for now");
    else if (rc == -ETOOMANYREFS)
        log_msg(LOG_WARN, "dispatch: back-pressure: too many fds in flight to the workers "
                "(ETOOMANYREFS: they count against the master's fd limit); holding %d "
                "connections, not accepting for now", d->nheld);
    else
        log_msg(LOG_WARN, "dispatch: back-pressure: %s; holding %d connections, "
                "not accepting for now", strerror(-rc), d->nheld);
}

/* Closes the held connections no worker could take within hold_max_ms:
 * a worker would have closed them by now for want of a request. */
static void shed_stale(struct dispatch *d)
{
    int kept = 0, closed = 0;
    for (int i = 0; i < d->nheld; i++) {
        if (clock_now_ms() - d->held[i].since_ms >= d->hold_max_ms) {
            close(d->held[i].fd);
            closed++;
        } else {
            d->held[kept++] = d->held[i];
        }
    }
    d->nheld = kept;
    d->shed += closed;
    if (closed && may_log(&d->last_shed_log))
        log_msg(LOG_WARN, "dispatch: closed %d connections no worker could take within "
                "%lld ms (%ld so far)", closed, (long long)d->hold_max_ms, d->shed);
}

/* Hands out held connections; accepting resumes when all are placed and
 * no fd back-off is running. */
static void flush_held(struct dispatch *d)
{
    int i = 0, rc = 0;
    while (i < d->nheld && (rc = pass(d, d->held[i].fd)) == 0)
        i++;
    memmove(d->held, d->held + i, (size_t)(d->nheld - i) * sizeof d->held[0]);
    d->nheld -= i;
    shed_stale(d);
    if (d->nheld)
        log_held(d, rc);
    set_paused(d, d->nheld > 0 || d->accept_retry_at);
}

/* Takes back what the exited worker of slot never took from its channel
 * (it crashed, or stopped reading at a reload) and passes it on, as a
 * listen queue outlives the process that was to accept from it. Those
 * connections wait for their first answer: closed, each is a request
 * lost for a client that does not retry. Past HELD_MAX, or on a stop
 * (pass_on 0), they close. */
void dispatch_exited(struct dispatch *d, int slot, int pass_on)
{
    int end = d->ch[slot].rescue;
    if (end < 0)
        return;
    d->ch[slot].rescue = -1;
    dispatch_drop(d, slot); /* so EOF ends the reads below */
    int fds[64], n, moved = 0, closed = 0;
    unsigned lost;
    while ((n = dispatch_receive(end, fds, 64, &lost)) > 0 || lost) {
        closed += (int)lost; /* no fd free here: the kernel closed them */
        for (int i = 0; i < n; i++) {
            if (pass_on && pass(d, fds[i]) == 0) {
                moved++;
            } else if (pass_on && d->nheld < HELD_MAX) {
                d->held[d->nheld++] = (struct held){fds[i], clock_now_ms()};
                moved++;
            } else {
                close(fds[i]);
                closed++;
            }
        }
    }
    close(end);
    if (moved || closed)
        log_msg(closed ? LOG_WARN : LOG_NOTICE, "dispatch: %d connections the worker in slot %d "
                "never took passed on, %d closed", moved, slot, closed);
    if (d->nheld)
        flush_held(d);
}

/* A worker that can take what a stalled one left: its channel open and
 * not full, not found stalled itself lately, not at --max-connections. */
static int can_take(struct dispatch *d, int s)
{
    const struct channel *c = &d->ch[s];
    if (c->stalled && SB_GET(d->sb->slots[s].accepted) == c->stalled_taken)
        return 0;
    return c->fd >= 0 && !c->blocked && !SB_GET(d->sb->slots[s].full);
}

/* Passes fd to a worker other than from that can_take, fewest unclaimed
 * first; 0 or -EAGAIN. (from may have room again by now: sent back there,
 * fd would only go round its queue.) */
static int pass_on(struct dispatch *d, int fd, int from)
{
    int best = -1;
    for (int k = 0; k < (int)d->sb->nslots; k++)
        if (k != from && can_take(d, k) && (best < 0 || unclaimed(d, k) < unclaimed(d, best)))
            best = k;
    if (best < 0)
        return -EAGAIN;
    int rc = send_fd(d->ch[best].fd, fd);
    if (rc < 0) {
        /* full: its EPOLLOUT (edge) clears the mark; a worker that has
         * gone is found by pass, which drops its channel */
        d->ch[best].blocked = 1;
        return -EAGAIN;
    }
    d->ch[best].sent++;
    close(fd);
    return 0;
}

static int any_can_take(struct dispatch *d, int from)
{
    for (int k = 0; k < (int)d->sb->nslots; k++)
        if (k != from && can_take(d, k))
            return 1;
    return 0;
}

/* Takes back what waits in slot's channel (its worker is stalled, or at
 * --max-connections) and passes it to workers that can take it. The worker
 * may wake and take some at the same time: each message goes to one
 * reader, and what the master took is no longer counted as sent. One that
 * no worker could take after all goes to the back of the same channel,
 * where it waited anyway (held by the master it would be closed after
 * hold_max_ms); the rest stay there. Where every worker is full or stalled
 * nothing moves. */
static void rescue_stalled(struct dispatch *d, int s)
{
    struct channel *c = &d->ch[s];
    int full = (int)SB_GET(d->sb->slots[s].full);
    if (!full) {
        /* until it takes one again: only for a second, two stopped
         * workers passed each other's waiting connections back and forth */
        c->stalled = 1;
        c->stalled_taken = SB_GET(d->sb->slots[s].accepted);
    }
    int moved = 0, closed = 0;
    while (any_can_take(d, s)) {
        int fd;
        unsigned lost;
        int got = dispatch_receive(c->rescue, &fd, 1, &lost);
        c->sent -= (uint64_t)(got > 0 ? got : 0) + lost;
        closed += (int)lost; /* no fd free in the master: the kernel closed it */
        if (got <= 0) {
            if (!lost)
                break; /* the channel is empty (or the worker took the rest) */
            continue;
        }
        if (pass_on(d, fd, s) == 0) {
            moved++;
            continue;
        }
        if (c->fd >= 0 && send_fd(c->fd, fd) == 0) { /* (a drained one's end is gone) */
            c->sent++;
            close(fd);
        } else if (d->nheld < HELD_MAX) {
            d->held[d->nheld++] = (struct held){fd, clock_now_ms()};
        } else {
            close(fd);
            closed++;
        }
        break;
    }
    if ((moved || closed) && may_log(&d->last_stall_log))
        log_msg(closed ? LOG_WARN : LOG_NOTICE, "dispatch: the worker in slot %d took no "
                "connection for %d ms (%s): %d waiting in its channel passed on, %d closed",
                s, STALL_MS, full ? "at --max-connections" : "stalled", moved, closed);
}

/* Finds the channels whose worker took nothing for STALL_MS while
 * connections waited there. Returns the ms until the next look, or -1 when
 * no connection waits. */
static int watch_stalls(struct dispatch *d)
{
    int64_t now = clock_now_ms();
    int watching = 0;
    for (int s = 0; s < (int)d->sb->nslots; s++) {
        struct channel *c = &d->ch[s];
        /* A draining worker's channel (dropped at a reload) is watched too:
         * stalled, it would hold what waits there until it exits. */
        if (c->rescue < 0 || unclaimed(d, s) == 0) {
            c->watch_since = 0;
            continue;
        }
        uint64_t taken = SB_GET(d->sb->slots[s].accepted);
        /* A take restarts the watch, but not at --max-connections: one
         * take a second (as each of its connections ends) would keep the
         * rest queued there while another worker has room. */
        if (!c->watch_since || (taken != c->watch_taken && !SB_GET(d->sb->slots[s].full))) {
            c->watch_since = now;
            c->watch_taken = taken;
        } else if (now - c->watch_since >= STALL_MS) {
            rescue_stalled(d, s);
            c->watch_since = 0;
        }
        watching = 1;
    }
    return watching ? STALL_CHECK_MS : -1;
}

/* Level-triggered: accepts until EAGAIN or until it must stop (nobody can
 * take a connection, or no fds); a stop always comes with a retry time,
 * never with a listener that stays readable and spins the loop. */
static void accept_all(struct dispatch *d, int li)
{
    while (!d->paused && d->listen_fds[li] >= 0 && d->nheld < HELD_MAX) {
        int fd = net_accept(&d->ac, d->listen_fds[li], NULL);
        if (fd == -EAGAIN)
            break;
        if (fd == -ECONNREFUSED) {
            if (may_log(&d->last_accept_log))
                log_msg(LOG_CRIT, "dispatch: out of file descriptors: refusing connections "
                        "(%ld so far)", d->ac.refused);
            continue;
        }
        if (fd < 0) {
            if (may_log(&d->last_accept_log))
                log_msg(fd == -EMFILE ? LOG_CRIT : LOG_ERROR, "dispatch: accept: %s; "
                        "not accepting for now", strerror(-fd));
            d->accept_retry_at = clock_now_ms() + NET_ACCEPT_BACKOFF_MS;
            set_paused(d, 1);
            break;
        }
        int rc = pass(d, fd);
        if (rc < 0) {
            d->held[d->nheld++] = (struct held){fd, clock_now_ms()};
            log_held(d, rc);
            set_paused(d, 1);
        }
    }
}

void dispatch_event(struct dispatch *d, uint64_t tag, uint32_t events)
{
    (void)events;
    if (tag & DISPATCH_TAG_LISTEN) {
        accept_all(d, (int)(tag & 0xffff));
    } else if (tag & DISPATCH_TAG_CHANNEL) {
        int s = (int)(tag & 0xffff);
        d->ch[s].blocked = 0;
        if (d->nheld)
            flush_held(d);
    }
}

static int in_set(int fd, const int *fds, int n)
{
    for (int j = 0; j < n; j++)
        if (fds[j] == fd)
            return 1;
    return 0;
}

void dispatch_retire_listeners(struct dispatch *d, const int *keep, int nkeep)
{
    for (int i = 0; i < d->nlisten; i++) {
        int fd = d->listen_fds[i];
        if (fd < 0 || in_set(fd, keep, nkeep))
            continue;
        /* Its queue is reset when the master closes it: pass it on now,
         * to the workers that know this listener's flags. */
        accept_all(d, i);
        if (!d->paused)
            loop_del(d->loop, fd);
        d->listen_fds[i] = -1;
    }
}

void dispatch_set_listeners(struct dispatch *d, const int *fds, int n)
{
    for (int i = 0; i < d->nlisten; i++)
        if (d->listen_fds[i] >= 0 && !d->paused)
            loop_del(d->loop, d->listen_fds[i]);
    d->nlisten = n > 16 ? 16 : n;
    for (int i = 0; i < d->nlisten; i++) {
        d->listen_fds[i] = fds[i];
        if (!d->paused)
            loop_add(d->loop, fds[i], EPOLLIN, DISPATCH_TAG_LISTEN | (uint64_t)i);
    }
}

void dispatch_stop(struct dispatch *d)
{
    for (int i = 0; i < d->nlisten; i++) {
        if (d->listen_fds[i] >= 0 && !d->paused)
            loop_del(d->loop, d->listen_fds[i]);
        d->listen_fds[i] = -1;
    }
    for (int i = 0; i < d->nheld; i++)
        close(d->held[i].fd);
    d->nheld = 0;
    acceptor_close(&d->ac);
}

int dispatch_receive(int channel, int *fds, int max, unsigned *lost)
{
    int n = 0;
    *lost = 0;
    while (n < max) {
        char byte;
        struct iovec iov = {&byte, 1};
        union {
            struct cmsghdr h;
            char buf[CMSG_SPACE(sizeof(int))];
        } u;
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                           .msg_controllen = sizeof u.buf};
        ssize_t r = recvmsg(channel, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return n ? n : -errno;
        }
        if (r == 0)
            return n; /* EOF: the master closed the channel */
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
            memcpy(&fds[n++], CMSG_DATA(c), sizeof(int));
        else if (m.msg_flags & MSG_CTRUNC)
            (*lost)++; /* no fd free here: the kernel closed the connection */
    }
    return n;
}

void dispatch_close_in_child(struct dispatch *d)
{
    for (int s = 0; s < SB_MAX_SLOTS; s++) {
        if (d->ch[s].fd >= 0)
            close(d->ch[s].fd);
        if (d->ch[s].rescue >= 0)
            close(d->ch[s].rescue);
    }
    for (int i = 0; i < d->nheld; i++)
        close(d->held[i].fd);
}

int dispatch_tick(struct dispatch *d)
{
    if (d->accept_retry_at && clock_now_ms() >= d->accept_retry_at)
        d->accept_retry_at = 0;
    int watch = watch_stalls(d); /* first: what its rescue holds is placed below */
    if (d->nheld) {
        for (int s = 0; s < SB_MAX_SLOTS; s++)
            d->ch[s].blocked = 0;
        flush_held(d);
    }
    set_paused(d, d->nheld > 0 || d->accept_retry_at);
    int t = watch;
    if (d->nheld)
        t = RETRY_MS;
    else if (d->accept_retry_at) {
        int retry = (int)(d->accept_retry_at - clock_now_ms()) + 1;
        t = t < 0 || retry < t ? retry : t;
    }
    return t;
}

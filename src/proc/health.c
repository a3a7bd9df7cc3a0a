/* Active health checks of upstream servers: see proc/health.h. One
 * non-blocking connection per check in flight, edge-triggered in the
 * master's loop; each event moves the check as far as it goes. */
#include "proc/health.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"

enum { CK_IDLE, CK_CONNECTING, CK_SENDING, CK_READING };

/* The most a check reads of an answer: any interim 1xx heads and the
 * final status line must come within it, so a server that sends 1xx
 * after 1xx costs the master this much and no more. As much as the proxy
 * takes for one response head (UP_HEAD_MAX), so an interim head the proxy
 * copes with passes here too. */
#define ANSWER_MAX 16384
#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)
/* "HTTP/1.1 200" and the byte after it (SP, CR or LF), plus the LF after
 * a CR: as much of a status line as its judgement needs. */
#define STATUS_LINE_HEAD 13

struct check {
    const struct upstream_group *g;
    int server;
    uint32_t index;              /* in the scoreboard's upstream tables */
    int fd;                      /* -1 while idle */
    uint8_t state;               /* CK_* */
    int64_t next_at;             /* the next start (idle) */
    int64_t deadline;            /* the verdict is due (in flight) */
    size_t sent, got;            /* got: bytes of the answer read */
    uint8_t skipping;            /* inside an interim head, up to its empty line */
    uint8_t line_empty;          /* (skipping) the line so far holds nothing but CR */
    uint8_t line_len;            /* bytes in line[] */
    char line[STATUS_LINE_HEAD + 1]; /* the start of the current status line */
};

struct health {
    struct scoreboard *sb;
    struct loop *loop;
    uint64_t tag;
    int n;
    struct check ck[];
};

/* The group of cfg named name, or -1. */
static int group_named(const struct serve_config *cfg, const char *name)
{
    for (int g = 0; g < cfg->nupstreams; g++)
        if (!strcmp(cfg->upstreams[g].name, name))
            return g;
    return -1;
}

void health_carry(const struct serve_config *old, const struct serve_config *next,
                  const struct scoreboard *sb, uint8_t carry[SB_UPSTREAMS])
{
    memset(carry, HEALTH_UNCHECKED, SB_UPSTREAMS);
    for (int g = 0; g < next->nupstreams; g++) {
        const struct upstream_group *ng = &next->upstreams[g];
        int og = group_named(old, ng->name);
        if (og < 0 || !old->upstreams[og].health_path[0])
            continue;
        const struct upstream_group *was = &old->upstreams[og];
        for (int s = 0; s < ng->nservers; s++)
            for (int k = 0; k < was->nservers; k++) {
                uint32_t to = ng->sb_index[s], from = was->sb_index[k];
                if (!strcmp(ng->servers[s].text, was->servers[k].text) && to < SB_UPSTREAMS &&
                    from < SB_UPSTREAMS)
                    carry[to] = SB_GET(sb->upstream_health[from]);
            }
    }
}

struct health *health_create(const struct serve_config *cfg, struct scoreboard *sb,
                             struct loop *l, uint64_t tag, const uint8_t *carry)
{
    int n = 0;
    uint32_t skipped = 0;
    /* every server of cfg starts from its carried verdict, or unchecked:
     * one whose group is no longer checked must not stay down. Servers
     * cfg dropped keep their last verdict for the old workers still
     * running, until their index goes to another server. */
    for (int g = 0; carry && g < cfg->nupstreams; g++)
        for (int s = 0; s < cfg->upstreams[g].nservers; s++) {
            uint16_t index = cfg->upstreams[g].sb_index[s];
            if (index < SB_UPSTREAMS)
                SB_SET(sb->upstream_health[index],
                       cfg->upstreams[g].health_path[0] ? carry[index] : HEALTH_UNCHECKED);
        }
    for (int g = 0; g < cfg->nupstreams; g++)
        if (cfg->upstreams[g].health_path[0])
            n += cfg->upstreams[g].nservers;
    if (!n)
        return NULL;
    struct health *h = calloc(1, sizeof *h + (size_t)n * sizeof h->ck[0]);
    if (!h) {
        log_msg(LOG_ERROR, "upstream-health: out of memory; no health checks");
        return NULL;
    }
    h->sb = sb;
    h->loop = l;
    h->tag = tag;
    for (int g = 0; g < cfg->nupstreams; g++)
        for (int s = 0; s < cfg->upstreams[g].nservers; s++) {
            uint16_t index = cfg->upstreams[g].sb_index[s];
            if (!cfg->upstreams[g].health_path[0])
                continue;
            if (index >= SB_UPSTREAMS) { /* no shared entry to tell the workers */
                skipped++;
                continue;
            }
            h->ck[h->n++] = (struct check){.g = &cfg->upstreams[g], .server = s,
                                           .index = index, .fd = -1,
                                           .next_at = clock_now_ms()};
        }
    if (skipped)
        log_msg(LOG_WARN, "upstream-health: %u servers past the first %d are not checked",
                skipped, SB_UPSTREAMS);
    return h;
}

void health_destroy(struct health *h)
{
    if (!h)
        return;
    for (int i = 0; i < h->n; i++) {
        if (h->ck[i].fd >= 0)
            close(h->ck[i].fd); /* leaves the epoll set with it */
    }
    free(h);
}

void health_close_in_child(struct health *h)
{
    if (!h)
        return;
    for (int i = 0; i < h->n; i++)
        if (h->ck[i].fd >= 0)
            close(h->ck[i].fd);
    free(h);
}

/* The check is over: publish the verdict (logged when it changes) and
 * wait for the next interval. why is NULL when it passed. */
static void verdict(struct health *h, struct check *c, const char *why)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->state = CK_IDLE;
    c->next_at = c->deadline; /* start + interval: one check per interval */
    uint8_t *slot = &h->sb->upstream_health[c->index];
    uint8_t was = SB_GET(*slot), now = why ? HEALTH_DOWN : HEALTH_UP;
    if (was == now)
        return;
    SB_SET(*slot, now);
    if (why)
        log_msg(LOG_WARN, "upstream %s server %s: health check %s failed (%s); down until "
                "a check passes", c->g->name, c->g->servers[c->server].text,
                c->g->health_path, why);
    else if (was == HEALTH_DOWN)
        log_msg(LOG_NOTICE, "upstream %s server %s: health check passed; up again",
                c->g->name, c->g->servers[c->server].text);
}

/* line[] holds as much of a status line as judging it needs: 13 bytes,
 * or 14 when the 13th is a CR (the LF after it). */
static int status_line_held(const struct check *c)
{
    return c->line_len == STATUS_LINE_HEAD + 1 ||
           (c->line_len == STATUS_LINE_HEAD && c->line[STATUS_LINE_HEAD - 1] != '\r');
}

static int is_digit(char ch)
{
    return ch >= '0' && ch <= '9';
}

/* The status code of the status line in line[], or -1 when it is not
 * "HTTP/1.D SP DDD" followed by SP (a reason phrase) or the line's end:
 * CRLF, or a bare LF as the proxy's parser takes it (RFC 9112 2.2). */
static int status_code(const struct check *c)
{
    const char *p = c->line;
    char after = p[12];
    int line_end = after == '\n' || (after == '\r' && c->line_len > STATUS_LINE_HEAD &&
                                     p[13] == '\n');
    if (strncmp(p, "HTTP/1.", 7) || !is_digit(p[7]) || p[8] != ' ' || !is_digit(p[9]) ||
        !is_digit(p[10]) || !is_digit(p[11]) || (after != ' ' && !line_end))
        return -1;
    return (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
}

/* An interim answer's status line was judged: skip its head up to the
 * empty line. The status line's own end may already be in line[]. */
static void start_skipping(struct check *c)
{
    c->skipping = 1;
    c->line_empty = c->line[12] != ' '; /* its LF was read: a new line begins */
}

/* One byte of an interim head; at its empty line the next status line
 * begins. A line ends at LF, with or without a CR before it. */
static void skip_interim_byte(struct check *c, char ch)
{
    if (ch == '\n') {
        if (c->line_empty) {
            c->skipping = 0;
            c->line_len = 0;
        }
        c->line_empty = 1;
    } else if (ch != '\r') {
        c->line_empty = 0;
    }
}

/* Takes the answer's next bytes p[0..n). Interim 1xx answers are skipped
 * (RFC 9110 15.2): the final status is the one judged. Returns 1 with *why
 * set when the check has its verdict (NULL: passed), 0 while it needs
 * more. */
static int take_answer(struct check *c, const char *p, size_t n, const char **why)
{
    for (size_t i = 0; i < n; i++) {
        if (c->skipping) {
            skip_interim_byte(c, p[i]);
            continue;
        }
        c->line[c->line_len++] = p[i];
        if (!status_line_held(c))
            continue;
        int status = status_code(c);
        if (status < 0) {
            *why = "malformed status line";
            return 1;
        }
        if (status == 101) { /* a GET was not asked to switch: no answer to it */
            *why = "status 101 (a switch of protocols)";
            return 1;
        }
        if (status < 200) {
            start_skipping(c);
            continue;
        }
        *why = status < 400 ? NULL : "status not 2xx or 3xx";
        return 1;
    }
    return 0;
}

/* The request, for check c into buf; its length. Host is the server's
 * address ("localhost" for a unix socket: a path is no valid Host). */
static size_t request(const struct check *c, char *buf, size_t cap)
{
    const struct listen_addr *a = &c->g->servers[c->server];
    int n = snprintf(buf, cap, "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: herd-health\r\n"
                     "Connection: close\r\n\r\n", c->g->health_path,
                     a->family == AF_UNIX ? "localhost" : a->text);
    return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}

/* Reads the answer until its verdict or until the socket is empty; never
 * past ANSWER_MAX bytes, so the master's loop is not held up by a server
 * that sends interim answers without end. */
static void read_answer(struct health *h, struct check *c)
{
    for (;;) {
        char buf[2048];
        size_t room = ANSWER_MAX - c->got;
        if (room == 0) {
            verdict(h, c, "no final status in the first " STRINGIFY(ANSWER_MAX)
                          " bytes: interim 1xx answers only");
            return;
        }
        ssize_t k = recv(c->fd, buf, room < sizeof buf ? room : sizeof buf, MSG_DONTWAIT);
        if (k < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (k <= 0) {
            verdict(h, c, k < 0 ? strerror(errno) : "closed before a final status line");
            return;
        }
        c->got += (size_t)k;
        const char *why;
        if (take_answer(c, buf, (size_t)k, &why)) {
            verdict(h, c, why);
            return;
        }
    }
}

/* Moves check c as far as its socket lets it. */
static void advance(struct health *h, struct check *c)
{
    if (c->state == CK_CONNECTING) {
        int err = 0;
        socklen_t len = sizeof err;
        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
            err = errno;
        if (err) {
            verdict(h, c, strerror(err));
            return;
        }
        c->state = CK_SENDING;
    }
    if (c->state == CK_SENDING) {
        char req[512];
        size_t n = request(c, req, sizeof req);
        ssize_t k = send(c->fd, req + c->sent, n - c->sent, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k < 0 && (errno == EAGAIN || errno == EINTR || errno == ENOTCONN))
            return; /* not connected yet, or full: the next edge */
        if (k < 0) {
            verdict(h, c, strerror(errno));
            return;
        }
        c->sent += (size_t)k;
        if (c->sent < n)
            return;
        c->state = CK_READING;
    }
    read_answer(h, c);
}

/* Opens check c's connection; its verdict is due one interval later. */
static void start(struct health *h, struct check *c, int i)
{
    const struct listen_addr *a = &c->g->servers[c->server];
    c->deadline = clock_now_ms() + c->g->health_interval_ms;
    c->sent = c->got = 0;
    c->skipping = c->line_empty = c->line_len = 0;
    c->fd = socket(a->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        verdict(h, c, strerror(errno));
        return;
    }
    if (a->family != AF_UNIX) {
        int one = 1;
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    int rc = connect(c->fd, (const struct sockaddr *)&a->ss, a->len);
    if (rc < 0 && errno == EAGAIN) {
        /* a unix socket whose listen queue is full: busy, not down (as
         * the workers judge it); the verdict stays, the next check comes */
        close(c->fd);
        c->fd = -1;
        c->next_at = c->deadline;
        return;
    }
    if (rc < 0 && errno != EINPROGRESS) {
        verdict(h, c, strerror(errno));
        return;
    }
    int err = loop_add(h->loop, c->fd, LOOP_IN | LOOP_OUT | LOOP_EDGE, h->tag | (uint64_t)i);
    if (err < 0) {
        verdict(h, c, strerror(-err));
        return;
    }
    c->state = rc == 0 ? CK_SENDING : CK_CONNECTING;
    if (rc == 0)
        advance(h, c);
}

int64_t health_next(const struct health *h)
{
    int64_t next = -1;
    for (int i = 0; h && i < h->n; i++) {
        const struct check *c = &h->ck[i];
        int64_t t = c->fd >= 0 ? c->deadline : c->next_at;
        if (next < 0 || t < next)
            next = t;
    }
    return next;
}

void health_tick(struct health *h)
{
    int64_t now = clock_now_ms();
    for (int i = 0; h && i < h->n; i++) {
        struct check *c = &h->ck[i];
        if (c->fd >= 0 && now >= c->deadline)
            verdict(h, c, "no answer within the interval");
        else if (c->fd < 0 && now >= c->next_at)
            start(h, c, i);
    }
}

void health_event(struct health *h, int i, uint32_t events)
{
    (void)events; /* errors show in SO_ERROR, send or recv */
    if (h && i >= 0 && i < h->n && h->ck[i].fd >= 0)
        advance(h, &h->ck[i]);
}

#include "proc/accesslog.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"

void alog_init(struct alog *a, int fd, enum log_format fmt, struct sb_slot *slot)
{
    a->fd = fd;
    a->fmt = fmt;
    a->slot = slot;
    a->len = 0;
    a->records = 0;
    a->first_ms = 0;
    a->unreported = 0;
    a->drop_notes = (struct ratelimit){0};
}

/* Says in the error log how many records were dropped since the last
 * note, when the rate limit lets a note through now: at once for the
 * first, then at most once an ALOG_REPORT_MS. Only the status page said so
 * before, and an operator without it never knew the access log had gaps
 * while the logger was stopped, restarting or too slow (red-team pass 33). */
static void report_dropped(struct alog *a)
{
    if (!a->unreported ||
        !ratelimit_take(&a->drop_notes, clock_now_ms(), ALOG_REPORT_MS, 1, NULL))
        return;
    log_msg(LOG_WARN, "access log: %llu records dropped: the logger did not take them "
            "(stopped, restarting or too slow; counted in log_dropped, logged at most once "
            "a minute)", (unsigned long long)a->unreported);
    a->unreported = 0;
}

/* Records lost: in log_dropped at once, in the error log by report_dropped
 * (this call, or a later flush or tick once the rate limit allows: the
 * records dropped after a note are said too, not only the first). */
static void count_dropped(struct alog *a, uint64_t n)
{
    SB_ADD(a->slot->log_dropped, n);
    a->unreported += n;
    report_dropped(a);
}

/* The value of a header, by its lowercase name; NULL when absent. */
static const struct http_str *header(const struct http_request *req, const char *lower,
                                     size_t n)
{
    for (unsigned i = 0; i < req->nheaders; i++) {
        const struct http_str *name = &req->headers[i].name;
        if (name->len != n || (name->p[0] | 0x20) != lower[0])
            continue;
        size_t k = 1;
        while (k < n && (name->p[k] | 0x20) == lower[k])
            k++;
        if (k == n)
            return &req->headers[i].value;
    }
    return NULL;
}

/* The record's head and fields, as alog_wire.h lays them out. */
struct rec {
    struct alog_wire h;
    const char *field[ALOG_NFIELDS];
};

static void fill_fields(struct rec *r, const struct http_request *req)
{
    size_t len[ALOG_NFIELDS] = {0};
    if (req) {
        const struct http_str *ref = header(req, "referer", 7);
        const struct http_str *ua = header(req, "user-agent", 10);
        r->h.flags = ALOG_W_REQ | (ref ? ALOG_W_REFERER : 0) | (ua ? ALOG_W_UA : 0);
        r->h.minor = req->minor;
        r->field[ALOG_F_METHOD] = req->method_str.p;
        r->field[ALOG_F_TARGET] = req->target.p;
        r->field[ALOG_F_REFERER] = ref ? ref->p : NULL;
        r->field[ALOG_F_UA] = ua ? ua->p : NULL;
        len[ALOG_F_METHOD] = req->method_str.len;
        len[ALOG_F_TARGET] = req->target.len;
        len[ALOG_F_REFERER] = ref ? ref->len : 0;
        len[ALOG_F_UA] = ua ? ua->len : 0;
        alog_text_keep(len);
    }
    r->h.len = sizeof r->h;
    for (int k = 0; k < ALOG_NFIELDS; k++) {
        r->h.flen[k] = (uint16_t)len[k];
        r->h.len = (uint16_t)(r->h.len + len[k]);
    }
}

/* Appends the record to the batch; 0 (nothing appended) when it does not fit. */
static int append(struct alog *a, const struct rec *r)
{
    if (r->h.len > sizeof a->buf - a->len)
        return 0;
    if (a->len == 0)
        a->first_ms = clock_now_ms();
    char *p = a->buf + a->len;
    memcpy(p, &r->h, sizeof r->h);
    p += sizeof r->h;
    for (int k = 0; k < ALOG_NFIELDS; k++) {
        if (r->h.flen[k])
            memcpy(p, r->field[k], r->h.flen[k]);
        p += r->h.flen[k];
    }
    a->len += r->h.len;
    a->records++;
    return 1;
}

void alog_record_addr(struct alog *a, int family, const uint8_t *addr,
                      const struct http_request *req, unsigned status, uint64_t body_bytes)
{
    if (a->fd < 0)
        return;
    struct rec r;
    memset(&r.h, 0, sizeof r.h);
    r.h.sec = clock_wall();
    r.h.bytes = body_bytes;
    r.h.status = status;
    /* which generation answered: a connection handed over on HUP shows it
     * moved (docs/SPEC-serve.md) */
    r.h.generation = a->slot ? (uint32_t)SB_GET(a->slot->generation) : 0;
    r.h.fmt = (uint8_t)a->fmt;
    if (family == AF_INET || family == AF_INET6) {
        r.h.family = (uint8_t)family;
        memcpy(r.h.addr, addr, family == AF_INET ? 4 : 16);
    }
    fill_fields(&r, req);
    if (append(a, &r))
        return;
    /* The batch is full: send it now rather than drop the record (a burst
     * of long records fills it within one loop iteration). Only when the
     * logger cannot take it either is the record dropped, whole. */
    alog_flush(a);
    if (a->len == 0 && append(a, &r))
        return;
    count_dropped(a, 1);
}

void alog_record(struct alog *a, const struct sockaddr_storage *peer,
                 const struct http_request *req, unsigned status, uint64_t body_bytes)
{
    if (peer && peer->ss_family == AF_INET)
        alog_record_addr(a, AF_INET,
                         (const uint8_t *)&((const struct sockaddr_in *)peer)->sin_addr, req,
                         status, body_bytes);
    else if (peer && peer->ss_family == AF_INET6)
        alog_record_addr(a, AF_INET6,
                         ((const struct sockaddr_in6 *)peer)->sin6_addr.s6_addr, req, status,
                         body_bytes);
    else
        alog_record_addr(a, 0, NULL, req, status, body_bytes);
}

void alog_flush(struct alog *a)
{
    report_dropped(a);
    if (a->fd < 0 || a->len == 0)
        return;
    ssize_t n = send(a->fd, a->buf, a->len, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n == (ssize_t)a->len) {
        a->len = a->records = 0;
        return;
    }
    if (n < 0 && (errno == EAGAIN || errno == ENOBUFS))
        return; /* the logger is behind: keep the batch, drop when full */
    /* The logger is gone for good (or the datagram is refused): count the loss. */
    count_dropped(a, a->records);
    a->len = a->records = 0;
}

void alog_close(struct alog *a)
{
    alog_flush(a);
    if (a->fd < 0 || a->len == 0)
        return;
    /* The logger is behind (or stopped): a last, short wait for room, then
     * the batch kept is counted, as the process takes it away (red-team
     * pass 33: it was lost, in neither the file nor log_dropped). */
    struct pollfd p = {.fd = a->fd, .events = POLLOUT};
    if (poll(&p, 1, ALOG_CLOSE_WAIT_MS) > 0)
        alog_flush(a);
    if (a->len)
        count_dropped(a, a->records);
    a->len = a->records = 0;
}

void alog_tick(struct alog *a)
{
    report_dropped(a);
    if (a->len >= ALOG_SEND_AT || (a->len && clock_now_ms() >= a->first_ms + ALOG_DELAY_MS))
        alog_flush(a);
}

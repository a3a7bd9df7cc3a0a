#include "proc/accesslog.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "core/bwriter.h"
#include "core/clock.h"

/* A record's shares: whatever the request (the parser takes heads up to the
 * largest --max-header-size, 1 MiB), a record is one line of at most
 * ALOG_RECORD_MAX bytes. The method keeps at most METHOD_MAX bytes; the
 * target, Referer and User-Agent, in that order, may each take what the
 * fields before them left, less what the fields after them are promised
 * (their FLOOR) and the fixed tail. A field past its share is cut, ending
 * in BW_CUT_MARK. HEAD_MAX bounds what comes before the method (time under
 * 40 bytes, address under 64, literals), TAIL_MAX the fixed text after it
 * (about 130 bytes of literals and numbers in JSON). Shares are counted from
 * the record's start, not from the batch, so a record's text never depends
 * on how full the batch is. */
enum {
    HEAD_MAX = 256,
    METHOD_MAX = 256,
    TARGET_FLOOR = 2048,
    REFERER_FLOOR = 1024,
    UA_FLOOR = 1024,
    TAIL_MAX = 192,
};
_Static_assert(HEAD_MAX + METHOD_MAX + TARGET_FLOOR + REFERER_FLOOR + UA_FLOOR + TAIL_MAX <=
                   ALOG_RECORD_MAX,
               "the shares of a record must add up to at most ALOG_RECORD_MAX");
_Static_assert(ALOG_RECORD_MAX <= ALOG_BUF, "a batch must hold a record");

void alog_init(struct alog *a, int fd, enum log_format fmt, struct sb_slot *slot)
{
    a->fd = fd;
    a->fmt = fmt;
    a->slot = slot;
    a->len = 0;
    a->stamp_sec = -1; /* no stamp formatted yet */
}

static void update_stamp(struct alog *a)
{
    time_t now = clock_wall();
    if (now == a->stamp_sec)
        return;
    a->stamp_sec = now;
    struct tm tm;
    localtime_r(&now, &tm);
    if (!strftime(a->stamp, sizeof a->stamp,
                  a->fmt == ACCESS_LOG_JSON ? "%Y-%m-%dT%H:%M:%S%z" : "%d/%b/%Y:%H:%M:%S %z",
                  &tm))
        strcpy(a->stamp, "-");
}

static const struct http_str *header(const struct http_request *req, const char *lower,
                                     size_t n)
{
    for (unsigned i = 0; i < req->nheaders; i++) {
        const struct http_str *name = &req->headers[i].name;
        if (name->len != n)
            continue;
        size_t k = 0;
        while (k < n && (name->p[k] | 0x20) == lower[k])
            k++;
        if (k == n)
            return &req->headers[i].value;
    }
    return NULL;
}

static void peer_text(const struct sockaddr_storage *peer, char *out, size_t n)
{
    if (peer && peer->ss_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)peer)->sin_addr, out, (socklen_t)n);
    else if (peer && peer->ss_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)peer)->sin6_addr, out, (socklen_t)n);
    else
        snprintf(out, n, "-");
}

/* A field's share of the record written so far into w: what is left of
 * ALOG_RECORD_MAX, less the fixed tail and what later fields are promised. */
static size_t share(const struct bw *w, size_t promised)
{
    size_t reserved = w->len + TAIL_MAX + promised;
    return reserved < ALOG_RECORD_MAX ? ALOG_RECORD_MAX - reserved : 0;
}

/* The request line as logged: "-" for a request that failed to parse. */
static void put_request(struct bw *w, const struct http_request *req, enum bw_esc esc)
{
    if (!req) {
        bw_put(w, "-", 1);
        return;
    }
    size_t later = REFERER_FLOOR + UA_FLOOR;
    size_t m = share(w, TARGET_FLOOR + later);
    bw_escaped(w, req->method_str.p, req->method_str.len, esc, m < METHOD_MAX ? m : METHOD_MAX);
    bw_put(w, " ", 1);
    bw_escaped(w, req->target.p, req->target.len, esc, share(w, later));
    bw_puts(w, " HTTP/1.");
    bw_u64(w, req->minor);
}

/* One record in Combined Log Format or JSON, newline included. */
static void put_record(struct bw *w, const struct alog *a, const char *addr,
                       const struct http_request *req, unsigned status, uint64_t body_bytes)
{
    static const struct http_str none = {"-", 1};
    const struct http_str *ref = req ? header(req, "referer", 7) : NULL;
    const struct http_str *ua = req ? header(req, "user-agent", 10) : NULL;
    int json = a->fmt == ACCESS_LOG_JSON;
    enum bw_esc esc = json ? BW_ESC_JSON : BW_ESC_LOG;
    if (json)
        bw_printf(w, "{\"time\":\"%s\",\"remote_addr\":\"%s\",\"request\":\"", a->stamp, addr);
    else
        bw_printf(w, "%s - - [%s] \"", addr, a->stamp);
    put_request(w, req, esc);
    bw_puts(w, json ? "\",\"status\":" : "\" ");
    bw_u64(w, status);
    bw_puts(w, json ? ",\"body_bytes_sent\":" : " ");
    bw_u64(w, body_bytes);
    bw_puts(w, json ? ",\"referer\":\"" : " \"");
    ref = ref ? ref : &none;
    bw_escaped(w, ref->p, ref->len, esc, share(w, UA_FLOOR));
    bw_puts(w, json ? "\",\"user_agent\":\"" : "\" \"");
    ua = ua ? ua : &none;
    bw_escaped(w, ua->p, ua->len, esc, share(w, 0));
    if (!json) {
        bw_puts(w, "\"\n");
        return;
    }
    /* which reload generation answered: a connection handed over on HUP
     * shows it moved (docs/SPEC-serve.md) */
    bw_puts(w, "\",\"generation\":");
    bw_u64(w, a->slot ? SB_GET(a->slot->generation) : 0);
    bw_puts(w, "}\n");
}

/* Appends one record to the batch, bounded by what is left of it; returns
 * 0 (and appends nothing) when the record does not fit whole. */
static int append(struct alog *a, const char *addr, const struct http_request *req,
                  unsigned status, uint64_t body_bytes)
{
    size_t left = sizeof a->buf - a->len;
    struct bw w;
    bw_init(&w, a->buf + a->len, left < ALOG_RECORD_MAX ? left : ALOG_RECORD_MAX);
    put_record(&w, a, addr, req, status, body_bytes);
    if (w.full)
        return 0;
    a->len += w.len;
    return 1;
}

void alog_record(struct alog *a, const struct sockaddr_storage *peer,
                 const struct http_request *req, unsigned status, uint64_t body_bytes)
{
    if (a->fd < 0)
        return;
    update_stamp(a);
    char addr[64];
    peer_text(peer, addr, sizeof addr);
    if (append(a, addr, req, status, body_bytes))
        return;
    /* The batch is full: send it now rather than drop the record (a burst
     * of long records fills it within one loop iteration). Only when the
     * logger cannot take it either is the record dropped, whole. */
    alog_flush(a);
    if (a->len == 0 && append(a, addr, req, status, body_bytes))
        return;
    SB_ADD(a->slot->log_dropped, 1);
}

void alog_flush(struct alog *a)
{
    if (a->fd < 0 || a->len == 0)
        return;
    ssize_t n = send(a->fd, a->buf, a->len, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n == (ssize_t)a->len) {
        a->len = 0;
        return;
    }
    if (n < 0 && (errno == EAGAIN || errno == ENOBUFS))
        return; /* the logger is behind: keep the batch, drop when full */
    /* The logger is gone for good (or the datagram is refused): count the loss. */
    size_t lines = 0;
    for (size_t i = 0; i < a->len; i++)
        lines += a->buf[i] == '\n';
    SB_ADD(a->slot->log_dropped, lines);
    a->len = 0;
}

#include "proc/accesslog.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "core/clock.h"

#define RECORD_MAX 8192 /* longest record; longer fields are cut */

void alog_init(struct alog *a, int fd, enum log_format fmt, struct sb_slot *slot)
{
    a->fd = fd;
    a->fmt = fmt;
    a->slot = slot;
    a->len = 0;
    a->stamp_sec = 0;
}

static void update_stamp(struct alog *a)
{
    time_t now = clock_wall();
    if (now == a->stamp_sec)
        return;
    a->stamp_sec = now;
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(a->stamp, sizeof a->stamp,
             a->fmt == ACCESS_LOG_JSON ? "%Y-%m-%dT%H:%M:%S%z" : "%d/%b/%Y:%H:%M:%S %z", &tm);
}

/* Appends s, escaping what could forge a log line or break JSON: in the
 * combined format as nginx does (\xHH), in JSON as JSON does (\" \\ \u00HH). */
static size_t put_escaped(char *p, size_t room, const char *s, size_t n, int json)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (size_t i = 0; i < n && o + 8 < room; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c != '"' && c != '\\' && c >= 0x20 && c < 0x7f) {
            p[o++] = (char)c;
        } else if (json && (c == '"' || c == '\\')) {
            p[o++] = '\\';
            p[o++] = (char)c;
        } else if (json) {
            memcpy(p + o, "\\u00", 4);
            o += 4;
            p[o++] = hex[c >> 4];
            p[o++] = hex[c & 15];
        } else {
            p[o++] = '\\';
            p[o++] = 'x';
            p[o++] = hex[c >> 4];
            p[o++] = hex[c & 15];
        }
    }
    return o;
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

void alog_record(struct alog *a, const struct sockaddr_storage *peer,
                 const struct http_request *req, unsigned status, uint64_t body_bytes)
{
    if (a->fd < 0)
        return;
    if (a->len + RECORD_MAX > sizeof a->buf) {
        SB_ADD(a->slot->log_dropped, 1);
        return;
    }
    update_stamp(a);
    char addr[64];
    peer_text(peer, addr, sizeof addr);
    char *p = a->buf + a->len;
    size_t room = RECORD_MAX - 64, o = 0;
    const struct http_str *ref = req ? header(req, "referer", 7) : NULL;
    const struct http_str *ua = req ? header(req, "user-agent", 10) : NULL;
    struct http_str none = {"-", 1};
    if (!ref)
        ref = &none;
    if (!ua)
        ua = &none;
    int json = a->fmt == ACCESS_LOG_JSON;
    o += (size_t)snprintf(p, room,
                          json ? "{\"time\":\"%s\",\"remote_addr\":\"%s\",\"request\":\""
                               : "%2$s - - [%1$s] \"",
                          a->stamp, addr);
    if (req) {
        o += put_escaped(p + o, room - o, req->method_str.p, req->method_str.len, json);
        p[o++] = ' ';
        o += put_escaped(p + o, room / 2 - o, req->target.p, req->target.len, json);
        o += (size_t)snprintf(p + o, room - o, " HTTP/1.%u", req->minor);
    } else {
        p[o++] = '-';
    }
    o += (size_t)snprintf(p + o, room - o,
                          json ? "\",\"status\":%u,\"body_bytes_sent\":%llu,\"referer\":\""
                               : "\" %u %llu \"",
                          status, (unsigned long long)body_bytes);
    o += put_escaped(p + o, room - o - 512, ref->p, ref->len, json);
    o += (size_t)snprintf(p + o, room - o, json ? "\",\"user_agent\":\"" : "\" \"");
    o += put_escaped(p + o, room - o - 16, ua->p, ua->len, json);
    o += (size_t)snprintf(p + o, room - o, json ? "\"}\n" : "\"\n");
    a->len += o;
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

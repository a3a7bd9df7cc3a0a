/* Reading access-log records back, for the unit tests and the fuzz targets:
 * a request made from four fields of any bytes; text_of(), which decodes a
 * binary record as the logger does and makes its line; and record_ok(), which
 * checks that a record is one line of at most ALOG_RECORD_MAX bytes, well
 * formed (Combined Log Format with only \xHH escapes, or valid JSON with
 * the keys in order) and carrying those fields, each whole or cut with the
 * "..." mark. Static functions: include it from one .c file. */
#ifndef HERD_TESTS_ALOG_CHECK_H
#define HERD_TESTS_ALOG_CHECK_H

#include <stddef.h>
#include <string.h>

#include "proc/accesslog.h"

/* ---- the request a record is made from ---- */

struct fields {
    const char *method, *target, *referer, *ua; /* referer, ua: NULL = absent */
    size_t mlen, tlen, rlen, ulen;
};

static struct http_request req;

static const struct http_request *make_req(const struct fields *f)
{
    memset(&req, 0, sizeof req);
    req.minor = 1;
    req.method_str = (struct http_str){f->method, (uint32_t)f->mlen};
    req.target = (struct http_str){f->target, (uint32_t)f->tlen};
    req.headers[req.nheaders++] = (struct http_header){{"Host", 4}, {"t", 1}};
    if (f->referer)
        req.headers[req.nheaders++] =
            (struct http_header){{"Referer", 7}, {f->referer, (uint32_t)f->rlen}};
    if (f->ua)
        req.headers[req.nheaders++] =
            (struct http_header){{"user-AGENT", 10}, {f->ua, (uint32_t)f->ulen}};
    return &req;
}

/* ---- a binary record as the logger turns it into text ---- */

static char text[ALOG_RECORD_MAX];
static size_t text_len;

/* Decodes the record at bin[0..n) into its line (text[0..text_len));
 * returns the record's length on the wire, or -1 when it does not decode. */
static long text_of(const char *bin, size_t n)
{
    static struct alog_cache stamps;
    static int ready;
    if (!ready++)
        alog_cache_init(&stamps);
    struct alog_entry e;
    long k = alog_decode(bin, n, &e);
    text_len = k < 0 ? 0 : alog_text(&stamps, &e, text);
    return k;
}

/* ---- reading a record back ---- */

/* got[0..glen) is orig[0..olen) whole, or a shorter prefix of it followed
 * by the cut mark. */
static int whole_or_cut(const char *got, size_t glen, const char *orig, size_t olen)
{
    if (glen == olen && memcmp(got, orig, olen) == 0)
        return 1;
    return glen >= 3 && glen - 3 < olen && memcmp(got + glen - 3, "...", 3) == 0 &&
           memcmp(got, orig, glen - 3) == 0;
}

/* The decoded request field is method' SP target' " HTTP/1.1", each part
 * whole or cut. The method may hold spaces and "...", so every place where
 * it could end is tried: within the prefix got shares with the method. */
static int request_matches(const char *got, size_t glen, const struct fields *f)
{
    static const char tail[] = " HTTP/1.1";
    size_t tl = sizeof tail - 1;
    if (glen < tl + 1 || memcmp(got + glen - tl, tail, tl) != 0)
        return 0;
    glen -= tl;
    size_t same = 0; /* bytes got and the method have in common */
    while (same < glen && same < f->mlen && got[same] == f->method[same])
        same++;
    for (size_t k = 0; k <= same; k++) {
        size_t mpart = k == f->mlen ? k : k + 3; /* whole, or k bytes and the mark */
        if (mpart >= glen || got[mpart] != ' ' ||
            (k < f->mlen && memcmp(got + k, "...", 3) != 0))
            continue;
        if (whole_or_cut(got + mpart + 1, glen - mpart - 1, f->target, f->tlen))
            return 1;
    }
    return 0;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Decodes a Combined Log Format quoted field starting after its opening
 * quote; returns the position after the closing quote or NULL. Only \xHH
 * escapes, no raw quote, control or non-ASCII byte may appear. */
static const char *clf_field(const char *p, const char *end, char *out, size_t *olen)
{
    size_t n = 0;
    for (; p < end && *p != '"'; p++) {
        unsigned char c = (unsigned char)*p;
        if (c < 0x20 || c >= 0x7f)
            return NULL;
        if (c == '\\') {
            if (end - p < 4 || p[1] != 'x' || hexval(p[2]) < 0 || hexval(p[3]) < 0)
                return NULL;
            c = (unsigned char)(hexval(p[2]) * 16 + hexval(p[3]));
            p += 3;
        }
        out[n++] = (char)c;
    }
    *olen = n;
    return p < end ? p + 1 : NULL;
}

static char dec[4][ALOG_RECORD_MAX]; /* request, referer, ua, scratch */
static size_t dlen[4];

/* 'ADDR - - [TIME] "REQ" STATUS BYTES "REF" "UA"' without its newline. */
static int parse_clf(const char *p, const char *end)
{
    p = memchr(p, '[', (size_t)(end - p));
    if (!p || !(p = memchr(p, ']', (size_t)(end - p))) || end - p < 3 || memcmp(p, "] \"", 3))
        return 0;
    if (!(p = clf_field(p + 3, end, dec[0], &dlen[0])) || p == end || *p++ != ' ')
        return 0;
    for (int num = 0; num < 2; num++) {
        const char *d = p;
        while (p < end && *p >= '0' && *p <= '9')
            p++;
        if (p == d || p == end || *p++ != ' ')
            return 0;
    }
    if (p == end || *p++ != '"' || !(p = clf_field(p, end, dec[1], &dlen[1])))
        return 0;
    if (end - p < 2 || memcmp(p, " \"", 2) || !(p = clf_field(p + 2, end, dec[2], &dlen[2])))
        return 0;
    return p == end;
}

static int hexval_any(char c)
{
    return c >= 'A' && c <= 'F' ? c - 'A' + 10 : hexval(c);
}

/* Decodes a JSON string starting after its opening quote; returns the
 * position after the closing quote or NULL when it is not valid JSON. Raw
 * bytes >= 0x7f are refused too: the log escapes every one of them. */
static const char *json_string(const char *p, const char *end, char *out, size_t *olen)
{
    size_t n = 0;
    for (; p < end && *p != '"'; p++) {
        unsigned char c = (unsigned char)*p;
        if (c < 0x20 || c >= 0x7f)
            return NULL;
        if (c == '\\') {
            if (end - p < 2)
                return NULL;
            const char *simple = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
            const char *k = p[1] ? strchr(simple, p[1]) : NULL;
            if (k) {
                c = (unsigned char)to[k - simple];
                p++;
            } else if (p[1] == 'u' && end - p >= 6) {
                int v = 0;
                for (int i = 2; i < 6; i++) {
                    if (hexval_any(p[i]) < 0)
                        return NULL;
                    v = v * 16 + hexval_any(p[i]);
                }
                if (v > 0xff)
                    return NULL; /* the log only writes bytes */
                c = (unsigned char)v;
                p += 5;
            } else {
                return NULL;
            }
        }
        if (n == ALOG_RECORD_MAX)
            return NULL;
        out[n++] = (char)c;
    }
    *olen = n;
    return p < end ? p + 1 : NULL;
}

/* The one JSON object of a record, keys in order; strings decoded into dec. */
static int parse_json(const char *p, const char *end)
{
    static const struct {
        const char *key;
        int slot; /* dec[] index for strings, -1 for numbers */
    } keys[] = {
        {"time", 3}, {"remote_addr", 3}, {"request", 0}, {"status", -1},
        {"body_bytes_sent", -1}, {"referer", 1}, {"user_agent", 2}, {"generation", -1},
    };
    if (p == end || *p++ != '{')
        return 0;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        size_t kl;
        if (i && (p == end || *p++ != ','))
            return 0;
        if (p == end || *p++ != '"' || !(p = json_string(p, end, dec[3], &kl)))
            return 0;
        if (kl != strlen(keys[i].key) || memcmp(dec[3], keys[i].key, kl) || p == end ||
            *p++ != ':')
            return 0;
        if (keys[i].slot >= 0) {
            int k = keys[i].slot;
            if (p == end || *p++ != '"' || !(p = json_string(p, end, dec[k], &dlen[k])))
                return 0;
        } else {
            const char *d = p;
            while (p < end && *p >= '0' && *p <= '9')
                p++;
            if (p == d)
                return 0;
        }
    }
    return end - p == 1 && *p == '}';
}

/* One record: at most ALOG_RECORD_MAX bytes, one line ending in its only
 * newline, well-formed, its fields those of f (whole or cut); f NULL: a
 * request that failed to parse. */
static int record_ok(const char *rec, size_t len, enum log_format fmt, const struct fields *f)
{
    if (len == 0 || len > ALOG_RECORD_MAX || rec[len - 1] != '\n' ||
        memchr(rec, '\n', len - 1))
        return 0;
    const char *end = rec + len - 1;
    if (!(fmt == ACCESS_LOG_JSON ? parse_json(rec, end) : parse_clf(rec, end)))
        return 0;
    if (!f)
        return dlen[0] == 1 && dec[0][0] == '-' && dlen[1] == 1 && dlen[2] == 1;
    return request_matches(dec[0], dlen[0], f) &&
           whole_or_cut(dec[1], dlen[1], f->referer ? f->referer : "-",
                        f->referer ? f->rlen : 1) &&
           whole_or_cut(dec[2], dlen[2], f->ua ? f->ua : "-", f->ua ? f->ulen : 1);
}

#endif

/* libFuzzer target: the input is a connection's byte stream. Requests are
 * parsed back to back as conn.c does, skipping any Content-Length or
 * chunked body, once with max_head 8192 and once with 256. Any broken
 * invariant aborts. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http/body.h"
#include "http/parser.h"

#define MAX_BODY ((uint64_t)1 << 20)

#define ENSURE(c)                                                                   \
    do {                                                                            \
        if (!(c))                                                                   \
            fuzz_fail(#c, __LINE__);                                                \
    } while (0)

static void fuzz_fail(const char *what, int line)
{
    __builtin_trap();
    (void)what;
    (void)line;
}

/* s lies within [lo, hi), or is absent (NULL, 0). */
static int within(struct http_str s, const char *lo, const char *hi)
{
    if (!s.p)
        return s.len == 0;
    return s.p >= lo && s.p <= hi && s.len <= (size_t)(hi - s.p);
}

static int has_ctl(struct http_str s)
{
    for (uint32_t i = 0; i < s.len; i++) {
        unsigned char c = (unsigned char)s.p[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return 1;
    }
    return 0;
}

/* Lines of the header named name (lowercase). */
static unsigned lines_named(const struct http_request *req, const char *name)
{
    unsigned n = 0;
    size_t len = strlen(name);
    for (unsigned i = 0; i < req->nheaders; i++)
        n += req->headers[i].name.len == len &&
             strncasecmp(req->headers[i].name.p, name, len) == 0;
    return n;
}

/* The captured validators and Range against the lines they came from: a
 * field on one line is captured, a repeat is noted, a singleton on two
 * lines reads as absent (with Range when it is If-Range), and a list
 * keeps its first line. */
static void check_captures(const struct http_request *req)
{
    static const struct {
        const char *name;
        size_t off;
        uint8_t bit;
        int list;
    } f[] = {
        {"if-match", offsetof(struct http_request, if_match), HTTP_REPEAT_IF_MATCH, 1},
        {"if-none-match", offsetof(struct http_request, if_none_match),
         HTTP_REPEAT_IF_NONE_MATCH, 1},
        {"if-modified-since", offsetof(struct http_request, if_modified_since),
         HTTP_REPEAT_IF_MODIFIED_SINCE, 0},
        {"if-unmodified-since", offsetof(struct http_request, if_unmodified_since),
         HTTP_REPEAT_IF_UNMODIFIED_SINCE, 0},
        {"range", offsetof(struct http_request, range), HTTP_REPEAT_RANGE, 0},
        {"if-range", offsetof(struct http_request, if_range), HTTP_REPEAT_IF_RANGE, 0},
    };
    uint8_t bits = 0;
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        unsigned n = lines_named(req, f[i].name);
        const struct http_str *v = (const struct http_str *)((const char *)req + f[i].off);
        ENSURE(!(req->repeated & f[i].bit) == (n < 2));
        bits |= f[i].bit;
        if (n == 0 || (n >= 2 && !f[i].list))
            ENSURE(v->p == NULL && v->len == 0);
        if (n >= 2 && f[i].list)
            ENSURE(v->p != NULL);
    }
    ENSURE((req->repeated & ~bits) == 0);
    if (req->repeated & HTTP_REPEAT_IF_RANGE)
        ENSURE(req->range.p == NULL);
}

/* Parses a copy of exactly len bytes, so reading past it is an ASan error. */
static int parse_copy(const char *p, size_t len, size_t max_head, struct http_request *req)
{
    char *c = malloc(len ? len : 1);
    memcpy(c, p, len);
    int n = http_parse_request(c, len, max_head, req);
    free(c);
    return n;
}

static void check_head(const char *p, size_t avail, int n, size_t max_head,
                       const struct http_request *req)
{
    const char *lo = p, *hi = p + n;
    ENSURE(req->error == 0);
    ENSURE(req->minor <= 1);
    ENSURE(req->nheaders <= HTTP_MAX_HEADERS);
    ENSURE(req->chunked <= 1 && req->conn_close <= 1 && req->conn_keepalive <= 1);
    ENSURE(req->content_length >= -1);
    ENSURE(!(req->chunked && req->content_length >= 0)); /* no TE + CL */
    ENSURE(!(req->chunked && req->minor == 0));
    ENSURE(req->minor == 0 || req->host.p != NULL);
    ENSURE(req->method_str.p && req->method_str.len > 0 && within(req->method_str, lo, hi));
    ENSURE(req->target.p && req->target.len > 0 && within(req->target, lo, hi));
    ENSURE(req->target.p > req->method_str.p);
    ENSURE(memchr(req->target.p, ' ', req->target.len) == NULL);
    ENSURE(!has_ctl(req->target));
    /* path: inside the target, or the constant "/" of "http://host" */
    if (!within(req->path, req->target.p, req->target.p + req->target.len))
        ENSURE(req->path.len == 1 && req->path.p[0] == '/');
    ENSURE(req->path.len > 0);
    ENSURE(req->path.p[0] == '/' || (req->path.len == 1 && req->path.p[0] == '*'));
    ENSURE(memchr(req->path.p, '?', req->path.len) == NULL);
    ENSURE(within(req->query, req->target.p, req->target.p + req->target.len));
    ENSURE(within(req->host, lo, hi) && within(req->if_none_match, lo, hi));
    ENSURE(within(req->if_modified_since, lo, hi) && within(req->range, lo, hi));
    ENSURE(within(req->if_range, lo, hi) && within(req->if_match, lo, hi));
    ENSURE(within(req->if_unmodified_since, lo, hi));
    check_captures(req);
    for (unsigned i = 0; i < req->nheaders; i++) {
        const struct http_header *h = &req->headers[i];
        ENSURE(h->name.p && h->name.len > 0 && within(h->name, lo, hi));
        ENSURE(h->value.p && within(h->value, lo, hi));
        ENSURE(memchr(h->name.p, ':', h->name.len) == NULL);
        ENSURE(!has_ctl(h->name) && !has_ctl(h->value));
        ENSURE(memchr(h->value.p, '\0', h->value.len) == NULL);
        if (h->value.len) {
            char a = h->value.p[0], z = h->value.p[h->value.len - 1];
            ENSURE(a != ' ' && a != '\t' && z != ' ' && z != '\t');
        }
    }
    /* the head ends with an empty line */
    ENSURE(p[n - 1] == '\n');
    ENSURE(n >= 2 && (p[n - 2] == '\n' || (n >= 3 && p[n - 2] == '\r' && p[n - 3] == '\n')));

    /* The head alone gives the same result: nothing after it was read. */
    struct http_request again;
    memset(&again, 0, sizeof again);
    ENSURE(parse_copy(p, (size_t)n, max_head, &again) == n);
    ENSURE(again.method == req->method && again.minor == req->minor);
    ENSURE(again.chunked == req->chunked && again.content_length == req->content_length);
    ENSURE(again.nheaders == req->nheaders && again.target.len == req->target.len);
    ENSURE(again.conn_close == req->conn_close && again.conn_keepalive == req->conn_keepalive);
    ENSURE(again.repeated == req->repeated);
    /* Any shorter prefix is incomplete. */
    ENSURE(parse_copy(p, (size_t)n - 1, max_head, &again) == HTTP_PARSE_INCOMPLETE);
    ENSURE(parse_copy(p, (size_t)n / 2, max_head, &again) == HTTP_PARSE_INCOMPLETE);
    (void)avail;
}

static void run(const char *buf, size_t size, size_t max_head)
{
    struct body_skip skip;
    memset(&skip, 0, sizeof skip);
    size_t pos = 0;
    for (int rounds = 0; pos < size && rounds < 10000; rounds++) {
        if (body_skip_active(&skip)) {
            long n = body_skip(&skip, buf + pos, size - pos, MAX_BODY);
            if (n < 0)
                return;
            ENSURE((size_t)n <= size - pos);
            ENSURE(n > 0); /* an active skip given bytes takes some */
            ENSURE((size_t)n == size - pos || !body_skip_active(&skip));
            pos += (size_t)n;
            continue;
        }
        struct http_request req;
        memset(&req, 0xa5, sizeof req);
        size_t avail = size - pos;
        int n = http_parse_request(buf + pos, avail, max_head, &req);
        if (n == HTTP_PARSE_INCOMPLETE) {
            /* waiting is bounded: max_head plus at most 64 empty-line bytes */
            ENSURE(avail < max_head + 65);
            return;
        }
        if (n == HTTP_PARSE_ERROR) {
            ENSURE(req.error == 400 || req.error == 414 || req.error == 431 ||
                   req.error == 505 || req.error == 405);
            /* 405 only for CONNECT host:port, a valid target herd does not serve */
            ENSURE(req.error != 405 || req.method == HTTP_CONNECT);
            return;
        }
        ENSURE(n > 0 && (size_t)n <= avail);
        ENSURE((size_t)n <= max_head + 64);
        check_head(buf + pos, avail, n, max_head, &req);
        pos += (size_t)n;
        if (req.content_length > 0 || req.chunked)
            body_skip_start(&skip, req.content_length, req.chunked, 8192);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    run((const char *)data, size, 8192);
    run((const char *)data, size, 256);
    return 0;
}

#include "http/fcgi_params.h"

#include <stdio.h>
#include <string.h>

#include "http/fcgi.h"

/* Writes name-value pairs into PARAMS records: a record is closed (its
 * header filled in) when the next pair would not fit in it. */
struct pw {
    char *buf;
    size_t len, cap;
    size_t rec;                  /* offset of the open record's header */
    int full;
    const struct fcgi_env *env;
};

static void put(struct pw *w, const void *p, size_t n)
{
    if (w->full || n > w->cap - w->len) {
        w->full = 1;
        return;
    }
    memcpy(w->buf + w->len, p, n);
    w->len += n;
}

static void rec_open(struct pw *w)
{
    w->rec = w->len;
    static const char zero[FCGI_HEADER_LEN];
    put(w, zero, sizeof zero);
}

static void rec_close(struct pw *w)
{
    if (!w->full)
        fcgi_record_head((unsigned char *)w->buf + w->rec, FCGI_PARAMS,
                         w->len - w->rec - FCGI_HEADER_LEN);
}

static void put_len(struct pw *w, size_t n)
{
    unsigned char b[4] = {(unsigned char)(0x80 | (n >> 24)), (unsigned char)(n >> 16),
                          (unsigned char)(n >> 8), (unsigned char)n};
    if (n < 128)
        put(w, b + 3, 1);
    else
        put(w, b, 4);
}

/* Starts a pair whose value (vlen bytes) the caller appends; 0 when the
 * pair is too long for any record (PHP reads each record's pairs on their
 * own): the request is refused then, as when the records overflow the
 * buffer (431), since a script run without a query string or a header
 * it was sent may do what the client never asked (nginx refuses too). */
static int pair_begin(struct pw *w, const char *name, size_t nlen, size_t vlen)
{
    size_t n = (nlen < 128 ? 1 : 4) + (vlen < 128 ? 1 : 4) + nlen + vlen;
    if (n > FCGI_CONTENT_MAX) {
        w->full = 1;
        return 0;
    }
    if (w->len - w->rec - FCGI_HEADER_LEN + n > FCGI_CONTENT_MAX) {
        rec_close(w);
        rec_open(w);
    }
    put_len(w, nlen);
    put_len(w, vlen);
    put(w, name, nlen);
    return 1;
}

static void pair(struct pw *w, const char *name, size_t nlen, const char *v, size_t vlen)
{
    if (pair_begin(w, name, nlen, vlen))
        put(w, v, vlen);
}

/* Does --fastcgi-param set this parameter of herd's own? */
static int overridden(const struct pw *w, const char *name, size_t nlen)
{
    for (int i = 0; i < w->env->nextra; i++)
        if (!strncmp(w->env->extra[i], name, nlen) && w->env->extra[i][nlen] == '=')
            return 1;
    return 0;
}

/* A parameter of herd's own, unless --fastcgi-param sets it. */
static void std(struct pw *w, const char *name, const char *v, size_t vlen)
{
    size_t nlen = strlen(name);
    if (!overridden(w, name, nlen))
        pair(w, name, nlen, v, vlen);
}

/* A file name under the docroot: written in two pieces, so no path is
 * cut short by a buffer of its own (the record's bound still holds). */
static void std_file(struct pw *w, const char *name, const char *rel, size_t rlen)
{
    size_t nlen = strlen(name), dlen = strlen(w->env->docroot);
    if (!overridden(w, name, nlen) && pair_begin(w, name, nlen, dlen + rlen)) {
        put(w, w->env->docroot, dlen);
        put(w, rel, rlen);
    }
}

static void std_s(struct pw *w, const char *name, const char *v) { std(w, name, v, strlen(v)); }

static void std_u(struct pw *w, const char *name, unsigned long long v)
{
    char num[24];
    int n = snprintf(num, sizeof num, "%llu", v);
    std(w, name, num, (size_t)n);
}

static int same_name(const struct http_str *a, const struct http_str *b)
{
    if (a->len != b->len)
        return 0;
    for (size_t i = 0; i < a->len; i++)
        if ((a->p[i] | 0x20) != (b->p[i] | 0x20))
            return 0;
    return 1;
}

static int name_is(const struct http_str *a, const char *lower)
{
    struct http_str b = {lower, (uint32_t)strlen(lower)};
    return same_name(a, &b);
}

/* Does a header name become a parameter no other name becomes? Only
 * letters, digits and '-' (nginx's ignore_invalid_headers): '-' turns
 * into '_', and PHP turns '.' (and ' ', '[') into '_' too, so
 * `X_Forwarded_For` or `X.Forwarded.For` would be read as the
 * X-Forwarded-For a front proxy vouches for. */
static int plain_name(const struct http_str *name)
{
    for (size_t i = 0; i < name->len; i++) {
        char c = name->p[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-'))
            return 0;
    }
    return 1;
}

/* Each request header once, as HTTP_NAME, its repeats joined. */
static void http_headers(struct pw *w, const struct http_request *req)
{
    const struct http_header *hs = req->headers;
    for (int i = 0; i < req->nheaders; i++) {
        const struct http_str *name = &hs[i].name;
        if (!plain_name(name) || name_is(name, "proxy") ||
            name_is(name, "content-length") || name_is(name, "content-type") || name->len > 200)
            continue;
        int repeat = 0;
        for (int j = 0; j < i && !repeat; j++)
            repeat = same_name(&hs[j].name, name);
        if (repeat)
            continue; /* written with its first occurrence */
        size_t vlen = 0;
        for (int j = i; j < req->nheaders; j++)
            if (same_name(&hs[j].name, name))
                vlen += hs[j].value.len + (j > i ? 2 : 0);
        char n[208] = "HTTP_";
        for (size_t k = 0; k < name->len; k++) {
            char c = name->p[k];
            n[5 + k] = c == '-' ? '_' : (c >= 'a' && c <= 'z') ? (char)(c - 32) : c;
        }
        if (!pair_begin(w, n, 5 + name->len, vlen))
            continue;
        const char *sep = name_is(name, "cookie") ? "; " : ", ";
        for (int j = i; j < req->nheaders; j++) {
            if (!same_name(&hs[j].name, name))
                continue;
            if (j > i)
                put(w, sep, 2);
            put(w, hs[j].value.p, hs[j].value.len);
        }
    }
}

int fcgi_has_body(const struct http_request *req)
{
    return req->chunked || req->content_length > 0;
}

/* SERVER_NAME: the Host header without its port, else the address. */
static void server_name(struct pw *w, const struct http_request *req)
{
    size_t n = req->host.len;
    const char *h = req->host.p;
    if (!n) {
        std_s(w, "SERVER_NAME", w->env->server_addr);
        return;
    }
    size_t end = n;
    if (h[0] == '[') {
        const char *rb = memchr(h, ']', n);
        end = rb ? (size_t)(rb - h) + 1 : n;
    } else {
        const char *colon = memchr(h, ':', n);
        end = colon ? (size_t)(colon - h) : n;
    }
    std(w, "SERVER_NAME", h, end);
}

static void cgi_params(struct pw *w, const struct http_request *req)
{
    const struct fcgi_env *e = w->env;
    std_file(w, "SCRIPT_FILENAME", e->script, e->script_len);
    std(w, "SCRIPT_NAME", e->script, e->script_len);
    std(w, "PATH_INFO", e->path_info, e->path_info_len);
    if (e->path_info_len)
        std_file(w, "PATH_TRANSLATED", e->path_info, e->path_info_len);
    std(w, "QUERY_STRING", req->query.p, req->query.len);
    std(w, "REQUEST_METHOD", req->method_str.p, req->method_str.len);
    for (int i = 0; i < req->nheaders; i++)
        if (name_is(&req->headers[i].name, "content-type")) {
            std(w, "CONTENT_TYPE", req->headers[i].value.p, req->headers[i].value.len);
            break;
        }
    if (req->content_length >= 0)
        std_u(w, "CONTENT_LENGTH", (unsigned long long)req->content_length);
    std(w, "REQUEST_URI", req->target.p, req->target.len);
    std(w, "DOCUMENT_URI", e->uri, e->uri_len);
    std_s(w, "DOCUMENT_ROOT", e->docroot);
    std_s(w, "SERVER_PROTOCOL", req->minor ? "HTTP/1.1" : "HTTP/1.0");
    std_s(w, "GATEWAY_INTERFACE", "CGI/1.1");
    std_s(w, "SERVER_SOFTWARE", "herd");
    std_s(w, "REMOTE_ADDR", e->remote_addr);
    std_u(w, "REMOTE_PORT", e->remote_port);
    std_s(w, "SERVER_ADDR", e->server_addr);
    std_u(w, "SERVER_PORT", e->server_port);
    server_name(w, req);
    if (e->https)
        std_s(w, "HTTPS", "on");
    /* php-cgi built with force-cgi-redirect refuses to run without it */
    std_s(w, "REDIRECT_STATUS", "200");
}

long fcgi_build_params(const struct http_request *req, const struct fcgi_env *env, char *buf,
                       size_t cap)
{
    struct pw w = {buf, 0, cap, 0, 0, env};
    unsigned char begin[16] = {0};
    fcgi_record_head(begin, FCGI_BEGIN_REQUEST, 8);
    begin[9] = FCGI_RESPONDER;
    begin[10] = FCGI_KEEP_CONN;
    put(&w, begin, sizeof begin);
    rec_open(&w);
    cgi_params(&w, req);
    http_headers(&w, req);
    for (int i = 0; i < env->nextra; i++) {
        const char *eq = strchr(env->extra[i], '=');
        if (eq)
            pair(&w, env->extra[i], (size_t)(eq - env->extra[i]), eq + 1, strlen(eq + 1));
    }
    rec_close(&w);
    unsigned char end[FCGI_HEADER_LEN];
    fcgi_record_head(end, FCGI_PARAMS, 0);
    put(&w, end, sizeof end);
    if (!fcgi_has_body(req)) {
        fcgi_record_head(end, FCGI_STDIN, 0);
        put(&w, end, sizeof end);
    }
    return w.full ? -1 : (long)w.len;
}

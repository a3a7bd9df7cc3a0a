/* The HTTP/1.1 upstream codec: http/proxy.c builds and parses the heads,
 * http/reframe.c frames the bodies anew. A Content-Length or
 * close-delimited response body is passed on in place (no copy); a chunked
 * one is read aside and re-chunked. */
#include "http/upstream_codec.h"

#include <string.h>

#include "http/proxy.h"

/* upstream_framing.kind beyond enum upstream_body: a close-delimited body
 * re-chunked for an HTTP/1.1 client, whose connection then stays open. */
enum { UB_CLOSE_CHUNKED = 8 };

static long request_head(const struct http_request *req, const struct upstream_req_info *info,
                         char *buf, size_t cap)
{
    return proxy_build_request(req, info->path, info->client_addr, info->default_host,
                               info->pass_underscores, info->https, buf, cap);
}

static void request_body_start(struct upstream_framing *b, const struct http_request *req,
                               size_t max_line)
{
    memset(b, 0, sizeof *b);
    if (!req->chunked && req->content_length <= 0)
        return;
    b->kind = req->chunked ? UB_CHUNKED : UB_LENGTH;
    b->aside = 1;
    body_skip_start(&b->skip, req->content_length, req->chunked, max_line);
    b->active = 1;
}

static long request_body(struct upstream_framing *b, const char *src, size_t n, uint64_t max,
                         struct reframe_out *out)
{
    long k = body_reframe(&b->skip, b->kind == UB_CHUNKED, src, n, max, out);
    b->active = (uint8_t)body_skip_active(&b->skip);
    return k;
}

static int response_head(char *buf, size_t len, size_t max_head, int head_request,
                         int client_minor, struct upstream_head *h, struct upstream_framing *b,
                         char *out, size_t cap)
{
    struct upstream_response r;
    h->err = NULL;
    int n = upstream_parse_response(buf, len, max_head, &r);
    if (n == HTTP_PARSE_INCOMPLETE)
        return n;
    if (n == HTTP_PARSE_ERROR || r.status == 101) {
        h->err = "malformed response head";
        return HTTP_PARSE_ERROR;
    }
    h->status = r.status;
    if (r.status < 200) /* interim answers (we never ask for 100-continue) */
        return n;
    enum upstream_body kind = upstream_body_kind(&r, head_request);
    if (kind == UB_CHUNKED && client_minor == 0) {
        h->err = "chunked reply to HTTP/1.0";
        return HTTP_PARSE_ERROR;
    }
    /* a body that ends with the upstream's close goes to a 1.1 client as
     * herd's chunks, so the client's connection need not end with it */
    int rechunk = kind == UB_CLOSE && client_minor;
    int keep = h->keepalive && (kind != UB_CLOSE || rechunk);
    /* HEAD: the client learns the framing a GET would get (RFC 9110 9.3.2);
     * a Content-Length passes as a header, chunked is herd's to say */
    enum upstream_body said = head_request && r.chunked && client_minor ? UB_CHUNKED
                              : rechunk                                  ? UB_CHUNKED
                                                                         : kind;
    long hl = proxy_build_response(&r, said, client_minor, keep, h->pass_server, out, cap);
    if (hl < 0)
        return HTTP_PARSE_ERROR;
    h->keepalive = (uint8_t)keep;
    /* A HEAD or 204 answer whose head announces a body (for a HEAD, no
     * Content-Length announces one that ends at a close) has none here, but
     * an upstream that sends one anyway (an app that answers HEAD as GET)
     * sends it after the head, often in later segments: pooled, the
     * connection would hand those bytes to the next request as its answer,
     * another client's. Such a connection is not reused (a 304 may carry
     * the representation's length and framing by right: RFC 9110 8.6,
     * RFC 9112 6.1). */
    int may_trail = head_request ? r.chunked || r.content_length != 0 /* none: till a close */
                                 : r.status == 204 && (r.chunked || r.content_length > 0);
    h->reusable = !r.conn_close && r.minor == 1 && kind != UB_CLOSE && client_minor &&
                  !may_trail;
    h->len = (size_t)hl;
    memset(b, 0, sizeof *b);
    b->kind = (uint8_t)(rechunk ? UB_CLOSE_CHUNKED : kind);
    b->aside = kind == UB_CHUNKED || rechunk;
    b->active = kind != UB_NONE;
    if (kind == UB_LENGTH || kind == UB_CHUNKED)
        body_skip_start(&b->skip, kind == UB_LENGTH ? r.content_length : 0, kind == UB_CHUNKED,
                        max_head);
    return n;
}

static void emit(struct reframe_out *out, const char *p, size_t n)
{
    size_t room = out->cap - out->len, k = n < room ? n : room;
    memcpy(out->buf + out->len, p, k);
    out->len += k;
    if (k < n) {
        memcpy(out->over + out->over_len, p + k, n - k);
        out->over_len += n - k;
    }
}

/* src[0..n) of a close-delimited body as one chunk; n == 0: the upstream
 * closed, the last chunk. */
static long rechunk_body(const char *src, size_t n, struct reframe_out *out)
{
    if (!n) {
        emit(out, BODY_LAST_CHUNK, sizeof BODY_LAST_CHUNK - 1);
        return 0;
    }
    char line[19];
    emit(out, line, body_chunk_head(n, line));
    emit(out, src, n);
    emit(out, "\r\n", 2);
    return (long)n;
}

static long response_body(struct upstream_framing *b, const char *src, size_t n,
                          struct reframe_out *out)
{
    if (b->kind == UB_CLOSE_CHUNKED)
        return rechunk_body(src, n, out);
    if (b->kind == UB_CLOSE) {
        out->len += n;
        return (long)n;
    }
    long k;
    if (b->kind == UB_CHUNKED) {
        k = body_reframe(&b->skip, 1, src, n, UINT64_MAX, out);
    } else if ((k = body_skip(&b->skip, src, n, UINT64_MAX)) >= 0) {
        out->len += (size_t)k;
    }
    if (k >= 0)
        b->active = (uint8_t)body_skip_active(&b->skip);
    return k;
}

static int response_ends_at_close(const struct upstream_framing *b)
{
    return b->kind == UB_CLOSE || b->kind == UB_CLOSE_CHUNKED;
}

const struct upstream_codec upstream_http1 = {
    .name = "http",
    .request_head = request_head,
    .request_body_start = request_body_start,
    .request_body = request_body,
    .response_head = response_head,
    .response_body = response_body,
    .response_ends_at_close = response_ends_at_close,
};

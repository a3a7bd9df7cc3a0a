/* The HTTP/1.1 upstream codec: http/proxy.c builds and parses the heads,
 * http/reframe.c frames the bodies anew. A Content-Length or
 * close-delimited response body is passed on in place (no copy); a chunked
 * one is read aside and re-chunked. */
#include "http/upstream_codec.h"

#include <string.h>

#include "http/proxy.h"

static long request_head(const struct http_request *req, const struct upstream_req_info *info,
                         char *buf, size_t cap)
{
    return proxy_build_request(req, info->path, info->client_addr, info->default_host,
                               info->pass_underscores, buf, cap);
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

static int response_head(const char *buf, size_t len, size_t max_head, int head_request,
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
    int keep = h->keepalive && kind != UB_CLOSE;
    long hl = proxy_build_response(&r, kind, client_minor, keep, h->pass_server, out, cap);
    if (hl < 0)
        return HTTP_PARSE_ERROR;
    h->keepalive = (uint8_t)keep;
    h->reusable = !r.conn_close && r.minor == 1 && kind != UB_CLOSE && client_minor;
    h->len = (size_t)hl;
    memset(b, 0, sizeof *b);
    b->kind = (uint8_t)kind;
    b->aside = kind == UB_CHUNKED;
    b->active = kind != UB_NONE;
    if (kind == UB_LENGTH || kind == UB_CHUNKED)
        body_skip_start(&b->skip, kind == UB_LENGTH ? r.content_length : 0, kind == UB_CHUNKED,
                        max_head);
    return n;
}

static long response_body(struct upstream_framing *b, const char *src, size_t n,
                          struct reframe_out *out)
{
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
    return b->kind == UB_CLOSE;
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

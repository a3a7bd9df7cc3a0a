#include "http/handler.h"

#include <errno.h>
#include <string.h>

#include "core/clock.h"
#include "http/cond.h"
#include "http/path.h"
#include "http/range.h"

#define PUT_LIT(out, lit) resp_header_raw(out, lit, sizeof lit - 1)

static void error_close(struct http_out *out, struct http_plan *plan, unsigned status,
                        const struct http_request *req)
{
    resp_error(out, plan, status, req->minor, 0, req->method == HTTP_HEAD);
    /* The peer may still be sending the rest of a request we refused. */
    plan->linger = 1;
}

void http_handle_parse_error(const struct http_request *req, struct http_out *out,
                             struct http_plan *plan)
{
    resp_error(out, plan, req->error ? req->error : 400, 1, 0, 0);
    plan->linger = 1;
}

/* "Location: /dir/?query" for a directory asked for without its slash.
 * path is the normalised one (never the raw target, which could say
 * "//evil.example/../dir" and send a browser to another host), encoded
 * again; the query string is kept as sent, as nginx does. The head buffer
 * holds it: a driver leaves HTTP_HEAD_RESERVE + HTTP_STATUS_MAX +
 * max_header_size free, and 3 * 4096 + the query + the head fit. */
static void redirect_to_dir(const struct http_request *req, const char *path, size_t plen,
                            int keepalive, struct http_out *out, struct http_plan *plan)
{
    static const char body[] = "<html><body>Moved</body></html>\r\n";
    plan->head_off = (uint32_t)out->len;
    resp_status(out, 301);
    PUT_LIT(out, "Location: ");
    size_t room = out->cap - out->len;
    size_t rest = HTTP_HEAD_RESERVE + req->query.len; /* "/?query" and the head after it */
    int n = room > rest ? path_encode(path, plen, out->buf + out->len, room - rest) : -1;
    if (n < 0) {
        out->len = plan->head_off;
        return error_close(out, plan, 414, req);
    }
    out->len += (size_t)n;
    PUT_LIT(out, "/");
    if (req->query.len) {
        PUT_LIT(out, "?");
        resp_header_raw(out, req->query.p, req->query.len);
    }
    PUT_LIT(out, "\r\nContent-Type: text/html; charset=utf-8\r\n");
    resp_content_length(out, sizeof body - 1);
    resp_finish(out, req->minor, keepalive);
    plan->head_len = (uint32_t)(out->len - plan->head_off);
    plan->body = req->method == HTTP_HEAD ? NULL : body;
    plan->body_len = req->method == HTTP_HEAD ? 0 : sizeof body - 1;
    plan->status = 301;
}

static void send_file(const struct http_request *req, struct fc_entry *e, int keepalive,
                      struct http_out *out, struct http_plan *plan)
{
    off_t start = 0, len = e->size;
    unsigned status = 200;

    if (cond_not_modified(req, e->etag, e->etag_len, e->mtime)) {
        plan->head_off = (uint32_t)out->len;
        resp_status(out, 304);
        /* 304 repeats the validators but has no body and no Content-Type. */
        resp_header_raw(out, e->last_modified - 15, 15 + e->lm_len + 2);
        PUT_LIT(out, "ETag: ");
        resp_header_raw(out, e->etag, e->etag_len);
        PUT_LIT(out, "\r\n");
        resp_finish(out, req->minor, keepalive);
        plan->head_len = (uint32_t)(out->len - plan->head_off);
        plan->status = 304;
        fc_release(e);
        return;
    }
    if (req->range.p &&
        cond_if_range_ok(req, e->etag, e->etag_len, e->last_modified, e->lm_len)) {
        switch (range_parse(req->range.p, req->range.len, e->size, &start, &len)) {
        case RANGE_OK:
            status = 206;
            break;
        case RANGE_UNSATISFIABLE:
            plan->head_off = (uint32_t)out->len;
            resp_status(out, 416);
            PUT_LIT(out, "Content-Range: bytes */");
            out->len += fmt_u64(out->buf + out->len, (uint64_t)e->size);
            PUT_LIT(out, "\r\nContent-Length: 0\r\n");
            resp_finish(out, req->minor, keepalive);
            plan->head_len = (uint32_t)(out->len - plan->head_off);
            plan->status = 416;
            fc_release(e);
            return;
        case RANGE_NONE:
            start = 0;
            len = e->size;
            break;
        }
    }
    plan->head_off = (uint32_t)out->len;
    resp_status(out, status);
    resp_header_raw(out, e->hdr, e->hdr_len);
    if (status == 206) {
        PUT_LIT(out, "Content-Range: bytes ");
        out->len += fmt_u64(out->buf + out->len, (uint64_t)start);
        PUT_LIT(out, "-");
        out->len += fmt_u64(out->buf + out->len, (uint64_t)(start + len - 1));
        PUT_LIT(out, "/");
        out->len += fmt_u64(out->buf + out->len, (uint64_t)e->size);
        PUT_LIT(out, "\r\n");
    }
    resp_content_length(out, (uint64_t)len);
    resp_finish(out, req->minor, keepalive);
    plan->head_len = (uint32_t)(out->len - plan->head_off);
    plan->status = (uint16_t)status;
    if (req->method == HTTP_HEAD || len == 0) {
        fc_release(e);
        return;
    }
    plan->file = e;
    plan->file_off = start;
    plan->file_len = len;
}

static int query_has(const struct http_request *req, const char *kv)
{
    size_t n = strlen(kv);
    const char *q = req->query.p, *end = q + req->query.len;
    while (q && q + n <= end) {
        if (memcmp(q, kv, n) == 0 && (q + n == end || q[n] == '&'))
            return 1;
        q = memchr(q, '&', (size_t)(end - q));
        if (q)
            q++;
    }
    return 0;
}

/* Live counters; never cached by anyone. */
static void status_page(struct http_ctx *ctx, const struct http_request *req, int keepalive,
                        struct http_out *out, struct http_plan *plan)
{
    static const char *const types[] = {
        "application/json",
        "text/plain; version=0.0.4; charset=utf-8",
        "text/plain; charset=utf-8",
    };
    int fmt = query_has(req, "format=prometheus") ? 1 : query_has(req, "format=table") ? 2 : 0;
    /* The body is rendered into the free tail of the head buffer, not a
     * 32 KiB local: coroutine stacks are small (models/coro.c), and the
     * head written below stays clear of it (it fits in HTTP_HEAD_RESERVE). */
    char *body = out->buf + out->cap - HTTP_STATUS_MAX;
    size_t len = ctx->status(ctx->status_arg, fmt, body, HTTP_STATUS_MAX);
    plan->head_off = (uint32_t)out->len;
    resp_status(out, 200);
    PUT_LIT(out, "Content-Type: ");
    resp_header_raw(out, types[fmt], strlen(types[fmt]));
    PUT_LIT(out, "\r\nCache-Control: no-store\r\n");
    resp_content_length(out, len);
    resp_finish(out, req->minor, keepalive);
    if (req->method != HTTP_HEAD) {
        memmove(out->buf + out->len, body, len);
        out->len += len;
        plan->inline_len = (uint32_t)len;
    }
    plan->head_len = (uint32_t)(out->len - plan->head_off);
    plan->status = 200;
}

static void handle(struct http_ctx *ctx, const struct http_request *req, int keepalive,
                   int status_ok, struct http_out *out, struct http_plan *plan)
{
    const struct http_config *cfg = ctx->cfg;
    int head_only = req->method == HTTP_HEAD;

    if (req->content_length > 0 && (uint64_t)req->content_length > cfg->max_body_size)
        return error_close(out, plan, 413, req);
    if (req->method != HTTP_GET && req->method != HTTP_HEAD) {
        resp_error(out, plan, req->method == HTTP_OTHER ? 501 : 405, req->minor, keepalive,
                   0);
        return;
    }

    if (cfg->status_path[0] && ctx->status && req->path.len == strlen(cfg->status_path) &&
        memcmp(req->path.p, cfg->status_path, req->path.len) == 0) {
        if (!status_ok)
            return resp_error(out, plan, 403, req->minor, keepalive, head_only);
        return status_page(ctx, req, keepalive, out, plan);
    }

    char path[4096 + 16];
    int plen = path_normalize(req->path.p, req->path.len, path, sizeof path - 16);
    if (plen < 0)
        return error_close(out, plan, 400, req);
    if (!cfg->serve_dotfiles && path_has_dotfile(path, (size_t)plen))
        return resp_error(out, plan, 404, req->minor, keepalive, head_only);

    int want_dir = path[plen - 1] == '/';
    if (want_dir) {
        memcpy(path + plen, "index.html", 11);
        plen += 10;
    }
    const char *rel = path + 1;
    size_t rlen = (size_t)plen - 1;
    struct fc_entry *e;
    int rc = fc_lookup(ctx->fc, rel, rlen, clock_wall(), &e);
    if (rc == 0)
        return send_file(req, e, keepalive, out, plan);

    unsigned status;
    switch (rc) {
    case -EISDIR:
        if (!want_dir)
            return redirect_to_dir(req, path, (size_t)plen, keepalive, out, plan);
        status = 403; /* "index.html" is itself a directory */
        break;
    case -ENOENT:
        /* A directory without an index is forbidden, as in nginx. */
        status = want_dir && fc_is_dir(ctx->fc, rel, rlen - 10) ? 403 : 404;
        break;
    case -EACCES:
    case -EPERM:
        status = 403;
        break;
    case -EMFILE:
    case -ENFILE:
    case -ENOMEM:
        status = 503;
        break;
    default: /* ENOTDIR, EXDEV (escapes the docroot), ELOOP, ENAMETOOLONG */
        status = 404;
        break;
    }
    resp_error(out, plan, status, req->minor, keepalive, head_only);
}

void http_handle(struct http_ctx *ctx, const struct http_request *req, int may_keepalive,
                 int status_ok, struct http_out *out, struct http_plan *plan)
{
    int keepalive = may_keepalive && http_wants_keepalive(req);
    memset(plan, 0, sizeof *plan);
    handle(ctx, req, keepalive, status_ok, out, plan);
    /* Every response said "Connection: close" when keepalive is off. */
    if (!keepalive)
        plan->close = 1;
}

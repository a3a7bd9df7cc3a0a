#include "http/handler.h"

#include <errno.h>
#include <string.h>

#include "core/clock.h"
#include "http/autoindex.h"
#include "http/path.h"
#include "http/static_file.h"
#include "http/status_html.h"

#define PUT_LIT(out, lit) resp_header_raw(out, lit, sizeof lit - 1)

static void error_close(struct http_ctx *ctx, struct http_out *out, struct http_plan *plan,
                        unsigned status, const struct http_request *req)
{
    http_error(ctx, req, status, 0, NULL, 0, out, plan);
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
static void redirect_to_dir(struct http_ctx *ctx, const struct http_request *req,
                            const char *path, size_t plen, int keepalive, struct http_out *out,
                            struct http_plan *plan)
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
        return error_close(ctx, out, plan, 414, req);
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

/* "/api" when a proxy route is "/api/": a 301 to "/api/" for any method,
 * as nginx answers for a proxied location that ends in '/'. Returns 1
 * when it answered. */
static int route_slash(struct http_ctx *ctx, const struct http_request *req, int keepalive,
                       struct http_out *out, struct http_plan *plan)
{
    char path[PROXY_PREFIX_MAX];
    /* a prefix is shorter than PROXY_PREFIX_MAX; "%XX" is 3 bytes for 1 */
    if (!req->path.len || req->path.p[0] != '/' || req->path.len > 3 * PROXY_PREFIX_MAX)
        return 0;
    int plen = path_normalize(req->path.p, req->path.len, path, sizeof path);
    if (plen < 0 || !proxy_route_slash(ctx->routes, ctx->nroutes, path, (size_t)plen))
        return 0;
    redirect_to_dir(ctx, req, path, (size_t)plen, keepalive, out, plan);
    return 1;
}

/* The live page: constant bytes, sent from where they are (no copy). */
static void status_html_page(const struct http_request *req, int keepalive,
                             struct http_out *out, struct http_plan *plan)
{
    size_t len;
    const char *page = status_html(&len);
    plan->head_off = (uint32_t)out->len;
    resp_status(out, 200);
    PUT_LIT(out, "Content-Type: text/html; charset=utf-8\r\nCache-Control: no-store\r\n"
                 "X-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer\r\n"
                 "Content-Security-Policy: ");
    resp_header_raw(out, status_html_csp, strlen(status_html_csp));
    PUT_LIT(out, "\r\n");
    resp_content_length(out, len);
    resp_finish(out, req->minor, keepalive);
    plan->head_len = (uint32_t)(out->len - plan->head_off);
    if (req->method != HTTP_HEAD) {
        plan->body = page;
        plan->body_len = (uint32_t)len;
    }
    plan->status = 200;
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
    if (fmt == 0 && !query_has(req, "format=json") &&
        status_wants_html(req, query_has(req, "format=html")))
        return status_html_page(req, keepalive, out, plan);
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

/* The status for a file or directory that could not be opened. */
static unsigned status_for(int err)
{
    switch (err) {
    case -EACCES:
    case -EPERM:
    case -ENODEV: /* a FIFO, a socket or a device: never served */
        return 403;
    case -EMFILE:
    case -ENFILE:
    case -ENOMEM:
        return 503;
    default: /* ENOENT, ENOTDIR, EXDEV (escapes the docroot), ELOOP, ENAMETOOLONG */
        return 404;
    }
}

/* path[0..plen) is a directory's normalised path, ending in '/'. */
static void directory_listing(struct http_ctx *ctx, const struct http_request *req,
                              const char *path, size_t plen, int keepalive,
                              struct http_out *out, struct http_plan *plan)
{
    time_t now = clock_wall();
    struct fc_entry *e = fc_listing_recent(ctx->fc, path, plen, now);
    if (!e) {
        size_t rlen = plen > 1 ? plen - 2 : 0; /* without the slashes around it */
        int rc = autoindex_build(fc_root_fd(ctx->fc), path + 1, rlen, path, plen,
                                 ctx->cfg->serve_dotfiles, &e);
        if (rc < 0)
            return http_error(ctx, req, status_for(rc), keepalive, NULL, 0, out, plan);
        e = fc_listing_keep(ctx->fc, path, plen, e, now);
    }
    plan->head_off = (uint32_t)out->len;
    resp_status(out, 200);
    PUT_LIT(out, "Content-Type: text/html; charset=utf-8\r\n");
    resp_content_length(out, (uint64_t)e->size);
    resp_finish(out, req->minor, keepalive);
    plan->head_len = (uint32_t)(out->len - plan->head_off);
    plan->status = 200;
    if (req->method == HTTP_HEAD) {
        fc_release(e);
        return;
    }
    plan->file = e;
    plan->file_len = e->size;
}

/* A path that is not a regular file: a directory (redirect, listing or
 * 403) or an error. An index.html that cannot be served as a file (none,
 * a directory, a FIFO, socket or device, a symlink that dangles or leaves
 * the docroot) is no index:
 * the directory is listed or forbidden the same way in each case. */
static void not_a_file(struct http_ctx *ctx, const struct http_request *req, char *path,
                       size_t plen, int want_dir, int rc, int keepalive, struct http_out *out,
                       struct http_plan *plan)
{
    unsigned status = status_for(rc);
    if (rc == -EISDIR && !want_dir)
        return redirect_to_dir(ctx, req, path, plen, keepalive, out, plan);
    if (want_dir && (rc == -ENOENT || rc == -EISDIR || rc == -ENODEV || rc == -EXDEV ||
                     rc == -ELOOP)) {
        size_t dlen = plen - 10; /* without "index.html" */
        if (fc_is_dir(ctx->fc, path + 1, dlen - 1)) {
            if (ctx->cfg->autoindex)
                return directory_listing(ctx, req, path, dlen, keepalive, out, plan);
            status = 403; /* a directory without an index is forbidden, as in nginx */
        }
    }
    http_error(ctx, req, status, keepalive, NULL, 0, out, plan);
}

static void handle(struct http_ctx *ctx, const struct http_request *req, int keepalive,
                   int status_ok, struct http_out *out, struct http_plan *plan)
{
    const struct http_config *cfg = ctx->cfg;

    if (req->content_length > 0 && (uint64_t)req->content_length > cfg->max_body_size)
        return error_close(ctx, out, plan, 413, req);
    if (ctx->nroutes && route_slash(ctx, req, keepalive, out, plan))
        return;
    if (req->method != HTTP_GET && req->method != HTTP_HEAD)
        return http_error(ctx, req, req->method == HTTP_OTHER ? 501 : 405, keepalive, NULL, 0,
                          out, plan);

    if (cfg->status_path[0] && ctx->status && req->path.len == strlen(cfg->status_path) &&
        memcmp(req->path.p, cfg->status_path, req->path.len) == 0) {
        if (!status_ok)
            return http_error(ctx, req, 403, keepalive, NULL, 0, out, plan);
        return status_page(ctx, req, keepalive, out, plan);
    }

    char path[4096 + 16];
    int plen = path_normalize(req->path.p, req->path.len, path, sizeof path - 16);
    /* no file has a longer name (PATH_MAX): 404, as nginx answers
     * ENAMETOOLONG, on a connection that stays up */
    if (plen == PATH_TOO_LONG)
        return http_error(ctx, req, 404, keepalive, NULL, 0, out, plan);
    if (plen < 0)
        return error_close(ctx, out, plan, 400, req);
    if (!cfg->serve_dotfiles && path_has_dotfile(path, (size_t)plen))
        return http_error(ctx, req, 404, keepalive, NULL, 0, out, plan);

    int want_dir = path[plen - 1] == '/';
    if (want_dir) {
        memcpy(path + plen, "index.html", 11);
        plen += 10;
    }
    struct fc_entry *e;
    int rc = fc_lookup(ctx->fc, path + 1, (size_t)plen - 1, clock_wall(), &e);
    if (rc == 0)
        return static_file_send(ctx, req, path, (size_t)plen, e, keepalive, out, plan);
    not_a_file(ctx, req, path, (size_t)plen, want_dir, rc, keepalive, out, plan);
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

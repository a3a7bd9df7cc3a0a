#include "http/errorpage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "http/handler.h"
#include "http/path.h"
#include "http/response.h"

static int has_control(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return 1;
    return 0;
}

int error_page_add(struct error_pages *p, const char *spec, char *err, size_t errlen)
{
    char *end;
    long code = strtol(spec, &end, 10);
    if (*end != '=' || spec[0] < '0' || spec[0] > '9' || code < 400 || code > 599 ||
        !resp_status_known((unsigned)code)) {
        snprintf(err, errlen, "error-page '%s': expected CODE=/path with CODE an error status "
                 "herd sends (400..599, e.g. 404=/404.html)", spec);
        return -1;
    }
    const char *path = end + 1;
    size_t len = strlen(path);
    char norm[ERROR_PAGE_PATH_MAX];
    int n = len < sizeof norm ? path_normalize(path, len, norm, sizeof norm) : -1;
    if (len < 2 || path[0] != '/' || n != (int)len || memcmp(norm, path, len) != 0 ||
        strpbrk(path, "%?#") || path[len - 1] == '/' || has_control(path, len)) {
        snprintf(err, errlen, "error-page %ld: '%s' must be a normalised file path below the "
                 "docroot, starting with '/' (e.g. /errors/404.html), under %d characters",
                 code, path, ERROR_PAGE_PATH_MAX);
        return -1;
    }
    int i = 0;
    while (i < p->n && p->page[i].code != code)
        i++;
    if (i == ERROR_PAGES_MAX) {
        snprintf(err, errlen, "too many error pages (at most %d)", ERROR_PAGES_MAX);
        return -1;
    }
    p->page[i].code = (uint16_t)code;
    p->page[i].len = (uint16_t)(len - 1);
    memcpy(p->page[i].path, path + 1, len); /* with its NUL */
    if (i == p->n)
        p->n++;
    return 0;
}

const char *error_page_for(const struct error_pages *p, unsigned code, size_t *len)
{
    for (int i = 0; i < p->n; i++)
        if (p->page[i].code == code) {
            *len = p->page[i].len;
            return p->page[i].path;
        }
    return NULL;
}

void http_error(struct http_ctx *ctx, const struct http_request *req, unsigned status,
                int keepalive, const char *extra, size_t extra_len, struct http_out *out,
                struct http_plan *plan)
{
    http_error_page(ctx, status, req->minor, keepalive, req->method == HTTP_HEAD, extra,
                    extra_len, out, plan);
}

void http_error_page(struct http_ctx *ctx, unsigned status, int minor, int keepalive,
                     int head_only, const char *extra, size_t extra_len, struct http_out *out,
                     struct http_plan *plan)
{
    size_t len;
    const char *rel = error_page_for(&ctx->cfg->error_pages, status, &len);
    struct fc_entry *e;
    if (!rel || fc_lookup(ctx->fc, rel, len, clock_wall(), &e) < 0)
        return resp_error_with(out, plan, status, minor, keepalive, head_only, extra,
                               extra_len);
    plan->head_off = (uint32_t)out->len;
    resp_status(out, status);
    resp_header_raw(out, e->hdr, fc_type_line_len(e));
    resp_error_headers(out, status);
    if (extra_len)
        resp_header_raw(out, extra, extra_len);
    resp_content_length(out, (uint64_t)e->size);
    resp_finish(out, minor, keepalive);
    plan->head_len = (uint32_t)(out->len - plan->head_off);
    plan->status = (uint16_t)status;
    plan->close = !keepalive;
    if (head_only || e->size == 0) {
        fc_release(e);
        return;
    }
    plan->file = e;
    plan->file_off = 0;
    plan->file_len = e->size;
}

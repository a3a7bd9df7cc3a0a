#include "http/static_file.h"

#include <string.h>
#include <strings.h>

#include "core/clock.h"
#include "http/cacherule.h"
#include "http/cond.h"
#include "http/encoding.h"
#include "http/errorpage.h"
#include "http/range.h"
#include "http/sidecar.h"

#define PUT_LIT(out, lit) resp_header_raw(out, lit, sizeof lit - 1)
#define VARY_LINE "Vary: Accept-Encoding\r\n"
#define LM_PREFIX_LEN (sizeof "Last-Modified: " - 1)

/* The representation chosen for a request: the file itself or one of its
 * sidecars, with the validators of the bytes it sends. */
struct rep {
    struct fc_entry *file; /* the file asked for: its Content-Type */
    struct fc_entry *body; /* the bytes sent: file, or a sidecar */
    int coding;            /* CODING_* or CODING_IDENTITY */
    int vary;              /* sidecars exist: the answer depends on Accept-Encoding */
    const char *etag;
    size_t etag_len;
    char etag_buf[64];
};

static size_t accept_encoding(const struct http_request *req, struct http_str *v, size_t cap)
{
    size_t n = 0;
    for (unsigned i = 0; i < req->nheaders && n < cap; i++) {
        const struct http_str *name = &req->headers[i].name;
        if (name->len == 15 && strncasecmp(name->p, "accept-encoding", 15) == 0)
            v[n++] = req->headers[i].value;
    }
    return n;
}

/* A variant's ETag is its own file's with the coding appended ("..-br"),
 * so no two representations share one. */
static void variant_etag(struct rep *r)
{
    const struct fc_entry *s = r->body;
    size_t n = s->etag_len - 1; /* without the closing quote */
    const char *tok = coding_token[r->coding];
    size_t tlen = coding_token_len[r->coding];
    memcpy(r->etag_buf, s->etag, n);
    r->etag_buf[n] = '-';
    memcpy(r->etag_buf + n + 1, tok, tlen);
    r->etag_buf[n + 1 + tlen] = '"';
    r->etag = r->etag_buf;
    r->etag_len = n + tlen + 2;
}

/* Fills r for e. Returns 0, or 406 when the file has sidecars but the
 * request refuses identity and accepts none of them. A file without
 * sidecars is not negotiated at all (RFC 9110 12.1 lets a server disregard
 * Accept-Encoding): it is sent as it is. */
static int choose(struct http_ctx *ctx, const struct http_request *req, struct fc_entry *e,
                  struct rep *r)
{
    r->file = r->body = e;
    r->coding = CODING_IDENTITY;
    r->vary = 0;
    r->etag = e->etag;
    r->etag_len = e->etag_len;
    if (ctx->cfg->no_precompressed)
        return 0;
    time_t now = clock_wall();
    unsigned avail = sidecar_available(ctx->fc, e, now);
    if (!avail)
        return 0;
    r->vary = 1;
    struct http_str v[8];
    int c = coding_negotiate(v, accept_encoding(req, v, 8), avail);
    if (c == CODING_NONE)
        return 406;
    struct fc_entry *s = c >= 0 ? sidecar_open(ctx->fc, e, c, now) : NULL;
    if (!s)
        return 0; /* identity, or the sidecar went away since: the file itself */
    r->body = s;
    r->coding = c;
    variant_etag(r);
    return 0;
}

static void rep_release(struct rep *r, int keep_body)
{
    if (r->body != r->file)
        fc_release(r->file);
    if (!keep_body)
        fc_release(r->body);
}

/* Last-Modified and ETag of the bytes sent. */
static void put_validators(struct http_out *out, const struct rep *r)
{
    const struct fc_entry *b = r->body;
    resp_header_raw(out, b->last_modified - LM_PREFIX_LEN, LM_PREFIX_LEN + b->lm_len + 2);
    PUT_LIT(out, "ETag: ");
    resp_header_raw(out, r->etag, r->etag_len);
    PUT_LIT(out, "\r\n");
}

/* One response in the making. */
struct job {
    struct http_ctx *ctx;
    const struct http_request *req;
    const char *path; /* normalised, for the caching rules */
    size_t plen;
    int keepalive;
    struct http_out *out;
    struct http_plan *plan;
    struct rep r;
};

static void begin(struct job *j, unsigned status)
{
    j->plan->head_off = (uint32_t)j->out->len;
    resp_status(j->out, status);
}

/* What 200, 206 and 304 carry besides: Vary and the caching rules. */
static void put_policy(struct job *j)
{
    if (j->r.vary)
        PUT_LIT(j->out, VARY_LINE);
    const struct cache_rules *rules = &j->ctx->cfg->cache;
    if (rules->ncc || rules->nexp)
        cache_headers(rules, j->path, j->plen, clock_wall(), j->out);
}

static void finish(struct job *j, unsigned status)
{
    resp_finish(j->out, j->req->minor, j->keepalive);
    j->plan->head_len = (uint32_t)(j->out->len - j->plan->head_off);
    j->plan->status = (uint16_t)status;
}

static void put_entity_headers(struct http_out *out, const struct rep *r)
{
    if (r->coding == CODING_IDENTITY) {
        /* prebuilt: Content-Type, Last-Modified, ETag, Accept-Ranges */
        resp_header_raw(out, r->file->hdr, r->file->hdr_len);
        return;
    }
    resp_header_raw(out, r->file->hdr, fc_type_line_len(r->file));
    PUT_LIT(out, "Content-Encoding: ");
    resp_header_raw(out, coding_token[r->coding], coding_token_len[r->coding]);
    PUT_LIT(out, "\r\n");
    put_validators(out, r);
    PUT_LIT(out, "Accept-Ranges: bytes\r\n");
}

static void put_content_range(struct http_out *out, off_t start, off_t len, off_t size)
{
    PUT_LIT(out, "Content-Range: bytes ");
    out->len += fmt_u64(out->buf + out->len, (uint64_t)start);
    PUT_LIT(out, "-");
    out->len += fmt_u64(out->buf + out->len, (uint64_t)(start + len - 1));
    PUT_LIT(out, "/");
    out->len += fmt_u64(out->buf + out->len, (uint64_t)size);
    PUT_LIT(out, "\r\n");
}

static void not_modified(struct job *j)
{
    begin(j, 304);
    /* 304 repeats the validators but has no body and no Content-Type. */
    put_validators(j->out, &j->r);
    put_policy(j);
    finish(j, 304);
}

/* 412 is an error answer (the page, keep-alive as asked), with Vary for a
 * file that has variants: another Accept-Encoding selects another ETag. */
static void precondition_failed(struct job *j)
{
    http_error(j->ctx, j->req, 412, j->keepalive, j->r.vary ? VARY_LINE : NULL,
               j->r.vary ? sizeof VARY_LINE - 1 : 0, j->out, j->plan);
}

/* Answers 304, 412 or 416 when the request calls for one and returns 1;
 * else returns 0 with the byte range to send and its status (200 or 206). */
static int short_answer(struct job *j, off_t *start, off_t *len, unsigned *status)
{
    const struct http_request *req = j->req;
    const struct rep *r = &j->r;
    const struct fc_entry *b = r->body;
    *start = 0;
    *len = b->size;
    *status = 200;
    switch (cond_evaluate(req, r->etag, r->etag_len, b->mtime)) {
    case COND_NOT_MODIFIED:
        not_modified(j);
        return 1;
    case COND_FAILED:
        precondition_failed(j);
        return 1;
    case COND_PROCEED:
        break;
    }
    if (!req->range.p ||
        !cond_if_range_ok(req, r->etag, r->etag_len, b->last_modified, b->lm_len))
        return 0;
    switch (range_parse(req->range.p, req->range.len, b->size, start, len)) {
    case RANGE_OK:
        *status = 206;
        return 0;
    case RANGE_UNSATISFIABLE:
        begin(j, 416);
        PUT_LIT(j->out, "Content-Range: bytes */");
        j->out->len += fmt_u64(j->out->buf + j->out->len, (uint64_t)b->size);
        PUT_LIT(j->out, "\r\nContent-Length: 0\r\n");
        if (r->vary)
            PUT_LIT(j->out, VARY_LINE);
        finish(j, 416);
        return 1;
    case RANGE_NONE:
        break;
    }
    *start = 0;
    *len = b->size;
    return 0;
}

void static_file_send(struct http_ctx *ctx, const struct http_request *req, const char *path,
                      size_t plen, struct fc_entry *e, int keepalive, struct http_out *out,
                      struct http_plan *plan)
{
    struct job j; /* not zeroed: an initializer would clear etag_buf on every request */
    j.ctx = ctx;
    j.req = req;
    j.path = path;
    j.plen = plen;
    j.keepalive = keepalive;
    j.out = out;
    j.plan = plan;
    if (choose(ctx, req, e, &j.r) == 406) {
        fc_release(e);
        return http_error(ctx, req, 406, keepalive, VARY_LINE, sizeof VARY_LINE - 1, out,
                          plan);
    }
    off_t start, len;
    unsigned status;
    if (short_answer(&j, &start, &len, &status))
        return rep_release(&j.r, 0);
    begin(&j, status);
    put_entity_headers(out, &j.r);
    put_policy(&j);
    if (status == 206)
        put_content_range(out, start, len, j.r.body->size);
    resp_content_length(out, (uint64_t)len);
    finish(&j, status);
    int send_body = req->method != HTTP_HEAD && len > 0;
    rep_release(&j.r, send_body);
    if (send_body) {
        plan->file = j.r.body;
        plan->file_off = start;
        plan->file_len = len;
    }
}

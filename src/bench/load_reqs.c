#include "bench/load_reqs.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bench/load_script.h"
#include "core/bwriter.h"

static int has_header(const struct load_config *cfg, const char *name)
{
    size_t n = strlen(name);
    for (int i = 0; i < cfg->nheaders; i++)
        if (!strncasecmp(cfg->headers[i], name, n) && cfg->headers[i][n] == ':')
            return 1;
    return 0;
}

/* Does the header line h (up to its ':') name name (n bytes)? */
static int names(const char *h, size_t hlen, const char *name, size_t n)
{
    return hlen > n && h[n] == ':' && !strncasecmp(h, name, n);
}

/* Is a header named name[0..n) among the file request's lines? */
static int block_has(const struct load_req *r, const char *name, size_t n)
{
    const char *p = r->headers, *end = r->headers + r->headers_len;
    while (p < end) {
        const char *lf = memchr(p, '\n', (size_t)(end - p));
        const char *le = lf ? lf : end;
        if (names(p, (size_t)(le - p), name, n))
            return 1;
        p = le + 1;
    }
    return 0;
}

static int sets(const struct load_config *cfg, const struct load_req *r, const char *name)
{
    return has_header(cfg, name) || (r && block_has(r, name, strlen(name)));
}

/* The file request's header lines, each ending in CRLF. */
static void put_block_headers(struct bw *w, const struct load_req *r)
{
    const char *p = r->headers, *end = r->headers + r->headers_len;
    while (p < end) {
        const char *lf = memchr(p, '\n', (size_t)(end - p));
        const char *le = lf ? lf : end;
        size_t len = (size_t)(le - p);
        if (len && p[len - 1] == '\r')
            len--;
        bw_put(w, p, len);
        bw_puts(w, "\r\n");
        p = le + 1;
    }
}

/* One request: the flags' (r NULL) or a file's. */
static void put_request(struct bw *w, const struct load_config *cfg, const struct load_req *r)
{
    if (r) {
        bw_put(w, r->method, r->method_len);
        bw_puts(w, " ");
        bw_put(w, r->target, r->target_len);
    } else {
        bw_printf(w, "%s %s", cfg->method, cfg->target.path);
    }
    bw_puts(w, " HTTP/1.1\r\n");
    if (!sets(cfg, r, "host"))
        bw_printf(w, "Host: %s\r\n", cfg->target.host);
    for (int i = 0; i < cfg->nheaders; i++) {
        const char *colon = strchr(cfg->headers[i], ':');
        if (r && block_has(r, cfg->headers[i], (size_t)(colon - cfg->headers[i])))
            continue; /* the file's request says otherwise */
        bw_printf(w, "%s\r\n", cfg->headers[i]);
    }
    if (r)
        put_block_headers(w, r);
    if (!cfg->keepalive && !sets(cfg, r, "connection"))
        bw_puts(w, "Connection: close\r\n");
    const char *body = r ? r->body : cfg->body;
    size_t blen = r ? r->body_len : cfg->body_len;
    int wants_length = r ? blen || (r->method_len == 4 && !memcmp(r->method, "POST", 4)) ||
                               (r->method_len == 3 && !memcmp(r->method, "PUT", 3)) ||
                               (r->method_len == 5 && !memcmp(r->method, "PATCH", 5))
                         : body != NULL;
    if (wants_length && !sets(cfg, r, "content-length"))
        bw_printf(w, "Content-Length: %zu\r\n", blen);
    bw_puts(w, "\r\n");
    bw_put(w, body, blen);
}

/* Room for request r (or the flags'): its parts plus every added line. */
static size_t bound(const struct load_config *cfg, const struct load_req *r)
{
    size_t n = strlen(cfg->target.host) + 128;
    for (int i = 0; i < cfg->nheaders; i++)
        n += strlen(cfg->headers[i]) + 2;
    if (r)
        return n + r->method_len + r->target_len + 2 * r->headers_len + r->body_len + 2;
    return n + strlen(cfg->method) + strlen(cfg->target.path) + cfg->body_len;
}

int load_reqs_build(const struct load_config *cfg, struct load_reqs *out)
{
    const struct load_script *s = cfg->script;
    uint32_t n = s ? s->n : 1, total = n + cfg->pipeline - 1;
    size_t cap = 0;
    for (uint32_t i = 0; i < total; i++)
        cap += bound(cfg, s ? &s->reqs[i % n] : NULL);
    memset(out, 0, sizeof *out);
    if (cap > UINT32_MAX)
        return -1; /* a connection's write offsets are 32 bits */
    out->buf = malloc(cap);
    out->offs = malloc((total + 1) * sizeof *out->offs);
    if (!out->buf || !out->offs) {
        load_reqs_free(out);
        return -1;
    }
    struct bw w;
    bw_init(&w, out->buf, cap);
    for (uint32_t i = 0; i < total; i++) {
        out->offs[i] = w.len;
        put_request(&w, cfg, s ? &s->reqs[i % n] : NULL);
    }
    out->offs[total] = w.len;
    out->n = n;
    if (w.full) { /* the bound is wrong: never send a cut request */
        load_reqs_free(out);
        return -1;
    }
    return 0;
}

void load_reqs_free(struct load_reqs *r)
{
    free(r->buf);
    free(r->offs);
    memset(r, 0, sizeof *r);
}

#include "http/proxy.h"

#include <stddef.h>
#include <string.h>

#include "core/bwriter.h"
#include "core/clock.h"
#include "http/path.h"
#include "http/response.h"
#include "http/token.h"

int proxy_route_slash(const struct proxy_route *routes, int n, const char *path, size_t len)
{
    int slash = 0;
    for (int i = 0; len && i < n; i++) {
        size_t pl = strlen(routes[i].prefix);
        if (pl == len && memcmp(routes[i].prefix, path, len) == 0)
            return 0; /* a route of its own */
        if (pl == len + 1 && routes[i].prefix[len] == '/' &&
            memcmp(routes[i].prefix, path, len) == 0)
            slash = 1;
    }
    return slash;
}

int proxy_route_match(const struct proxy_route *routes, int n, const char *path,
                      size_t len)
{
    if (proxy_route_slash(routes, n, path, len))
        return -1;
    int best = -1;
    size_t best_len = 0;
    for (int i = 0; i < n; i++) {
        if (routes[i].fastcgi)
            continue;
        size_t pl = strlen(routes[i].prefix);
        if (pl <= len && (best < 0 || pl > best_len) && memcmp(routes[i].prefix, path, pl) == 0) {
            best = i;
            best_len = pl;
        }
    }
    return best;
}

long proxy_strip_prefix(const struct proxy_route *route, const char *path, size_t len,
                        char *out, size_t cap)
{
    size_t pl = strlen(route->prefix);
    if (pl > len || cap < 1)
        return -1;
    const char *rest = path + pl;
    size_t rlen = len - pl;
    if (rlen && rest[0] == '/') { /* "/api" + "/x" */
        rest++;
        rlen--;
    }
    out[0] = '/';
    int n = path_encode(rest, rlen, out + 1, cap - 1);
    return n < 0 ? -1 : n + 1;
}

/* ASCII case-insensitive compare of s with a lowercase word. */
static int is(const struct http_str *s, const char *lower)
{
    size_t len = strlen(lower);
    if (s->len != len)
        return 0;
    for (size_t i = 0; i < len; i++) {
        char c = s->p[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c | 0x20);
        if (c != lower[i])
            return 0;
    }
    return 1;
}

static int same_name(const struct http_str *a, const char *b, size_t blen)
{
    if (a->len != blen)
        return 0;
    for (size_t i = 0; i < blen; i++)
        if ((a->p[i] | 0x20) != (b[i] | 0x20))
            return 0;
    return 1;
}

/* Hop-by-hop headers (RFC 9110 7.6.1) belong to one connection, never
 * forwarded. Framing is rebuilt by whoever sends the message on. */
static int hop_by_hop(const struct http_str *n)
{
    static const char *const names[] = {
        "connection", "keep-alive", "proxy-connection", "te", "trailer", "trailers",
        "transfer-encoding", "upgrade", "proxy-authenticate", "proxy-authorization",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (is(n, names[i]))
            return 1;
    return 0;
}

/* Is name listed in any Connection header among hs[0..n)? */
static int named_in_connection(const struct http_header *hs, int n, const struct http_str *name)
{
    for (int i = 0; i < n; i++) {
        if (!is(&hs[i].name, "connection"))
            continue;
        const char *p = hs[i].value.p, *end = p + hs[i].value.len;
        struct http_str tok;
        while (http_list_next(&p, end, &tok))
            if (same_name(name, tok.p, tok.len))
                return 1;
    }
    return 0;
}

static int dropped(const struct http_header *hs, int n, const struct http_str *name)
{
    return hop_by_hop(name) || named_in_connection(hs, n, name);
}

/* Does a request header go up? Only names of letters, digits and '-',
 * with '_' too when pass_underscores (nginx's ignore_invalid_headers and
 * underscores_in_headers): CGI and WSGI servers read '_' as '-', and
 * PHP's read '.' as '_' too, so `X_Forwarded_For` or `X.Forwarded.For`
 * would be taken for the X-Forwarded-For a front proxy vouches for. */
static int passable_name(const struct http_str *name, int pass_underscores)
{
    for (size_t i = 0; i < name->len; i++) {
        char c = name->p[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || (c == '_' && pass_underscores)))
            return 0;
    }
    return 1;
}

long proxy_build_request(const struct http_request *req, const struct http_str *path,
                         const char *client_addr, const char *default_host,
                         int pass_underscores, int https, char *buf, size_t cap)
{
    struct bw w;
    bw_init(&w, buf, cap);
    const struct http_header *hs = req->headers;
    int n = req->nheaders;
    bw_put(&w, req->method_str.p, req->method_str.len);
    bw_put(&w, " ", 1);
    /* absolute-form targets become origin-form: the path and query as sent */
    const char *end = req->target.p + req->target.len;
    if (path) {
        bw_put(&w, path->p, path->len);
        if (req->query.len) {
            bw_put(&w, "?", 1);
            bw_put(&w, req->query.p, req->query.len);
        }
    } else if (req->path.p >= req->target.p && req->path.p < end) {
        bw_put(&w, req->path.p, (size_t)(end - req->path.p));
    } else { /* "http://host" or "http://host?q": the parser's own "/" */
        bw_put(&w, "/", 1);
        if (req->query.len) {
            bw_put(&w, "?", 1);
            bw_put(&w, req->query.p, req->query.len);
        }
    }
    /* An HTTP/1.0 client cannot read chunked replies: ask the upstream for
     * 1.0 too, as nginx does by default, and do not reuse that connection. */
    bw_puts(&w, req->minor ? " HTTP/1.1\r\nHost: " : " HTTP/1.0\r\nHost: ");
    if (req->host.len)
        bw_put(&w, req->host.p, req->host.len);
    else
        bw_puts(&w, default_host);
    bw_puts(&w, "\r\n");
    for (int i = 0; i < n; i++) {
        const struct http_str *name = &hs[i].name;
        /* Expect is answered by us (we read the body), never forwarded */
        if (dropped(hs, n, name) || is(name, "host") || is(name, "x-forwarded-proto") ||
            is(name, "content-length") || is(name, "expect") ||
            !passable_name(name, pass_underscores))
            continue;
        if (is(name, "x-forwarded-for"))
            continue; /* every one is folded into ours below */
        bw_put(&w, name->p, name->len);
        bw_put(&w, ": ", 2);
        bw_put(&w, hs[i].value.p, hs[i].value.len);
        bw_put(&w, "\r\n", 2);
    }
    /* Several X-Forwarded-For lines are one list (RFC 9110 5.3), in
     * order, as nginx joins them: dropping all but the last would hide
     * the first hops from the upstream. */
    bw_puts(&w, "X-Forwarded-For: ");
    for (int i = 0; i < n; i++) {
        if (is(&hs[i].name, "x-forwarded-for") && hs[i].value.len) {
            bw_put(&w, hs[i].value.p, hs[i].value.len);
            bw_put(&w, ", ", 2);
        }
    }
    bw_puts(&w, client_addr);
    bw_puts(&w, https ? "\r\nX-Forwarded-Proto: https\r\n"
                      : "\r\nX-Forwarded-Proto: http\r\n");
    if (req->chunked) { /* herd's chunks (reframe.h), not the client's */
        bw_puts(&w, "Transfer-Encoding: chunked\r\n");
    } else if (req->content_length >= 0) {
        bw_puts(&w, "Content-Length: ");
        bw_u64(&w, (uint64_t)req->content_length);
        bw_puts(&w, "\r\n");
    }
    if (!req->minor)
        bw_puts(&w, "Connection: close\r\n");
    bw_put(&w, "\r\n", 2);
    return w.full ? -1 : (long)w.len;
}

int proxy_may_retry(const struct http_request *req)
{
    switch (req->method) {
    case HTTP_GET:
    case HTTP_HEAD:
    case HTTP_OPTIONS:
    case HTTP_TRACE:
    case HTTP_PUT:
    case HTTP_DELETE:
        return 1;
    default:
        return 0; /* POST, PATCH, CONNECT and methods herd does not know */
    }
}

/* ---- the upstream's response ---- */

static int has_token(const struct http_str *v, const char *word)
{
    const char *p = v->p, *end = v->p + v->len;
    struct http_str tok;
    while (http_list_next(&p, end, &tok))
        if (is(&tok, word))
            return 1;
    return 0;
}

/* One line ending at LF (CR before it optional); returns its end without
 * the line break, and *next the byte after LF. NULL when incomplete. */
static const char *line_end(const char *p, const char *end, const char **next)
{
    const char *lf = memchr(p, '\n', (size_t)(end - p));
    if (!lf)
        return NULL;
    *next = lf + 1;
    return lf > p && lf[-1] == '\r' ? lf - 1 : lf;
}

int upstream_parse_response(const char *buf, size_t len, size_t max_head,
                            struct upstream_response *r)
{
    const char *p = buf, *end = buf + (len < max_head ? len : max_head), *next;
    memset(r, 0, offsetof(struct upstream_response, headers));
    r->content_length = -1;
    const char *eol = line_end(p, end, &next);
    if (!eol)
        goto incomplete;
    /* "HTTP/1.x SP 3DIGIT SP reason" (the reason may be empty) */
    if (eol - p < 12 || memcmp(p, "HTTP/1.", 7) != 0 || (p[7] != '0' && p[7] != '1') ||
        p[8] != ' ' || p[9] < '1' || p[9] > '5' || p[10] < '0' || p[10] > '9' ||
        p[11] < '0' || p[11] > '9' || (eol - p > 12 && p[12] != ' '))
        return HTTP_PARSE_ERROR;
    r->minor = (uint8_t)(p[7] - '0');
    r->status = (uint16_t)((p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0'));
    r->reason.p = eol - p > 12 ? p + 13 : eol;
    r->reason.len = (uint32_t)(eol - r->reason.p);
    for (const char *q = r->reason.p; q < eol; q++)
        if (((unsigned char)*q < 0x20 && *q != '\t') || *q == 0x7f)
            return HTTP_PARSE_ERROR; /* as in a header value: the client gets 502 */
    r->conn_close = r->minor == 0;
    int te_seen = 0;
    const struct http_str *cl_first = NULL;
    for (p = next;;) {
        eol = line_end(p, end, &next);
        if (!eol)
            goto incomplete;
        if (eol == p)
            break; /* the empty line */
        const char *colon = p;
        while (colon < eol && http_tchar((unsigned char)*colon))
            colon++;
        if (colon == p || colon == eol || *colon != ':')
            return HTTP_PARSE_ERROR; /* also obs-fold and space before ':' */
        if (r->nheaders == HTTP_MAX_HEADERS)
            return HTTP_PARSE_ERROR;
        const char *v = colon + 1, *ve = eol;
        while (v < ve && (*v == ' ' || *v == '\t'))
            v++;
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
            ve--;
        for (const char *q = v; q < ve; q++)
            if (((unsigned char)*q < 0x20 && *q != '\t') || *q == 0x7f)
                return HTTP_PARSE_ERROR;
        struct http_header *h = &r->headers[r->nheaders++];
        h->name = (struct http_str){p, (uint32_t)(colon - p)};
        h->value = (struct http_str){v, (uint32_t)(ve - v)};
        if (is(&h->name, "content-length")) {
            /* a repeat must be the same bytes: "5" then "05" are two
             * framings to a stricter parser on the client's side */
            int64_t cl;
            if (http_parse_length(&h->value, &cl) < 0 ||
                (cl_first && (cl_first->len != h->value.len ||
                              memcmp(cl_first->p, h->value.p, h->value.len) != 0)))
                return HTTP_PARSE_ERROR;
            cl_first = cl_first ? cl_first : &h->value;
            r->content_length = cl;
        } else if (is(&h->name, "transfer-encoding")) {
            if (te_seen++ || !is(&h->value, "chunked"))
                return HTTP_PARSE_ERROR;
            r->chunked = 1;
        } else if (is(&h->name, "connection")) {
            if (has_token(&h->value, "close"))
                r->conn_close = 1;
            else if (r->minor == 0 && has_token(&h->value, "keep-alive"))
                r->conn_close = 0;
        }
        p = next;
    }
    if (r->chunked && r->content_length >= 0)
        return HTTP_PARSE_ERROR; /* two framings: a smuggling vector */
    return (int)(next - buf);
incomplete:
    return len >= max_head ? HTTP_PARSE_ERROR : HTTP_PARSE_INCOMPLETE;
}

enum upstream_body upstream_body_kind(const struct upstream_response *r, int head_request)
{
    if (head_request || r->status < 200 || r->status == 204 || r->status == 304)
        return UB_NONE;
    if (r->chunked)
        return UB_CHUNKED;
    if (r->content_length >= 0)
        return r->content_length ? UB_LENGTH : UB_NONE;
    return UB_CLOSE;
}

/* Does the upstream's head pass on a header named lower? One its
 * Connection line names is dropped, so it is not there (a Server or Date
 * dropped that way left the answer without one). */
static int has_header(const struct upstream_response *r, const char *lower)
{
    for (int i = 0; i < r->nheaders; i++)
        if (is(&r->headers[i].name, lower))
            return !dropped(r->headers, r->nheaders, &r->headers[i].name);
    return 0;
}

long proxy_build_response(const struct upstream_response *r, enum upstream_body kind,
                          int client_minor, int keepalive, int pass_server, char *buf,
                          size_t cap)
{
    struct bw w;
    bw_init(&w, buf, cap);
    char code[4] = {(char)('0' + r->status / 100), (char)('0' + r->status / 10 % 10),
                    (char)('0' + r->status % 10), ' '};
    bw_puts(&w, "HTTP/1.1 ");
    bw_put(&w, code, 4);
    bw_put(&w, r->reason.p, r->reason.len);
    bw_puts(&w, "\r\n");
    /* herd's own, as for a static answer: the upstream's software and
     * version are its business (nginx's proxy_hide_header defaults), and
     * the Date is the one the client's clock is compared with */
    if (!pass_server || !has_header(r, "server"))
        bw_puts(&w, SERVER_HEADER);
    if (!pass_server || !has_header(r, "date")) {
        bw_puts(&w, "Date: ");
        bw_put(&w, clock_date(), HTTPDATE_LEN);
        bw_puts(&w, "\r\n");
    }
    for (int i = 0; i < r->nheaders; i++) {
        const struct http_header *h = &r->headers[i];
        /* Content-Length is the framing a body passed as it is goes out
         * by: a Connection line naming it must not take it away, or a
         * keep-alive answer has no end a client can find, and the next
         * answer on the connection is read as more of its body. */
        int framing = is(&h->name, "content-length");
        if ((!framing && dropped(r->headers, r->nheaders, &h->name)) ||
            (!pass_server && (is(&h->name, "server") || is(&h->name, "date"))))
            continue;
        /* RFC 9110 8.6: never in a 1xx or 204; a client that believed one
         * would wait for the body, or take the next answer's first bytes
         * for it (nginx's header filter drops it too). */
        if ((r->status < 200 || r->status == 204) && is(&h->name, "content-length"))
            continue;
        bw_put(&w, h->name.p, h->name.len);
        bw_put(&w, ": ", 2);
        bw_put(&w, h->value.p, h->value.len);
        bw_put(&w, "\r\n", 2);
    }
    if (kind == UB_CHUNKED)
        bw_puts(&w, "Transfer-Encoding: chunked\r\n");
    if (!keepalive)
        bw_puts(&w, "Connection: close\r\n\r\n");
    else if (client_minor == 0)
        bw_puts(&w, "Connection: keep-alive\r\n\r\n");
    else
        bw_puts(&w, "\r\n");
    return w.full ? -1 : (long)w.len;
}

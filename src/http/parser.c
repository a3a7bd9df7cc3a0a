#include "http/parser.h"

#include <string.h>
#include <strings.h>

/* Character classes, one table lookup per byte. Targets may not hold
 * '"', '<', '>', '\\' or '`' (RFC 3986 never allows them unencoded); '{',
 * '}', '|' and '^' are tolerated because real clients send them. */
enum { C_TOKEN = 1, C_TARGET = 2, C_VALUE = 4 };

static const uint8_t cls[256] = {
    ['\t'] = C_VALUE,
    [' '] = C_VALUE,
    ['!'] = 7, ['"'] = 4, ['#'] = 7, ['$'] = 7, ['%'] = 7, ['&'] = 7,
    ['\''] = 7, ['('] = 6, [')'] = 6, ['*'] = 7, ['+'] = 7, [','] = 6,
    ['-'] = 7, ['.'] = 7, ['/'] = 6,
    ['0'] = 7, ['1'] = 7, ['2'] = 7, ['3'] = 7, ['4'] = 7,
    ['5'] = 7, ['6'] = 7, ['7'] = 7, ['8'] = 7, ['9'] = 7,
    [':'] = 6, [';'] = 6, ['<'] = 4, ['='] = 6, ['>'] = 4, ['?'] = 6, ['@'] = 6,
    ['A'] = 7, ['B'] = 7, ['C'] = 7, ['D'] = 7, ['E'] = 7, ['F'] = 7, ['G'] = 7,
    ['H'] = 7, ['I'] = 7, ['J'] = 7, ['K'] = 7, ['L'] = 7, ['M'] = 7, ['N'] = 7,
    ['O'] = 7, ['P'] = 7, ['Q'] = 7, ['R'] = 7, ['S'] = 7, ['T'] = 7, ['U'] = 7,
    ['V'] = 7, ['W'] = 7, ['X'] = 7, ['Y'] = 7, ['Z'] = 7,
    ['['] = 6, ['\\'] = 4, [']'] = 6, ['^'] = 7, ['_'] = 7, ['`'] = 5,
    ['a'] = 7, ['b'] = 7, ['c'] = 7, ['d'] = 7, ['e'] = 7, ['f'] = 7, ['g'] = 7,
    ['h'] = 7, ['i'] = 7, ['j'] = 7, ['k'] = 7, ['l'] = 7, ['m'] = 7, ['n'] = 7,
    ['o'] = 7, ['p'] = 7, ['q'] = 7, ['r'] = 7, ['s'] = 7, ['t'] = 7, ['u'] = 7,
    ['v'] = 7, ['w'] = 7, ['x'] = 7, ['y'] = 7, ['z'] = 7,
    ['{'] = 6, ['|'] = 7, ['}'] = 6, ['~'] = 7,
    /* obs-text is allowed in field values only */
    [0x80 ... 0xff] = C_VALUE,
};

static inline int fail(struct http_request *req, uint16_t status)
{
    req->error = status;
    return HTTP_PARSE_ERROR;
}

/* Finds the end of the head: the byte after the empty line. Returns 0 when
 * the head is not complete yet. *line1_end gets the first LF's offset (or
 * -1) so an over-long request line can be told from over-long headers. */
static size_t find_head_end(const char *buf, size_t len, long *line1_end)
{
    const char *p = buf, *end = buf + len;
    *line1_end = -1;
    while ((p = memchr(p, '\n', (size_t)(end - p))) != NULL) {
        if (*line1_end < 0)
            *line1_end = p - buf;
        p++;
        if (p < end && *p == '\n')
            return (size_t)(p + 1 - buf);
        if (p + 1 < end && p[0] == '\r' && p[1] == '\n')
            return (size_t)(p + 2 - buf);
        if (p >= end || (p + 1 >= end && *p == '\r'))
            return 0;
    }
    return 0;
}

static const struct {
    const char *name;
    uint8_t len;
    enum http_method m;
} methods[] = {
    {"GET", 3, HTTP_GET},         {"HEAD", 4, HTTP_HEAD},   {"POST", 4, HTTP_POST},
    {"PUT", 3, HTTP_PUT},         {"DELETE", 6, HTTP_DELETE}, {"PATCH", 5, HTTP_PATCH},
    {"OPTIONS", 7, HTTP_OPTIONS}, {"TRACE", 5, HTTP_TRACE}, {"CONNECT", 7, HTTP_CONNECT},
};

static enum http_method method_of(const char *p, size_t len)
{
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (methods[i].len == len && memcmp(methods[i].name, p, len) == 0)
            return methods[i].m;
    return HTTP_OTHER;
}

/* ASCII case-insensitive compare of a header name with a lowercase word. */
static int name_is(const struct http_str *s, const char *lower, size_t len)
{
    if (s->len != len)
        return 0;
    for (size_t i = 0; i < len; i++)
        if ((s->p[i] | 0x20) != lower[i])
            return 0;
    return 1;
}

int http_list_next(const char **p, const char *end, struct http_str *tok)
{
    const char *q = *p;
    while (q < end && (*q == ' ' || *q == '\t' || *q == ','))
        q++;
    const char *t = q;
    while (q < end && *q != ',' && *q != ' ' && *q != '\t')
        q++;
    *p = q;
    *tok = (struct http_str){t, (uint32_t)(q - t)};
    return q > t;
}

static int token_list_has(const struct http_str *v, const char *lower, size_t len)
{
    const char *p = v->p, *end = v->p + v->len;
    struct http_str tok;
    while (http_list_next(&p, end, &tok))
        if (name_is(&tok, lower, len))
            return 1;
    return 0;
}

static int parse_content_length(const struct http_str *v, int64_t *out)
{
    if (v->len == 0 || v->len > 18)
        return -1;
    int64_t n = 0;
    for (uint32_t i = 0; i < v->len; i++) {
        char c = v->p[i];
        if (c < '0' || c > '9')
            return -1;
        n = n * 10 + (c - '0');
    }
    *out = n;
    return 0;
}

static int host_valid(const struct http_str *v)
{
    for (uint32_t i = 0; i < v->len; i++) {
        unsigned char c = (unsigned char)v->p[i];
        if (!(cls[c] & C_TARGET) || c == '/' || c == '?' || c == '#' || c == '@' ||
            c == '\\' || c == '"' || c == '<' || c == '>' || c == '{' || c == '}' ||
            c == '|' || c == '^' || c == '`')
            return 0;
    }
    return 1;
}

static int hex_digit(char c)
{
    return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f');
}

/* unreserved or sub-delims (RFC 3986 2.2, 2.3) */
static int host_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("-._~!$&'()*+,;=", c));
}

/* The authority of an absolute-form target, host [":" port] (RFC 3986
 * 3.2.2): an IP literal in brackets, or a reg-name or IPv4 address
 * (unreserved, sub-delims, pct-encoded), then an optional port 0..65535.
 * Userinfo ("user@host") is refused: RFC 9110 4.2.4 forbids it in http(s)
 * URIs, and it is the classic way to dress one host up as another. */
static int authority_valid(const char *p, size_t len)
{
    size_t i = 0;
    if (len && p[0] == '[') {
        while (++i < len && p[i] != ']')
            if (!hex_digit(p[i]) && p[i] != ':' && p[i] != '.')
                return 0;
        if (i >= len || i == 1)
            return 0;
        i++;
    } else {
        for (; i < len && p[i] != ':'; i++) {
            char c = p[i];
            if (c == '%') {
                if (i + 2 >= len || !hex_digit(p[i + 1]) || !hex_digit(p[i + 2]))
                    return 0;
                i += 2;
            } else if (!host_char(c)) {
                return 0;
            }
        }
        if (i == 0)
            return 0;
    }
    if (i == len)
        return 1;
    if (p[i] != ':' || len - i - 1 < 1 || len - i - 1 > 5)
        return 0;
    unsigned port = 0;
    for (i++; i < len; i++) {
        if (p[i] < '0' || p[i] > '9')
            return 0;
        port = port * 10 + (unsigned)(p[i] - '0');
    }
    return port <= 65535;
}

/* Splits the request-target into path and query. Origin-form "/p?q",
 * absolute-form "http://host/p?q" (its authority goes to *authority: it
 * replaces Host, RFC 9112 3.2.2), asterisk-form "*" (OPTIONS only,
 * answered 405 anyway). */
static int split_target(struct http_request *req, struct http_str *authority)
{
    const char *p = req->target.p, *end = p + req->target.len;
    if (memchr(p, '#', req->target.len))
        return -1; /* a fragment never belongs in a request-target */
    if (*p != '/') {
        size_t skip = 0;
        if (req->target.len >= 7 && strncasecmp(p, "http://", 7) == 0)
            skip = 7;
        else if (req->target.len >= 8 && strncasecmp(p, "https://", 8) == 0)
            skip = 8;
        if (skip) {
            p += skip;
            const char *slash = memchr(p, '/', (size_t)(end - p));
            const char *q = memchr(p, '?', (size_t)(end - p));
            const char *aend = slash && (!q || slash < q) ? slash : q ? q : end;
            if (!authority_valid(p, (size_t)(aend - p)))
                return -1; /* empty, userinfo, or not a host */
            *authority = (struct http_str){p, (uint32_t)(aend - p)};
            if (q && (!slash || q < slash)) {
                /* "http://host?query": the path is empty, which means "/" */
                req->path.p = "/";
                req->path.len = 1;
                req->query.p = q + 1;
                req->query.len = (uint32_t)(end - q - 1);
                return 0;
            }
            if (!slash) {
                req->path.p = "/";
                req->path.len = 1;
                req->query.p = end;
                req->query.len = 0;
                return 0;
            }
            p = slash;
        } else if (req->target.len == 1 && *p == '*' && req->method == HTTP_OPTIONS) {
            req->path = req->target;
            req->query.p = end;
            req->query.len = 0;
            return 0;
        } else {
            return -1;
        }
    }
    const char *q = memchr(p, '?', (size_t)(end - p));
    req->path.p = p;
    req->path.len = (uint32_t)((q ? q : end) - p);
    req->query.p = q ? q + 1 : end;
    req->query.len = q ? (uint32_t)(end - q - 1) : 0;
    return 0;
}

static int parse_request_line(const char *p, const char *eol, struct http_request *req,
                              struct http_str *authority)
{
    const char *s = p;
    while (p < eol && (cls[(unsigned char)*p] & C_TOKEN))
        p++;
    if (p == s || p >= eol || *p != ' ')
        return fail(req, 400);
    req->method_str.p = s;
    req->method_str.len = (uint32_t)(p - s);
    req->method = method_of(s, (size_t)(p - s));
    s = ++p;
    while (p < eol && (cls[(unsigned char)*p] & C_TARGET))
        p++;
    if (p == s || p >= eol || *p != ' ')
        return fail(req, 400);
    req->target.p = s;
    req->target.len = (uint32_t)(p - s);
    p++;
    /* HTTP-version = "HTTP/" DIGIT "." DIGIT, then the line end */
    if (eol - p != 8 || memcmp(p, "HTTP/", 5) != 0 || p[6] != '.' ||
        p[5] < '0' || p[5] > '9' || p[7] < '0' || p[7] > '9')
        return fail(req, 400);
    if (p[5] != '1' || p[7] > '1')
        return fail(req, 505);
    req->minor = (uint8_t)(p[7] - '0');
    if (split_target(req, authority) < 0) {
        /* CONNECT host:port (authority-form, RFC 9112 3.2.3) is valid:
         * what herd does not do is the method, so 405, as CONNECT with a
         * path gets; but the connection closes (a tunnel's bytes follow) */
        int connect = req->method == HTTP_CONNECT &&
                      authority_valid(req->target.p, req->target.len);
        return fail(req, connect ? 405 : 400);
    }
    return 0;
}

/* Does h, the last header parsed, have the value of the first header of
 * its name? */
static int same_as_first(const struct http_request *req, const struct http_header *h)
{
    const struct http_header *f = req->headers;
    while (f < h && !(f->name.len == h->name.len &&
                      strncasecmp(f->name.p, h->name.p, h->name.len) == 0))
        f++;
    return f->value.len == h->value.len && memcmp(f->value.p, h->value.p, h->value.len) == 0;
}

/* Keeps the first line of a field the static handler acts on; a second
 * one is noted in req->repeated (drop_invalid_repeats and cond.c act on it). */
static inline void capture(struct http_request *req, struct http_str *field,
                           const struct http_header *h, uint8_t repeat_bit)
{
    if (field->p)
        req->repeated |= repeat_bit;
    else
        *field = h->value;
}

/* Records a header the server acts on; rejects conflicting framing. */
static int note_header(struct http_request *req, const struct http_header *h,
                       int *host_seen, int *te_seen)
{
    const struct http_str *n = &h->name;
    switch (n->len) {
    case 4:
        if (name_is(n, "host", 4)) {
            if ((*host_seen)++ || !host_valid(&h->value))
                return -1;
            req->host = h->value;
        }
        break;
    case 5:
        if (name_is(n, "range", 5))
            capture(req, &req->range, h, HTTP_REPEAT_RANGE);
        break;
    case 8:
        if (name_is(n, "if-range", 8))
            capture(req, &req->if_range, h, HTTP_REPEAT_IF_RANGE);
        else if (name_is(n, "if-match", 8))
            capture(req, &req->if_match, h, HTTP_REPEAT_IF_MATCH);
        break;
    case 10:
        if (name_is(n, "connection", 10)) {
            if (token_list_has(&h->value, "close", 5))
                req->conn_close = 1;
            if (token_list_has(&h->value, "keep-alive", 10))
                req->conn_keepalive = 1;
        }
        break;
    case 13:
        if (name_is(n, "if-none-match", 13))
            capture(req, &req->if_none_match, h, HTTP_REPEAT_IF_NONE_MATCH);
        break;
    case 14:
        if (name_is(n, "content-length", 14)) {
            int64_t cl;
            if (parse_content_length(&h->value, &cl) < 0)
                return -1;
            /* A repeat must be byte for byte the same: "5" then "05" is
             * one length to us but two framings to h11 and its kind. */
            if (req->content_length >= 0 && !same_as_first(req, h))
                return -1;
            req->content_length = cl;
        }
        break;
    case 17:
        if (name_is(n, "transfer-encoding", 17)) {
            /* Only a lone "chunked" frames a request we can trust. */
            if ((*te_seen)++ || !name_is(&h->value, "chunked", 7))
                return -1;
            req->chunked = 1;
        } else if (name_is(n, "if-modified-since", 17)) {
            capture(req, &req->if_modified_since, h, HTTP_REPEAT_IF_MODIFIED_SINCE);
        }
        break;
    case 19:
        if (name_is(n, "if-unmodified-since", 19))
            capture(req, &req->if_unmodified_since, h, HTTP_REPEAT_IF_UNMODIFIED_SINCE);
        break;
    }
    return 0;
}

/* Two lines of a singleton are one invalid field (RFC 9110 5.3: joined,
 * "bytes=0-1, bytes=5-9" is no ranges-specifier and two dates are no
 * HTTP-date), which the recipient ignores (13.1.3, 13.1.4, 14.2). An
 * If-Range that cannot be valid never matches, so its Range is ignored
 * too (13.1.5). The lists (If-Match, If-None-Match) are left to cond.c,
 * which reads every line. */
static void drop_invalid_repeats(struct http_request *req)
{
    static const struct http_str absent = {NULL, 0};
    if (req->repeated & (HTTP_REPEAT_RANGE | HTTP_REPEAT_IF_RANGE))
        req->range = req->if_range = absent;
    if (req->repeated & HTTP_REPEAT_IF_MODIFIED_SINCE)
        req->if_modified_since = absent;
    if (req->repeated & HTTP_REPEAT_IF_UNMODIFIED_SINCE)
        req->if_unmodified_since = absent;
}

/* An absolute-form target's authority is the request's host (RFC 9112
 * 3.2.2: the Host field is ignored, though a 1.1 request must still carry
 * one valid Host). The Host entry is pointed at it too, so a consumer that
 * walks the headers sees the same host as one that reads req->host. */
static void use_authority(struct http_request *req, struct http_str authority)
{
    req->host = authority;
    for (unsigned i = 0; i < req->nheaders; i++)
        if (name_is(&req->headers[i].name, "host", 4))
            req->headers[i].value = authority;
}

int http_parse_request(const char *buf, size_t len, size_t max_head,
                       struct http_request *req)
{
    size_t skip = 0;
    /* RFC 9112 2.2: ignore empty lines before the request line. */
    while (skip < len && (buf[skip] == '\r' || buf[skip] == '\n')) {
        if (buf[skip] == '\r' && skip + 1 < len && buf[skip + 1] != '\n')
            return fail(req, 400);
        skip++;
    }
    if (skip > 64)
        return fail(req, 400);
    const char *start = buf + skip;
    size_t avail = len - skip;

    long line1;
    size_t head = find_head_end(start, avail, &line1);
    if (head == 0 || head > max_head) {
        /* Not HTTP at all (a TLS hello, a stray protocol): say so now
         * rather than wait for a line end that never comes. Checked before
         * the size too, so a bad method over a long head is 400 however
         * the bytes were split by the network, not 400 in pieces and
         * 414/431 in one read. (A whole head within the limit has its
         * method checked with its request line.) */
        for (size_t i = 0; i < avail && start[i] != ' '; i++)
            if (!(cls[(unsigned char)start[i]] & C_TOKEN))
                return fail(req, 400);
        if (head == 0 && avail < max_head)
            return HTTP_PARSE_INCOMPLETE;
        return fail(req, line1 < 0 || (size_t)line1 >= max_head ? 414 : 431);
    }

    req->error = 0;
    req->nheaders = 0;
    req->chunked = req->conn_close = req->conn_keepalive = req->repeated = 0;
    req->content_length = -1;
    req->host.len = req->if_none_match.len = req->if_modified_since.len = 0;
    req->if_match.len = req->if_unmodified_since.len = 0;
    req->range.len = req->if_range.len = 0;
    req->host.p = req->if_none_match.p = req->if_modified_since.p = NULL;
    req->if_match.p = req->if_unmodified_since.p = NULL;
    req->range.p = req->if_range.p = NULL;

    const char *p = start, *end = start + head;
    const char *eol = start + line1;
    const char *line_end = eol > start && eol[-1] == '\r' ? eol - 1 : eol;
    struct http_str authority = {NULL, 0};
    if (parse_request_line(p, line_end, req, &authority) < 0)
        return HTTP_PARSE_ERROR;
    p = eol + 1;

    int host_seen = 0, te_seen = 0;
    for (;;) {
        /* p is at the start of a header line or of the final empty line. */
        if (*p == '\n')
            break;
        if (*p == '\r') {
            if (p[1] != '\n')
                return fail(req, 400);
            break;
        }
        if (*p == ' ' || *p == '\t')
            return fail(req, 400); /* obs-fold */
        const char *n = p;
        while (cls[(unsigned char)*p] & C_TOKEN)
            p++;
        if (p == n || *p != ':')
            return fail(req, 400); /* no colon, space before it, or a bad name char */
        if (req->nheaders == HTTP_MAX_HEADERS)
            return fail(req, 431);
        struct http_header *h = &req->headers[req->nheaders++];
        h->name.p = n;
        h->name.len = (uint32_t)(p - n);
        p++;
        while (*p == ' ' || *p == '\t')
            p++;
        const char *v = p;
        while (cls[(unsigned char)*p] & C_VALUE)
            p++;
        const char *vend = p;
        if (*p == '\r') {
            if (p[1] != '\n')
                return fail(req, 400); /* bare CR */
            p++;
        }
        if (*p != '\n')
            return fail(req, 400); /* control character or NUL */
        p++;
        while (vend > v && (vend[-1] == ' ' || vend[-1] == '\t'))
            vend--;
        h->value.p = v;
        h->value.len = (uint32_t)(vend - v);
        if (note_header(req, h, &host_seen, &te_seen) < 0)
            return fail(req, 400);
    }
    (void)end;
    if (req->chunked && (req->content_length >= 0 || req->minor == 0))
        return fail(req, 400);
    if (req->minor == 1 && !host_seen)
        return fail(req, 400);
    if (req->repeated)
        drop_invalid_repeats(req);
    if (authority.p)
        use_authority(req, authority);
    return (int)(skip + head);
}

#include "http/cgi_response.h"

#include <stddef.h>
#include <string.h>

#include "http/response.h"
#include "http/token.h"

static int is(const struct http_str *s, const char *lower)
{
    size_t n = strlen(lower);
    if (s->len != n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((s->p[i] | 0x20) != lower[i])
            return 0;
    return 1;
}

/* "NNN" or "NNN reason": the status 100..599 and the reason. */
static int parse_status(const struct http_str *v, struct upstream_response *r)
{
    const char *p = v->p;
    if (v->len < 3 || p[0] < '1' || p[0] > '5' || p[1] < '0' || p[1] > '9' || p[2] < '0' ||
        p[2] > '9' || (v->len > 3 && p[3] != ' '))
        return -1;
    r->status = (uint16_t)((p[0] - '0') * 100 + (p[1] - '0') * 10 + (p[2] - '0'));
    r->reason.p = v->len > 4 ? p + 4 : NULL;
    r->reason.len = v->len > 4 ? v->len - 4 : 0;
    return 0;
}

/* One "Name: value" line p[0..eol) into r. */
static int header_line(const char *p, const char *eol, struct upstream_response *r,
                       int *has_location)
{
    const char *colon = p;
    while (colon < eol && http_tchar((unsigned char)*colon))
        colon++;
    if (colon == p || colon == eol || *colon != ':')
        return -1;
    const char *v = colon + 1, *ve = eol;
    while (v < ve && (*v == ' ' || *v == '\t'))
        v++;
    while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
        ve--;
    for (const char *q = v; q < ve; q++)
        if (((unsigned char)*q < 0x20 && *q != '\t') || *q == 0x7f)
            return -1;
    struct http_str name = {p, (uint32_t)(colon - p)}, val = {v, (uint32_t)(ve - v)};
    if (is(&name, "status"))
        return parse_status(&val, r);
    if (is(&name, "transfer-encoding"))
        return 0;
    if (is(&name, "content-length")) {
        if (r->content_length >= 0 || http_parse_length(&val, &r->content_length) < 0)
            return -1;
    }
    if (is(&name, "location"))
        *has_location = 1;
    if (r->nheaders == HTTP_MAX_HEADERS)
        return -1;
    r->headers[r->nheaders++] = (struct http_header){name, val};
    return 0;
}

/* The reason for a status a script gave without one, or that a Location
 * alone implies (302): RFC 9110's, so the status line is never
 * "HTTP/1.1 302 " with nothing after it. herd's own table (http/response.c)
 * has only what herd answers itself. NULL: none known, it stays empty. */
static const char *standard_reason(unsigned status)
{
    if (resp_status_known(status))
        return resp_reason(status);
    switch (status) {
    case 201: return "Created";
    case 202: return "Accepted";
    case 203: return "Non-Authoritative Information";
    case 204: return "No Content";
    case 205: return "Reset Content";
    case 300: return "Multiple Choices";
    case 302: return "Found";
    case 303: return "See Other";
    case 307: return "Temporary Redirect";
    case 308: return "Permanent Redirect";
    case 401: return "Unauthorized";
    case 402: return "Payment Required";
    case 407: return "Proxy Authentication Required";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 412: return "Precondition Failed";
    case 415: return "Unsupported Media Type";
    case 417: return "Expectation Failed";
    case 421: return "Misdirected Request";
    case 422: return "Unprocessable Content";
    case 426: return "Upgrade Required";
    case 428: return "Precondition Required";
    case 429: return "Too Many Requests";
    case 451: return "Unavailable For Legal Reasons";
    default: return NULL;
    }
}

int cgi_parse_response(const char *buf, size_t len, size_t max_head,
                       struct upstream_response *r)
{
    memset(r, 0, offsetof(struct upstream_response, headers));
    r->content_length = -1;
    r->minor = 1;
    const char *p = buf, *end = buf + (len < max_head ? len : max_head);
    int has_location = 0;
    for (;;) {
        const char *lf = memchr(p, '\n', (size_t)(end - p));
        if (!lf)
            return len >= max_head ? HTTP_PARSE_ERROR : HTTP_PARSE_INCOMPLETE;
        const char *eol = lf > p && lf[-1] == '\r' ? lf - 1 : lf;
        if (eol == p) {
            p = lf + 1;
            break;
        }
        if (header_line(p, eol, r, &has_location) < 0)
            return HTTP_PARSE_ERROR;
        p = lf + 1;
    }
    if (!r->status)
        r->status = has_location ? 302 : 200;
    const char *reason = r->reason.len ? NULL : standard_reason(r->status);
    if (reason) {
        r->reason.p = reason;
        r->reason.len = (uint32_t)strcspn(reason, "\r\n");
    }
    return (int)(p - buf);
}

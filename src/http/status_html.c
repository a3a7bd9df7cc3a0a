#include "http/status_html.h"

#include <string.h>
#include <strings.h>

/* The file is assembled in as it is, so it stays an HTML file anyone can
 * edit and open (the Makefile makes this object depend on it). */
__asm__(".section .rodata\n"
        ".balign 16\n"
        "status_page_start:\n"
        ".incbin \"src/http/status_page.html\"\n"
        "status_page_end:\n"
        ".byte 0\n"
        ".previous\n");
extern const char status_page_start[], status_page_end[];

/* The hashes are SHA-256 of the text between <script> and </script> and
 * between <style> and </style>; after an edit of the page, the status
 * tests fail and print the new ones (a browser would refuse the old). */
const char status_html_csp[] =
    "default-src 'none'; "
    "script-src 'sha256-DluZPS+YJ9t+3zkRO9l9uM4j3sD1OdzVcfSLyGopU6o='; "
    "style-src 'sha256-io+QN81r0uGBatOsPfu1eYSYWZ6oKEk3+4eFzAv4syU='; "
    "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'";

const char *status_html(size_t *len)
{
    *len = (size_t)(status_page_end - status_page_start);
    return status_page_start;
}

/* A q-value (RFC 9110 12.4.2) in thousandths; -1 when it does not parse. */
static int qvalue(const char *p, size_t n)
{
    if (n == 0 || (p[0] != '0' && p[0] != '1') || (n > 1 && p[1] != '.') || n > 5)
        return -1;
    int q = (p[0] - '0') * 1000, scale = 100;
    for (size_t i = 2; i < n; i++, scale /= 10) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        q += (p[i] - '0') * scale;
    }
    return q > 1000 ? -1 : q;
}

static int is(const char *p, size_t n, const char *lit)
{
    return strlen(lit) == n && strncasecmp(p, lit, n) == 0;
}

/* Weights of one Accept element "type/sub;q=x" into q[]: text/html,
 * text/star, application/json, application/star, star/star. */
enum { Q_HTML, Q_TEXT, Q_JSON, Q_APP, Q_ANY, Q_N };

static void accept_element(const char *p, const char *end, int q[Q_N])
{
    const char *semi = memchr(p, ';', (size_t)(end - p));
    const char *tend = semi ? semi : end;
    while (tend > p && (tend[-1] == ' ' || tend[-1] == '\t'))
        tend--;
    int w = 1000;
    for (const char *s = semi; s && end - s > 1;) {
        s++;
        while (s < end && (*s == ' ' || *s == '\t'))
            s++;
        const char *next = s < end ? memchr(s, ';', (size_t)(end - s)) : NULL;
        const char *pend = next ? next : end;
        while (pend > s && (pend[-1] == ' ' || pend[-1] == '\t'))
            pend--;
        if (pend - s >= 2 && (s[0] | 0x20) == 'q' && s[1] == '=')
            w = qvalue(s + 2, (size_t)(pend - s - 2));
        s = next;
    }
    if (w < 0)
        return; /* a bad q: ignore the element */
    size_t n = (size_t)(tend - p);
    int k = is(p, n, "text/html") ? Q_HTML : is(p, n, "text/*") ? Q_TEXT :
            is(p, n, "application/json") ? Q_JSON : is(p, n, "application/*") ? Q_APP :
            is(p, n, "*/*") ? Q_ANY : -1;
    if (k >= 0 && w > q[k])
        q[k] = w;
}

int status_wants_html(const struct http_request *req, int format_html)
{
    if (format_html)
        return 1;
    int q[Q_N] = {-1, -1, -1, -1, -1};
    for (unsigned i = 0; i < req->nheaders; i++) {
        const struct http_header *h = &req->headers[i];
        if (!is(h->name.p, h->name.len, "accept"))
            continue;
        const char *p = h->value.p, *end = p + h->value.len;
        while (p < end) {
            const char *comma = memchr(p, ',', (size_t)(end - p));
            const char *e = comma ? comma : end;
            while (p < e && (*p == ' ' || *p == '\t'))
                p++;
            if (p < e)
                accept_element(p, e, q);
            p = comma ? comma + 1 : end;
        }
    }
    /* the most specific range that names a type gives its weight */
    int html = q[Q_HTML] >= 0 ? q[Q_HTML] : q[Q_TEXT] >= 0 ? q[Q_TEXT] : q[Q_ANY];
    int json = q[Q_JSON] >= 0 ? q[Q_JSON] : q[Q_APP] >= 0 ? q[Q_APP] : q[Q_ANY];
    return html > 0 && html > json;
}

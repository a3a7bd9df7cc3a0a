/* libFuzzer target: the input is what an upstream sends on a keep-alive
 * connection. Response heads are parsed back to back as models/upstream_pump.c
 * does (interim 1xx dropped, each body framed by Content-Length or chunked,
 * a close-delimited body ends the stream), with max_head 16384 and 256, and
 * each head is rebuilt for a client. Any broken invariant aborts. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http/body.h"
#include "http/proxy.h"

#define ENSURE(c)                                                                   \
    do {                                                                            \
        if (!(c))                                                                   \
            __builtin_trap();                                                       \
    } while (0)

static int within(struct http_str s, const char *lo, const char *hi)
{
    return s.p >= lo && s.p <= hi && s.len <= (size_t)(hi - s.p);
}

/* The rebuilt head is one status line, header lines and an empty line,
 * with no bare CR or LF and no hop-by-hop header left. */
static void check_client_head(const char *h, long n)
{
    ENSURE(n >= 17 && !memcmp(h, "HTTP/1.1 ", 9) && !memcmp(h + n - 4, "\r\n\r\n", 4));
    for (long i = 0; i < n; i++) {
        if (h[i] == '\n')
            ENSURE(i > 0 && h[i - 1] == '\r');
        if (h[i] == '\r')
            ENSURE(i + 1 < n && h[i + 1] == '\n');
        if (i && h[i - 1] == '\n' && (h[i] | 0x20) == 'k')
            ENSURE(n - i < 11 || strncasecmp(h + i, "keep-alive:", 11) != 0);
    }
}

static void run(const char *buf, size_t len, size_t max_head)
{
    static char client_head[2 * 16384 + 512];
    size_t pos = 0;
    while (pos < len) {
        struct upstream_response r;
        int n = upstream_parse_response(buf + pos, len - pos, max_head, &r);
        if (n == HTTP_PARSE_INCOMPLETE) {
            ENSURE(len - pos < max_head);
            return;
        }
        if (n == HTTP_PARSE_ERROR)
            return;
        ENSURE(n > 0 && (size_t)n <= len - pos && (size_t)n <= max_head);
        ENSURE(r.status >= 100 && r.status <= 599 && r.minor <= 1);
        ENSURE(r.nheaders <= HTTP_MAX_HEADERS);
        ENSURE(!(r.chunked && r.content_length >= 0));
        const char *lo = buf + pos, *hi = buf + pos + n;
        ENSURE(within(r.reason, lo, hi));
        for (int i = 0; i < r.nheaders; i++)
            ENSURE(within(r.headers[i].name, lo, hi) && within(r.headers[i].value, lo, hi) &&
                   r.headers[i].name.len > 0);
        pos += (size_t)n;
        if (r.status < 200)
            continue;
        enum upstream_body kind = upstream_body_kind(&r, 0);
        for (int minor = 0; minor <= 1; minor++) {
            long h = proxy_build_response(&r, kind, minor, minor, minor, client_head,
                                          (size_t)n + 512);
            ENSURE(h > 0);
            check_client_head(client_head, h);
        }
        if (kind == UB_NONE)
            continue;
        if (kind == UB_CLOSE)
            return;
        struct body_skip b;
        body_skip_start(&b, kind == UB_LENGTH ? r.content_length : 0,
                        kind == UB_CHUNKED, 16384);
        long k = body_skip(&b, buf + pos, len - pos, UINT64_MAX);
        if (k < 0)
            return;
        ENSURE((size_t)k <= len - pos);
        pos += (size_t)k;
        if (body_skip_active(&b))
            return;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* an exact-size copy, so ASan sees any read past the end */
    char *buf = malloc(size ? size : 1);
    memcpy(buf, data, size);
    run(buf, size, 16384);
    run(buf, size, 256);
    free(buf);
    return 0;
}

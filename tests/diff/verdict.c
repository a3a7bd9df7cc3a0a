/* herd's verdict on one message at a time, for the differential test against
 * a reference parser (tests/diff/test_differential.py). Reads cases from
 * stdin, each "<kind> <len>\n" and then len bytes:
 *   H  a request head, parsed by http_parse_request (max head 8192)
 *   C  a chunked body, decoded by body_decode (cap 1 MiB, trailers 8192)
 *   R  an upstream response head, parsed by upstream_parse_response (16384)
 * and prints one line per case:
 *   H accept TAKEN MINOR CHUNKED CONTENT-LENGTH CLOSE xMETHOD xTARGET xNAME:xVALUE...
 *   C accept TAKEN xDATA
 *   R accept TAKEN STATUS MINOR CHUNKED CONTENT-LENGTH xREASON xNAME:xVALUE...
 *   or "reject CODE", or "incomplete".
 * Byte strings are hex after an 'x', so an empty one is still a word.
 *
 * Each message is also given in pieces (byte by byte, and cut at several
 * places; every prefix of a head): a verdict or data that depends on how the
 * bytes arrive prints "split-mismatch WHY" instead, which fails the test. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/body.h"
#include "http/parser.h"
#include "http/proxy.h"

#define MAX_HEAD 8192
#define MAX_BODY ((uint64_t)1 << 20)
#define MAX_TRAILER 8192
#define MAX_UPSTREAM_HEAD 16384

static void put_hex(const char *p, size_t len)
{
    static const char digits[] = "0123456789abcdef";
    putchar('x');
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)p[i];
        putchar(digits[c >> 4]);
        putchar(digits[c & 15]);
    }
}

static void put_headers(const struct http_header *h, int n)
{
    for (int i = 0; i < n; i++) {
        putchar(' ');
        put_hex(h[i].name.p, h[i].name.len);
        putchar(':');
        put_hex(h[i].value.p, h[i].value.len);
    }
}

/* ---- request heads ---- */

static int parse_head_copy(const char *buf, size_t len, struct http_request *req)
{
    char *copy = malloc(len ? len : 1); /* exact size, for ASan */
    memcpy(copy, buf, len);
    int n = http_parse_request(copy, len, MAX_HEAD, req);
    free(copy);
    return n;
}

/* Every prefix shorter than the head is incomplete or, when the whole is
 * rejected, may be rejected early; it is never a head of its own. */
static const char *head_prefixes_differ(const char *buf, size_t len, int whole)
{
    size_t end = whole > 0 ? (size_t)whole : len;
    size_t step = end > 2048 ? end / 512 : 1;
    for (size_t k = 0; k < end; k += step) {
        struct http_request req;
        int n = parse_head_copy(buf, k, &req);
        if (n >= 0)
            return "a-prefix-is-a-head";
        if (n == HTTP_PARSE_ERROR && whole != HTTP_PARSE_ERROR)
            return "a-prefix-rejected";
    }
    return NULL;
}

static void run_head(const char *buf, size_t len)
{
    static struct http_request req;
    int n = http_parse_request(buf, len, MAX_HEAD, &req);
    const char *why = head_prefixes_differ(buf, len, n);
    if (why) {
        printf("split-mismatch %s\n", why);
        return;
    }
    if (n == HTTP_PARSE_INCOMPLETE) {
        puts("incomplete");
        return;
    }
    if (n < 0) {
        printf("reject %d\n", req.error);
        return;
    }
    printf("accept %d %d %d %lld %d ", n, req.minor, req.chunked,
           (long long)req.content_length, req.conn_close);
    put_hex(req.method_str.p, req.method_str.len);
    putchar(' ');
    put_hex(req.target.p, req.target.len);
    put_headers(req.headers, req.nheaders);
    putchar('\n');
}

/* ---- chunked bodies ---- */

struct decoded {
    long verdict;      /* bytes of body, BODY_ERROR, BODY_TOO_LARGE, or 0 when incomplete */
    char *data;
    size_t len;
    const char *broken; /* an invariant of body_decode that did not hold */
};

/* Decodes buf[0..len) given in pieces ending at cuts[0..ncuts), each an
 * exact-size heap copy. */
static struct decoded decode(const char *buf, size_t len, const size_t *cuts, size_t ncuts)
{
    struct decoded d = {0, malloc(len + 1), 0, NULL};
    struct body_skip b;
    body_skip_start(&b, 0, 1, MAX_TRAILER);
    size_t pos = 0;
    for (size_t i = 0; i <= ncuts && body_skip_active(&b); i++) {
        size_t end = i < ncuts ? cuts[i] : len;
        if (end <= pos && i < ncuts)
            continue;
        size_t plen = end - pos;
        char *piece = malloc(plen ? plen : 1);
        memcpy(piece, buf + pos, plen);
        size_t off = 0;
        while (off < plen && body_skip_active(&b)) {
            struct body_data run;
            long n = body_decode(&b, piece + off, plen - off, MAX_BODY, &run);
            if (n < 0) {
                d.verdict = n;
                free(piece);
                return d;
            }
            if ((size_t)n > plen - off || run.len > (size_t)n ||
                (run.len && (run.p < piece + off || run.p + run.len > piece + off + (size_t)n)))
                d.broken = "data-run-outside-input";
            if (n == 0)
                d.broken = "no-progress";
            if (d.broken) {
                free(piece);
                return d;
            }
            memcpy(d.data + d.len, run.p, run.len);
            d.len += run.len;
            off += (size_t)n;
        }
        free(piece);
        pos += off;
    }
    if (!body_skip_active(&b))
        d.verdict = (long)pos;
    return d;
}

static int same(const struct decoded *a, const struct decoded *b)
{
    return a->verdict == b->verdict && a->len == b->len && !memcmp(a->data, b->data, a->len);
}

static void run_chunked(const char *buf, size_t len)
{
    struct decoded whole = decode(buf, len, NULL, 0);
    const char *why = whole.broken;
    size_t *cuts = malloc((len + 1) * sizeof *cuts);
    for (size_t i = 0; i < len; i++)
        cuts[i] = i + 1;
    struct decoded split = decode(buf, len, cuts, len);
    if (!why)
        why = split.broken ? split.broken : !same(&whole, &split) ? "byte-by-byte" : NULL;
    free(split.data);
    /* two cuts at places that move with the length, so every gap is hit */
    for (size_t k = 1; k < 8 && !why; k++) {
        size_t two[2] = {len * k / 8, len * k / 8 + (len * k * 7 + 3) % (len / 4 + 1)};
        if (two[1] > len)
            two[1] = len;
        split = decode(buf, len, two, 2);
        why = split.broken ? split.broken : !same(&whole, &split) ? "cut" : NULL;
        free(split.data);
    }
    free(cuts);
    if (why)
        printf("split-mismatch %s\n", why);
    else if (whole.verdict < 0)
        printf("reject %ld\n", whole.verdict);
    else if (whole.verdict == 0)
        puts("incomplete");
    else {
        printf("accept %ld ", whole.verdict);
        put_hex(whole.data, whole.len);
        putchar('\n');
    }
    free(whole.data);
}

/* ---- upstream response heads ---- */

static void run_response(const char *buf, size_t len)
{
    static struct upstream_response r;
    int n = upstream_parse_response(buf, len, MAX_UPSTREAM_HEAD, &r);
    /* as for request heads: no prefix is a head, none is rejected early
     * when the whole is not rejected */
    size_t end = n > 0 ? (size_t)n : len;
    for (size_t k = 0; k < end; k += end > 2048 ? end / 512 : 1) {
        static struct upstream_response pr;
        int m = upstream_parse_response(buf, k, MAX_UPSTREAM_HEAD, &pr);
        if (m >= 0 || (m == HTTP_PARSE_ERROR && n != HTTP_PARSE_ERROR)) {
            printf("split-mismatch %s\n", m >= 0 ? "a-prefix-is-a-head" : "a-prefix-rejected");
            return;
        }
    }
    if (n == HTTP_PARSE_INCOMPLETE) {
        puts("incomplete");
        return;
    }
    if (n < 0) {
        puts("reject 0");
        return;
    }
    printf("accept %d %d %d %d %lld ", n, r.status, r.minor, r.chunked,
           (long long)r.content_length);
    put_hex(r.reason.p, r.reason.len);
    put_headers(r.headers, r.nheaders);
    putchar('\n');
}

int main(void)
{
    char kind;
    size_t len;
    while (scanf(" %c %zu", &kind, &len) == 2 && getchar() == '\n') {
        char *buf = malloc(len ? len : 1); /* exact size, for ASan */
        if (fread(buf, 1, len, stdin) != len) {
            fprintf(stderr, "verdict: a case is shorter than its length\n");
            return 2;
        }
        switch (kind) {
        case 'H': run_head(buf, len); break;
        case 'C': run_chunked(buf, len); break;
        case 'R': run_response(buf, len); break;
        default:
            fprintf(stderr, "verdict: unknown kind '%c'\n", kind);
            return 2;
        }
        free(buf);
    }
    return ferror(stdout) ? 1 : 0;
}

/* body_skip: Content-Length and chunked bodies, whole, split at every byte
 * and byte by byte; broken framing; the size cap; and the bytes after the
 * body left alone. Every piece is an exact-size heap copy, for ASan. */
#include "unit.h"

#include "http/body.h"

#define NEXT "GET /next HTTP/1.1\r\n"
#define BIG ((uint64_t)1 << 40)

/* Feeds data[0..n) in pieces cut at cuts[0..ncuts) (ascending). Returns the
 * bytes taken when the body ends (or all of them while it has not), -1 on
 * an error, -2 when body_skip stopped early while still active. */
static long feed(struct body_skip *b, const char *data, size_t n, const size_t *cuts,
                 size_t ncuts, uint64_t max)
{
    size_t pos = 0;
    for (size_t i = 0; i <= ncuts; i++) {
        size_t end = i < ncuts ? cuts[i] : n;
        if (end < pos)
            continue;
        size_t len = end - pos;
        char *piece = malloc(len ? len : 1);
        memcpy(piece, data + pos, len);
        long r = body_skip(b, piece, len, max);
        free(piece);
        if (r < 0)
            return -1;
        if ((size_t)r > len)
            return -3;
        pos += (size_t)r;
        if (!body_skip_active(b))
            return (long)pos;
        if ((size_t)r != len)
            return -2;
    }
    return (long)pos;
}

static long feed_whole(struct body_skip *b, const char *data, size_t n, uint64_t max)
{
    return feed(b, data, n, NULL, 0, max);
}

/* ------------------------------------------------------------ Content-Length */

TEST(content_length_whole)
{
    struct body_skip b;
    static const char in[] = "0123456789" NEXT;
    body_skip_start(&b, 10, 0, 8192);
    CHECK(body_skip_active(&b));
    CHECK_EQ_INT(feed_whole(&b, in, sizeof in - 1, BIG), 10);
    CHECK(!body_skip_active(&b));
    /* once done, it takes nothing more */
    CHECK_EQ_INT(body_skip(&b, NEXT, sizeof NEXT - 1, BIG), 0);
}

TEST(content_length_split_everywhere)
{
    static const char in[] = "0123456789abcdef" NEXT;
    const size_t body = 16, n = sizeof in - 1;
    for (size_t k = 0; k <= n; k++) {
        struct body_skip b;
        body_skip_start(&b, (int64_t)body, 0, 8192);
        size_t cut = k;
        if (!CHECK_EQ_INT(feed(&b, in, n, &cut, 1, BIG), body))
            UNIT_NOTE("split at %zu", k);
        CHECK(!body_skip_active(&b));
    }
    /* byte by byte */
    size_t cuts[64];
    for (size_t i = 0; i < n; i++)
        cuts[i] = i + 1;
    struct body_skip b;
    body_skip_start(&b, (int64_t)body, 0, 8192);
    CHECK_EQ_INT(feed(&b, in, n, cuts, n, BIG), body);
}

TEST(content_length_partial)
{
    struct body_skip b;
    body_skip_start(&b, 1000000, 0, 8192);
    CHECK_EQ_INT(body_skip(&b, "abc", 3, BIG), 3);
    CHECK(body_skip_active(&b));
    CHECK_EQ_INT(b.left, 1000000 - 3);
    CHECK_EQ_INT(body_skip(&b, "", 0, BIG), 0);
    CHECK(body_skip_active(&b));
    /* the cap is for chunked bodies: Content-Length is checked before */
    body_skip_start(&b, 100, 0, 8192);
    char buf[100];
    memset(buf, 'x', sizeof buf);
    CHECK_EQ_INT(body_skip(&b, buf, sizeof buf, 10), 100);
    CHECK(!body_skip_active(&b));
}

TEST(no_body)
{
    struct body_skip b;
    body_skip_start(&b, 0, 0, 8192);
    CHECK(!body_skip_active(&b));
    CHECK_EQ_INT(body_skip(&b, NEXT, sizeof NEXT - 1, BIG), 0);
    body_skip_start(&b, -1, 0, 8192); /* no Content-Length */
    CHECK(!body_skip_active(&b));
    CHECK_EQ_INT(body_skip(&b, NEXT, sizeof NEXT - 1, BIG), 0);
}

/* ------------------------------------------------------------ chunked */

struct chunked_case {
    const char *body;
    size_t len;
    int line;
};

#define C(lit) {lit, sizeof(lit) - 1, __LINE__}

static const struct chunked_case good[] = {
    C("0\r\n\r\n"),
    C("5\r\nhello\r\n0\r\n\r\n"),
    C("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"),
    C("0005\r\nhello\r\n000\r\n\r\n"),
    C("a\r\n0123456789\r\nA\r\n0123456789\r\n0\r\n\r\n"),
    C("1f\r\n0123456789012345678901234567890\r\n1F\r\n0123456789012345678901234567890\r\n0\r\n\r\n"),
    /* the data is skipped by length, whatever it holds */
    C("6\r\n0\r\n\r\nX\r\n0\r\n\r\n"),
    C("2\r\n\r\n\r\n0\r\n\r\n"),
    /* extensions */
    C("5;ext=1\r\nhello\r\n0\r\n\r\n"),
    C("5;a=b;c\r\nhello\r\n0;last\r\n\r\n"),
    C("5; a=b ;c\r\nhello\r\n0;x \t\r\n\r\n"),   /* OWS after a ';' and before the next */
    C("5 \r\nhello\r\n0\t\r\n\r\n"),                 /* OWS ending the size line */
    C("5;a=\"x y\"\t\r\nhello\r\n0\r\n\r\n"),
    /* trailers */
    C("5\r\nhello\r\n0\r\nX-T: 1\r\n\r\n"),
    C("5\r\nhello\r\n0\r\nX-T: 1\r\nY: 2\r\n\r\n"),
    C("5;a=\"q\\\"\\\\\"\r\nhello\r\n0\r\n\r\n"),  /* quoted-pairs */
    C("5\r\nhello\r\n0\r\nT:\r\nU:\x80\t v\r\n\r\n"),   /* empty and obs-text values */
    /* names near the framing ones are just trailers */
    C("0\r\nContent-Lengt: 1\r\nContent-Lengths: 1\r\nContent-Type: x\r\n\r\n"),
    C("0\r\nTransfer-Encodin: x\r\nTransfer-Encodings: x\r\nTransfer: x\r\n\r\n"),
    C("0\r\nX-Content-Length: 1\r\n\r\n"),
    C("0000000000000005\r\nhello\r\n0\r\n\r\n"),            /* 16 digits */
};

TEST(chunked_whole)
{
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        char in[512];
        size_t body = good[i].len;
        memcpy(in, good[i].body, body);
        memcpy(in + body, NEXT, sizeof NEXT - 1);
        size_t n = body + sizeof NEXT - 1;
        struct body_skip b;
        body_skip_start(&b, -1, 1, 8192);
        CHECK(body_skip_active(&b));
        int ok = CHECK_EQ_INT(feed_whole(&b, in, n, BIG), body);
        ok &= CHECK(!body_skip_active(&b));
        if (!ok)
            UNIT_NOTE("case at line %d", good[i].line);
    }
}

TEST(chunked_split_everywhere)
{
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        char in[512];
        size_t body = good[i].len;
        memcpy(in, good[i].body, body);
        memcpy(in + body, NEXT, sizeof NEXT - 1);
        size_t n = body + sizeof NEXT - 1;
        long bad = 0;
        /* one cut anywhere, and two cuts anywhere */
        for (size_t k = 0; k <= n; k++)
            for (size_t j = k; j <= n; j++) {
                struct body_skip b;
                body_skip_start(&b, -1, 1, 8192);
                size_t cuts[2] = {k, j};
                long r = feed(&b, in, n, cuts, 2, BIG);
                if ((r != (long)body || body_skip_active(&b)) && !bad++) {
                    CHECK_EQ_INT(r, body);
                    UNIT_NOTE("case at line %d, cuts at %zu and %zu", good[i].line, k, j);
                }
            }
        CHECK_EQ_INT(bad, 0);
        /* byte by byte */
        size_t cuts[512];
        for (size_t k = 0; k < n; k++)
            cuts[k] = k + 1;
        struct body_skip b;
        body_skip_start(&b, -1, 1, 8192);
        if (!CHECK_EQ_INT(feed(&b, in, n, cuts, n, BIG), body))
            UNIT_NOTE("case at line %d, byte by byte", good[i].line);
    }
}

static const struct chunked_case broken[] = {
    C("\r\n"),                       /* no digits */
    C("\n"),
    C(";ext\r\n"),
    C(" 5\r\nhello\r\n0\r\n\r\n"),
    C("x\r\n"),                      /* bad hex */
    C("g\r\n"),
    C("5g\r\nhello\r\n0\r\n\r\n"),
    C("-1\r\n"),
    C("+5\r\nhello\r\n0\r\n\r\n"),
    C("0x5\r\nhello\r\n0\r\n\r\n"),
    C("5\rX"),                       /* CR without LF on the size line */
    C("5;a\rX"),
    C("5\r\r\n"),
    C("5;a\x01\r\nhello\r\n0\r\n\r\n"), /* control character in an extension */
    C("5;a\0\r\nhello\r\n0\r\n\r\n"),
    C("5\r\nhelloX\r\n0\r\n\r\n"),   /* no CRLF after the data */
    C("5\r\nhello\rX\n0\r\n\r\n"),
    C("5\r\nhello0\r\n\r\n"),
    C("5\r\nhelloX0\r\n\r\n"),    /* junk, then what would be a last chunk */
    C("1\r\nab0\r\n\r\n"),
    C("5\r\nhello\rX0\r\n\r\n"),  /* CR then not LF after the data */
    C("3\r\nhello\r\n0\r\n\r\n"),    /* data longer than its size */
    C("5\r\nhello\r\n0\r\n\rX"),     /* bad final CRLF */
    C("5\r\nhello\r\n0\r\nT: v\r\n\rX"),
    C("fffffffffffffffff\r\n"),      /* size overflows 64 bits */
    C("10000000000000000\r\n"),
    /* RFC 9112 7.1 allows CRLF only: every bare LF is an error */
    C("5\nhello\r\n0\r\n\r\n"),
    C("5\r\nhello\n0\r\n\r\n"),
    C("5;x\nhello\r\n0\r\n\r\n"),
    C("5\r\nhello\r\n0\r\nT: v\n\r\n"),
    C("5\r\nhello\r\n0\r\n\n"),
    C("0\n\n"),
    /* extensions: tokens and quoted strings only */
    C("5;\x80\xff\r\nhello\r\n0\r\n\r\n"),
    C("5;a b\r\nhello\r\n0\r\n\r\n"),
    C("5;=b\r\nhello\r\n0\r\n\r\n"),
    C("5;a=\r\nhello\r\n0\r\n\r\n"),
    C("5;a=\"x\r\nhello\r\n0\r\n\r\n"),
    C("5;a=b c\r\nhello\r\n0\r\n\r\n"),
    /* more than 16 hex digits, even as leading zeros */
    C("00000000000000005\r\nhello\r\n0\r\n\r\n"),
    C("000000000000000000000000000000\r\n\r\n"),
    /* trailers: field lines only */
    C("5\r\nhello\r\n0\r\nT v\r\n\r\n"),        /* no colon */
    C("5\r\nhello\r\n0\r\nT : v\r\n\r\n"),      /* space before it */
    C("5\r\nhello\r\n0\r\nT: a\rb\r\n\r\n"),   /* bare CR */
    C("5\r\nhello\r\n0\r\nT: a\x01\r\n\r\n"),
    C("5\r\nhello\r\n0\r\nT: a\r\n b\r\n\r\n"), /* obs-fold */
    C("5\r\nhello\r\n0\r\n:v\r\n\r\n"),
    /* found by the differential against h11 (tests/diff): whitespace
     * between the size and ';' (BWS to RFC 9112, an error to h11) */
    C("5 ;a=b\r\nhello\r\n0\r\n\r\n"),
    C("5\t;a\r\nhello\r\n0\r\n\r\n"),
    C("5\r\nhello\r\n0 ;x\r\n\r\n"),
    C("5  \t ;a\r\nhello\r\n0\r\n\r\n"),
    /* and framing fields in the trailer section (RFC 9110 6.5.1) */
    C("5\r\nhello\r\n0\r\nContent-Length: 5\r\n\r\n"),
    C("5\r\nhello\r\n0\r\ncontent-length:x\r\n\r\n"),
    C("5\r\nhello\r\n0\r\nX: 1\r\nCONTENT-LENGTH: 1\r\n\r\n"),
    C("5\r\nhello\r\n0\r\nTransfer-Encoding: gzip\r\n\r\n"),
    C("5\r\nhello\r\n0\r\ntransfer-encoding: chunked\r\n\r\n"),
};

TEST(chunked_broken)
{
    for (size_t i = 0; i < sizeof broken / sizeof broken[0]; i++) {
        const char *in = broken[i].body;
        size_t n = broken[i].len;
        struct body_skip b;
        body_skip_start(&b, -1, 1, 8192);
        if (!CHECK_EQ_INT(feed_whole(&b, in, n, BIG), -1))
            UNIT_NOTE("case at line %d", broken[i].line);
        /* byte by byte too */
        size_t cuts[64];
        for (size_t k = 0; k < n && k < 64; k++)
            cuts[k] = k + 1;
        body_skip_start(&b, -1, 1, 8192);
        if (!CHECK_EQ_INT(feed(&b, in, n, cuts, n < 64 ? n : 64, BIG), -1))
            UNIT_NOTE("case at line %d, byte by byte", broken[i].line);
    }
}

TEST(chunked_cap)
{
    /* The cap counts every byte of a chunked body, framing included, so
     * extensions, zeros and trailers cannot stream past it. */
    struct body_skip b;
    static const char ten[] = "5\r\nhello\r\n5\r\nworld\r\n0\r\n\r\n"; /* 25 bytes */
    body_skip_start(&b, -1, 1, 8192);
    CHECK_EQ_INT(feed_whole(&b, ten, sizeof ten - 1, 25), sizeof ten - 1);
    CHECK(!body_skip_active(&b));
    body_skip_start(&b, -1, 1, 8192);
    CHECK_EQ_INT(body_skip(&b, ten, sizeof ten - 1, 24), BODY_TOO_LARGE);
    /* a chunk over the cap fails at its size line, before its data */
    body_skip_start(&b, -1, 1, 8192);
    CHECK_EQ_INT(body_skip(&b, "b\r\n", 3, 10), BODY_TOO_LARGE);
    body_skip_start(&b, -1, 1, 8192);
    CHECK_EQ_INT(body_skip(&b, "a\r\n", 3, 13), 3);
    CHECK(body_skip_active(&b));
    /* huge announced sizes, alone or after a chunk: refused, no overflow */
    body_skip_start(&b, -1, 1, 8192);
    CHECK_EQ_INT(body_skip(&b, "7fffffffffffffff\r\n", 18, BIG), BODY_TOO_LARGE);
    body_skip_start(&b, -1, 1, 8192);
    CHECK_EQ_INT(body_skip(&b, "1\r\nx\r\n7fffffffffffffff\r\n", 24, UINT64_MAX), 24);
    body_skip_start(&b, -1, 1, 8192);
    CHECK_EQ_INT(body_skip(&b, "1\r\nx\r\nffffffffffffffff\r\n", 24, UINT64_MAX),
                 BODY_TOO_LARGE);
    /* 5 MiB of extension or of zeros never gets past one chunk line */
    size_t big = 5 << 20;
    char *ext = malloc(big);
    memset(ext, 'a', big);
    memcpy(ext, "1;", 2);
    body_skip_start(&b, -1, 1, 8192);
    CHECK_EQ_INT(body_skip(&b, ext, big, BIG), BODY_TOO_LARGE);
    CHECK(b.line <= BODY_CHUNK_LINE_MAX + 1);
    memset(ext, '0', big);
    body_skip_start(&b, -1, 1, 8192);
    CHECK_EQ_INT(body_skip(&b, ext, big, BIG), BODY_ERROR);
    /* trailers: at most max_trailer bytes of field lines */
    memset(ext, 'a', big);
    memcpy(ext, "0\r\nT:", 5);
    body_skip_start(&b, -1, 1, 8192);
    CHECK_EQ_INT(body_skip(&b, ext, big, BIG), BODY_TOO_LARGE);
    free(ext);
    static const char t[] = "0\r\nT: 12345\r\n\r\n"; /* 10 bytes of trailer */
    body_skip_start(&b, -1, 1, 10);
    CHECK_EQ_INT(feed_whole(&b, t, sizeof t - 1, BIG), sizeof t - 1);
    body_skip_start(&b, -1, 1, 9);
    CHECK_EQ_INT(body_skip(&b, t, sizeof t - 1, BIG), BODY_TOO_LARGE);
    /* many chunks: their framing adds up */
    body_skip_start(&b, -1, 1, 8192);
    long r = 0;
    for (int i = 0; i < 1000 && r >= 0; i++)
        r = body_skip(&b, "1;e\r\nx\r\n", 8, 4000);
    CHECK_EQ_INT(r, BODY_TOO_LARGE);
}

TEST(decode_reports_data)
{
    /* body_decode hands out exactly the data bytes, split anywhere */
    static const char in[] = "5;e=\"1\"\r\nhello\r\n1\r\n \r\n6\r\nworld!\r\n0\r\nT: x\r\n\r\nNEXT";
    const size_t n = sizeof in - 1 - 4;
    for (size_t cut = 0; cut <= n; cut++) {
        struct body_skip b;
        body_skip_start(&b, -1, 1, 8192);
        char out[64];
        size_t olen = 0, pos = 0;
        long r = 0;
        while (body_skip_active(&b) && r >= 0) {
            size_t end = pos < cut ? cut : sizeof in - 1;
            struct body_data d;
            r = body_decode(&b, in + pos, end - pos, BIG, &d);
            if (r < 0)
                break;
            CHECK(d.len == 0 || (d.p >= in + pos && d.p + d.len == in + pos + r));
            memcpy(out + olen, d.p, d.len);
            olen += d.len;
            pos += (size_t)r;
        }
        if (!CHECK_STR(out, olen, "hello world!"))
            UNIT_NOTE("cut at %zu", cut);
        CHECK_EQ_INT(pos, n);
    }
}

TEST(chunk_head)
{
    char h[19];
    CHECK_STR(h, body_chunk_head(0, h), "0\r\n");
    CHECK_STR(h, body_chunk_head(500, h), "1f4\r\n");
    CHECK_STR(h, body_chunk_head(UINT64_MAX, h), "ffffffffffffffff\r\n");
}

TEST(chunked_incomplete)
{
    /* every proper prefix is taken whole and leaves the skip active */
    static const char in[] = "5;e=1\r\nhello\r\n3\r\nabc\r\n0\r\nT: 1\r\n\r\n";
    const size_t n = sizeof in - 1;
    for (size_t k = 0; k < n; k++) {
        struct body_skip b;
        body_skip_start(&b, -1, 1, 8192);
        char *p = malloc(k ? k : 1);
        memcpy(p, in, k);
        long r = body_skip(&b, p, k, BIG);
        free(p);
        if (!CHECK(r == (long)k && body_skip_active(&b)))
            UNIT_NOTE("prefix %zu: took %ld, active %d", k, r, body_skip_active(&b));
    }
}

TEST(pipelined_bodies)
{
    /* two chunked bodies and a Content-Length one back to back */
    static const char in[] = "3\r\nabc\r\n0\r\n\r\n"
                             "1\r\nx\r\n0\r\nT: y\r\n\r\n"
                             "hello"
                             "rest";
    struct body_skip b;
    size_t pos = 0;
    body_skip_start(&b, -1, 1, 8192);
    long r = body_skip(&b, in + pos, sizeof in - 1 - pos, BIG);
    CHECK_EQ_INT(r, 13);
    CHECK(!body_skip_active(&b));
    pos += r > 0 ? (size_t)r : 0;
    body_skip_start(&b, -1, 1, 8192);
    r = body_skip(&b, in + pos, sizeof in - 1 - pos, BIG);
    CHECK_EQ_INT(r, 17);
    pos += r > 0 ? (size_t)r : 0;
    body_skip_start(&b, 5, 0, 8192);
    r = body_skip(&b, in + pos, sizeof in - 1 - pos, BIG);
    CHECK_EQ_INT(r, 5);
    pos += r > 0 ? (size_t)r : 0;
    CHECK_STR(in + pos, sizeof in - 1 - pos, "rest");
}

TEST(chunk_size_then_junk)
{
    struct body_skip b;
    static const char junk[] = "5 garbage\r\nhello\r\n0\r\n\r\n";
    body_skip_start(&b, -1, 1, 8192);
    CHECK_EQ_INT(feed_whole(&b, junk, sizeof junk - 1, 1 << 20), -1);
    /* whitespace may end the size, not come before an extension */
    static const char ows[] = "5 \r\nhello\r\n0 \r\n\r\n";
    body_skip_start(&b, -1, 1, 8192);
    CHECK_EQ_INT(feed_whole(&b, ows, sizeof ows - 1, 1 << 20), (long)sizeof ows - 1);
    CHECK_EQ_INT(body_skip_active(&b), 0);
    static const char bws[] = "5 ;ext=1\r\nhello\r\n0 \r\n\r\n";
    body_skip_start(&b, -1, 1, 8192);
    CHECK_EQ_INT(feed_whole(&b, bws, sizeof bws - 1, 1 << 20), -1);
}

/* body_reframe: a Content-Length body passes as it is; a chunked one loses
 * every framing byte the peer wrote (extensions, leading zeros, trailers)
 * and comes out as herd's own chunks with the same data, whole, split at
 * every byte, and in random pieces; no call grows by more than
 * REFRAME_SLACK; output that does not fit goes to the overflow area; and
 * broken framing is an error before any of it is written. */
#include "unit.h"

#include "http/reframe.h"

#define BIG ((uint64_t)1 << 40)
#define NEXT "GET /next HTTP/1.1\r\n\r\n"

static char out_buf[1 << 20];

/* Reframes in[0..n) whole into out_buf; returns the bytes taken, or the error. */
static long reframe_whole(struct body_skip *b, int chunked, const char *in, size_t n,
                          size_t *out_len)
{
    struct reframe_out o = {out_buf, 0, sizeof out_buf, NULL, 0};
    long k = body_reframe(b, chunked, in, n, BIG, &o);
    *out_len = o.len;
    return k;
}

/* The data of a chunked body, decoded strictly; -1 when it is not one. */
static long dechunk(const char *in, size_t n, char *data, size_t cap)
{
    struct body_skip b;
    body_skip_start(&b, 0, 1, 0); /* herd's own output has no trailers */
    size_t i = 0, len = 0;
    while (i < n && body_skip_active(&b)) {
        struct body_data d;
        long k = body_decode(&b, in + i, n - i, BIG, &d);
        if (k <= 0 || len + d.len > cap)
            return -1;
        memcpy(data + len, d.p, d.len);
        len += d.len;
        i += (size_t)k;
    }
    return i == n && !body_skip_active(&b) ? (long)len : -1;
}

TEST(content_length_passes_as_is)
{
    static const char in[] = "hello world" NEXT;
    struct body_skip b;
    size_t len;
    body_skip_start(&b, 11, 0, 8192);
    CHECK_EQ_INT(reframe_whole(&b, 0, in, sizeof in - 1, &len), 11);
    CHECK_STR(out_buf, len, "hello world");
    CHECK(!body_skip_active(&b));
}

static const char hostile[] =
    "005;a=b;c=\"x;y\"\r\nhello\r\n"
    "5; ext=\ttok \r\n worl\r\n"   /* not "5 ;": body.c refuses BWS before ';' */
    "0000000000000001\r\nd\r\n"
    "0;last=1\r\nX-Trailer: GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n";
static const char clean[] = "5\r\nhello\r\n5\r\n worl\r\n1\r\nd\r\n0\r\n\r\n";

TEST(chunked_loses_extensions_zeros_and_trailers)
{
    static char in[sizeof hostile + sizeof NEXT];
    memcpy(in, hostile, sizeof hostile - 1);
    memcpy(in + sizeof hostile - 1, NEXT, sizeof NEXT);
    struct body_skip b;
    size_t len;
    body_skip_start(&b, 0, 1, 8192);
    CHECK_EQ_INT(reframe_whole(&b, 1, in, sizeof in - 1, &len), (long)sizeof hostile - 1);
    CHECK_STR(out_buf, len, clean);
    CHECK(!body_skip_active(&b));
}

/* Feeds in[0..n) in pieces cut at every k-th byte (k = 1: byte by byte),
 * each piece an exact-size heap copy; checks the growth per call. Returns
 * the output length, or -1. */
static long feed_pieces(const char *in, size_t n, size_t k, int *grew_too_much)
{
    struct body_skip b;
    body_skip_start(&b, 0, 1, 8192);
    struct reframe_out o = {out_buf, 0, sizeof out_buf, NULL, 0};
    for (size_t pos = 0; pos < n && body_skip_active(&b);) {
        size_t len = n - pos < k ? n - pos : k;
        char *piece = malloc(len);
        memcpy(piece, in + pos, len);
        size_t before = o.len;
        long r = body_reframe(&b, 1, piece, len, BIG, &o);
        free(piece);
        if (r < 0)
            return -1;
        if (o.len - before > (size_t)r + REFRAME_SLACK)
            *grew_too_much = 1;
        pos += (size_t)r;
    }
    return body_skip_active(&b) ? -1 : (long)o.len;
}

TEST(chunked_split_everywhere_same_data)
{
    char data[64];
    for (size_t k = 1; k < sizeof hostile; k++) {
        int grew = 0;
        long len = feed_pieces(hostile, sizeof hostile - 1, k, &grew);
        if (!CHECK(len > 0))
            continue;
        CHECK(!grew);
        CHECK_EQ_INT(dechunk(out_buf, (size_t)len, data, sizeof data), 11);
        CHECK_STR(data, 11, "hello world");
        CHECK(!memmem(out_buf, (size_t)len, ";", 1));
        CHECK(!memmem(out_buf, (size_t)len, "Trailer", 7));
    }
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Random bodies of many small chunks (the worst case for growth), with
 * leading zeros and extensions, fed in random pieces. */
TEST(random_bodies_bounded_growth)
{
    static char in[1 << 16], data[1 << 16], back[1 << 16];
    for (int round = 0; round < 300; round++) {
        size_t n = 0, dlen = 0;
        for (;;) {
            size_t len = 1 + next_rand() % (round % 3 ? 8 : 3000);
            if (n + len + 64 > sizeof in)
                break;
            n += (size_t)sprintf(in + n, "%0*zx%s\r\n", (int)(next_rand() % 4 + 1), len,
                                 next_rand() % 2 ? ";e=\"v\"" : "");
            for (size_t j = 0; j < len; j++)
                in[n++] = data[dlen++] = (char)next_rand();
            memcpy(in + n, "\r\n", 2);
            n += 2;
            if (next_rand() % 16 == 0)
                break;
        }
        n += (size_t)sprintf(in + n, "0\r\nT: v\r\n\r\n");
        struct body_skip b;
        body_skip_start(&b, 0, 1, 8192);
        struct reframe_out o = {out_buf, 0, sizeof out_buf, NULL, 0};
        int ok = 1;
        for (size_t pos = 0; pos < n && ok;) {
            size_t len = 1 + next_rand() % (round % 2 ? 7 : 5000);
            if (len > n - pos)
                len = n - pos;
            size_t before = o.len;
            long r = body_reframe(&b, 1, in + pos, len, BIG, &o);
            ok = r == (long)len && o.len - before <= len + REFRAME_SLACK;
            pos += len;
        }
        CHECK(ok);
        CHECK(!body_skip_active(&b));
        CHECK_EQ_INT(dechunk(out_buf, o.len, back, sizeof back), (long)dlen);
        CHECK(!memcmp(back, data, dlen));
    }
}

TEST(overflow_goes_to_the_over_area)
{
    /* a chunk continued in a new input: its head is not paid for */
    static const char first[] = "10\r\n01234567", second[] = "89abcdef\r\n0\r\n\r\n";
    struct body_skip b;
    body_skip_start(&b, 0, 1, 8192);
    char buf[64], over[REFRAME_SLACK];
    struct reframe_out o = {buf, 0, sizeof buf, over, 0};
    CHECK_EQ_INT(body_reframe(&b, 1, first, sizeof first - 1, BIG, &o), (long)sizeof first - 1);
    CHECK_STR(buf, o.len, "8\r\n01234567\r\n");
    /* room for exactly the input: the rest waits in over */
    o.len = 0;
    o.cap = sizeof second - 1;
    CHECK_EQ_INT(body_reframe(&b, 1, second, sizeof second - 1, BIG, &o), (long)sizeof second - 1);
    CHECK_EQ_INT(o.len, (long)sizeof second - 1);
    CHECK_EQ_INT(o.over_len, 3 + 8 + 2 + 5 - (long)(sizeof second - 1));
    memcpy(buf + o.len, over, o.over_len);
    CHECK_STR(buf, o.len + o.over_len, "8\r\n89abcdef\r\n0\r\n\r\n");
}

/* What a lenient parser (bare LF, any extension, anything in trailers)
 * reads differently: each is an error; only data before it was written. */
TEST(hostile_forms_rejected)
{
    static const char *const bad[] = {
        "5\r\nhello\n0\r\n\r\n",                   /* LF after the chunk data */
        "5\nhello\r\n0\r\n\r\n",                   /* LF after the size */
        "5;a\nb\r\nhello\r\n0\r\n\r\n",            /* LF in an extension */
        "000000000000000000000000000005\r\nhello\r\n0\r\n\r\n", /* 30 hex digits */
        "0\r\nX: a\rGET / HTTP/1.1\r\n\r\n",       /* bare CR in a trailer */
        "0\r\nGET /smuggled HTTP/1.1\r\n\r\n",     /* a trailer line without a colon */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct body_skip b;
        body_skip_start(&b, 0, 1, 8192);
        size_t len;
        CHECK_EQ_INT(reframe_whole(&b, 1, bad[i], strlen(bad[i]), &len), BODY_ERROR);
        CHECK(len == 0 || !memcmp(out_buf, "5\r\nhello\r\n", len));
    }
}

/* The load generator's response framing: where each response ends, and
 * which responses are refused. */
#include "bench/load_resp.h"
#include "unit.h"

/* Feeds s in pieces of `step` bytes the way load_conn does (an incomplete
 * head is kept and fed again with more), counting complete responses.
 * Returns the count, or -1 on an invalid response. eof: the server closes
 * after the last byte. */
static int frame(const char *s, size_t step, int head_request, int eof, struct load_resp *last)
{
    struct load_resp r;
    load_resp_start(&r, head_request);
    size_t len = strlen(s), keep = 0, pos = 0;
    int done = 0;
    char buf[65536];
    while (pos < len) {
        size_t n = len - pos < step ? len - pos : step;
        memcpy(buf + keep, s + pos, n);
        pos += n;
        size_t have = keep + n, off = 0;
        while (off < have) {
            long c = load_resp_parse(&r, buf + off, have - off);
            if (c < 0) {
                *last = r;
                return -1;
            }
            off += (size_t)c;
            if (r.state == RESP_DONE) {
                done++;
                *last = r;
                load_resp_start(&r, head_request);
                continue;
            }
            if (c == 0)
                break;
        }
        keep = have - off;
        memmove(buf, buf + off, keep);
    }
    if (eof && load_resp_eof(&r)) {
        done++;
        *last = r;
    } else if (keep || r.state != RESP_HEAD) {
        *last = r;
        return eof ? -2 : done; /* cut short */
    }
    return done;
}

static int frame_all_steps(const char *s, int head_request, int eof, struct load_resp *last)
{
    int want = frame(s, 65536, head_request, eof, last);
    for (size_t step = 1; step < 40; step++) {
        struct load_resp r;
        int got = frame(s, step, head_request, eof, &r);
        if (got != want) {
            fprintf(stderr, "    step %zu framed %d responses, whole %d\n", step, got, want);
            return -100;
        }
    }
    return want;
}

TEST(content_length)
{
    struct load_resp r;
    CHECK_EQ_INT(frame_all_steps("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nServer: x\r\n\r\nhello",
                                 0, 0, &r), 1);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(r.keepalive, 1);
    CHECK_EQ_INT(frame_all_steps("HTTP/1.1 404 Not Found\r\ncontent-length:0\r\n\r\n", 0, 0, &r), 1);
    CHECK_EQ_INT(r.status, 404);
    /* Bare LF line ends and no reason phrase. */
    CHECK_EQ_INT(frame_all_steps("HTTP/1.1 200\nContent-Length: 2\n\nok", 0, 0, &r), 1);
}

TEST(pipelined)
{
    struct load_resp r;
    CHECK_EQ_INT(frame_all_steps("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc"
                                 "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                                 "3\r\nabc\r\n0\r\n\r\n"
                                 "HTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\n\r\n"
                                 "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: close\r\n\r\nz",
                                 0, 0, &r), 4);
    CHECK_EQ_INT(r.keepalive, 0);
}

TEST(chunked)
{
    struct load_resp r;
    CHECK_EQ_INT(frame_all_steps("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                                 "5;name=value\r\nhello\r\nA\r\n0123456789\r\n"
                                 "0\r\nTrailer: yes\r\n\r\n",
                                 0, 0, &r), 1);
    CHECK_EQ_INT(frame_all_steps("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
                                 "1\nx\n0\n\n", 0, 0, &r), 1);
    /* A chunk longer than its size line says. */
    CHECK_EQ_INT(frame("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n",
                       65536, 0, 0, &r), -1);
    CHECK_EQ_INT(frame("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 65536, 0, 0, &r), -1);
    CHECK_EQ_INT(frame("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                       "1234567890abcdef0\r\n", 65536, 0, 0, &r), -1);
}

TEST(no_body_cases)
{
    struct load_resp r;
    /* HEAD: Content-Length describes the GET, no body follows. */
    CHECK_EQ_INT(frame_all_steps("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n"
                                 "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", 1, 0, &r), 2);
    CHECK_EQ_INT(frame_all_steps("HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
                                 0, 0, &r), 2);
    /* Interim responses are skipped, not counted. */
    CHECK_EQ_INT(frame_all_steps("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: x\r\n\r\n"
                                 "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n", 0, 0, &r), 1);
    CHECK_EQ_INT(r.status, 201);
}

TEST(until_close)
{
    struct load_resp r;
    CHECK_EQ_INT(frame_all_steps("HTTP/1.1 200 OK\r\n\r\nthe body ends at the close", 0, 1, &r), 1);
    CHECK_EQ_INT(r.keepalive, 0);
    CHECK_EQ_INT(frame_all_steps("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", 0, 0, &r), 1);
    CHECK_EQ_INT(r.keepalive, 0);     /* 1.0 without keep-alive */
    CHECK_EQ_INT(frame_all_steps("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nok",
                                 0, 0, &r), 1);
    CHECK_EQ_INT(r.keepalive, 1);
    CHECK_EQ_INT(frame_all_steps("HTTP/1.1 200 OK\r\nConnection: foo, close\r\nContent-Length: 0\r\n\r\n",
                                 0, 0, &r), 1);
    CHECK_EQ_INT(r.keepalive, 0);
}

TEST(cut_short)
{
    struct load_resp r;
    CHECK_EQ_INT(frame("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", 65536, 0, 1, &r), -2);
    CHECK_EQ_INT(frame("HTTP/1.1 200 OK\r\nContent-Le", 65536, 0, 1, &r), -2);
    CHECK_EQ_INT(frame("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", 65536, 0, 1, &r), -2);
}

TEST(invalid)
{
    static const char *const bad[] = {
        "HTTP/2 200 OK\r\n\r\n",
        "HTTP/1.1 20 OK\r\n\r\n",
        "HTTP/1.1 2000 OK\r\n\r\n",
        "HTTP/1.1 099 Low\r\n\r\n",
        "http/1.1 200 OK\r\n\r\n",
        "SSH-2.0-OpenSSH\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nx",
        "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length 1\r\n\r\n",
        "HTTP/1.1 101 Switching Protocols\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct load_resp r;
        if (!CHECK_EQ_INT(frame(bad[i], 65536, 0, 0, &r), -1))
            UNIT_NOTE("accepted: %s", bad[i]);
        else
            CHECK(r.error != NULL);
    }
    /* A repeated identical Content-Length is the same length. */
    struct load_resp r;
    CHECK_EQ_INT(frame("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx",
                       65536, 0, 0, &r), 1);
}

TEST(head_too_large)
{
    static char big[RESP_MAX_HEAD + 200];
    strcpy(big, "HTTP/1.1 200 OK\r\nX: ");
    size_t n = strlen(big);
    memset(big + n, 'a', sizeof big - n - 1);
    struct load_resp r;
    load_resp_start(&r, 0);
    CHECK_EQ_INT(load_resp_parse(&r, big, RESP_MAX_HEAD - 1), 0);   /* incomplete, still allowed */
    CHECK_EQ_INT(load_resp_parse(&r, big, RESP_MAX_HEAD), -1);
    CHECK(r.error != NULL);
}

/* The load generator drops body bytes in the kernel; the parser is told how
 * many went and must still find the end exactly. */
TEST(skip_unseen)
{
    struct load_resp r;
    load_resp_start(&r, 0);
    static const char head[] = "HTTP/1.1 200 OK\r\nContent-Length: 10000\r\n\r\n";
    CHECK_EQ_INT(load_resp_parse(&r, head, sizeof head - 1), (long)sizeof head - 1);
    CHECK_EQ_U64(load_resp_skippable(&r), 10000);
    load_resp_skip(&r, 9000);
    CHECK_EQ_U64(load_resp_skippable(&r), 1000);
    CHECK_EQ_INT(load_resp_parse(&r, "x", 1), 1);
    load_resp_skip(&r, 999);
    CHECK_EQ_INT(r.state, RESP_DONE);
    CHECK_EQ_U64(load_resp_skippable(&r), 0);

    static const char ch[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2000\r\n";
    load_resp_start(&r, 0);
    CHECK_EQ_INT(load_resp_parse(&r, ch, sizeof ch - 1), (long)sizeof ch - 1);
    CHECK_EQ_U64(load_resp_skippable(&r), 0x2000);
    load_resp_skip(&r, 0x2000);
    CHECK_EQ_U64(load_resp_skippable(&r), 0);      /* the CRLF after the chunk is read */
    CHECK_EQ_INT(load_resp_parse(&r, "\r\n0\r\n\r\n", 7), 7);
    CHECK_EQ_INT(r.state, RESP_DONE);

    load_resp_start(&r, 0);
    CHECK_EQ_INT(load_resp_parse(&r, "HTTP/1.0 200 OK\r\n\r\n", 19), 19);
    CHECK(load_resp_skippable(&r) == UINT64_MAX);
    CHECK_EQ_INT(load_resp_eof(&r), 1);
}

/* The HTTP/1.1 upstream codec through its ops table, as the pump uses it:
 * interim answers are dropped, a chunked reply is re-chunked from aside, a
 * Content-Length body is counted in place and its end found, close
 * delimits a body without a length, a refused head says why, and a
 * chunked request body goes up as herd's own chunks. */
#include "unit.h"

#include "http/upstream_codec.h"

static const struct upstream_codec *C = &upstream_http1;
static char head[4096];

static int parse(const char *in, int head_request, int minor, struct upstream_head *h,
                 struct upstream_framing *b)
{
    static char buf[16384]; /* the codec may rewrite its input, as the pump's buffer */
    size_t len = strlen(in);
    memcpy(buf, in, len);
    h->keepalive = 1;
    return C->response_head(buf, len, 16384, head_request, minor, h, b, head, sizeof head);
}

TEST(interim_then_length_body_in_place)
{
    const char *r100 = "HTTP/1.1 100 Continue\r\n\r\n";
    struct upstream_head h;
    struct upstream_framing b;
    int n = parse(r100, 0, 1, &h, &b);
    CHECK_EQ_INT(n, (long)strlen(r100));
    CHECK_EQ_INT(h.status, 100);
    const char *r = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloEXTRA";
    n = parse(r, 0, 1, &h, &b);
    if (!CHECK(n > 0))
        return;
    CHECK_EQ_INT(h.status, 200);
    CHECK(h.keepalive && h.reusable && b.active && !b.aside);
    CHECK(memmem(head, h.len, "Content-Length: 5\r\n", 19) != NULL);
    char buf[64];
    memcpy(buf, r + n, strlen(r) - (size_t)n);
    struct reframe_out o = {buf, 0, sizeof buf, NULL, 0};
    CHECK_EQ_INT(C->response_body(&b, buf, strlen(r) - (size_t)n, &o), 5);
    CHECK_EQ_INT(o.len, 5);
    CHECK(!b.active);
}

TEST(chunked_reply_rechunked_aside)
{
    struct upstream_head h;
    struct upstream_framing b;
    const char *r = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    CHECK_EQ_INT(parse(r, 0, 1, &h, &b), (long)strlen(r));
    CHECK(b.active && b.aside);
    const char *body = "05;ext=1\r\nhello\r\n0\r\nX-Trailer: 1\r\n\r\n";
    char buf[128];
    struct reframe_out o = {buf, 0, sizeof buf, NULL, 0};
    CHECK_EQ_INT(C->response_body(&b, body, strlen(body), &o), (long)strlen(body));
    CHECK_STR(buf, o.len, "5\r\nhello\r\n0\r\n\r\n");
    CHECK(!b.active);
}

TEST(close_delimited_and_head)
{
    struct upstream_head h;
    struct upstream_framing b;
    /* to an HTTP/1.0 client: until the close, which ends its connection */
    CHECK(parse("HTTP/1.0 200 OK\r\n\r\n", 0, 0, &h, &b) > 0);
    CHECK(b.active && C->response_ends_at_close(&b) && !h.keepalive && !h.reusable);
    /* to an HTTP/1.1 client: herd's chunks, the last one at the close, and
     * the client's connection stays open */
    CHECK(parse("HTTP/1.0 200 OK\r\n\r\n", 0, 1, &h, &b) > 0);
    CHECK(b.active && b.aside && C->response_ends_at_close(&b) && h.keepalive && !h.reusable);
    CHECK(memmem(head, h.len, "Transfer-Encoding: chunked\r\n", 28) != NULL);
    char buf[64];
    struct reframe_out o = {buf, 0, sizeof buf, NULL, 0};
    CHECK_EQ_INT(C->response_body(&b, "hello", 5, &o), 5);
    CHECK_EQ_INT(C->response_body(&b, NULL, 0, &o), 0);
    CHECK_STR(buf, o.len, "5\r\nhello\r\n0\r\n\r\n");
    CHECK(parse("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", 1, 1, &h, &b) > 0);
    CHECK(!b.active); /* a HEAD answer has no body */
}

TEST(refused_heads_say_why)
{
    struct upstream_head h;
    struct upstream_framing b;
    CHECK_EQ_INT(parse("HTTP/1.1 101 Switching\r\n\r\n", 0, 1, &h, &b), HTTP_PARSE_ERROR);
    CHECK(h.err != NULL);
    CHECK_EQ_INT(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", 0, 0, &h, &b),
                 HTTP_PARSE_ERROR);
    CHECK(h.err && strstr(h.err, "HTTP/1.0"));
    CHECK_EQ_INT(parse("HTTP/1.1 200 OK\r\nContent-Le", 0, 1, &h, &b), HTTP_PARSE_INCOMPLETE);
}

TEST(chunked_request_body_goes_up_as_herds_chunks)
{
    const char *in = "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
    struct http_request req;
    if (!CHECK(http_parse_request(in, strlen(in), strlen(in), &req) > 0))
        return;
    struct upstream_req_info info = {"127.0.0.1", "grp", 0};
    char up[1024];
    long hl = C->request_head(&req, &info, up, sizeof up);
    if (!CHECK(hl > 0))
        return;
    CHECK(memmem(up, (size_t)hl, "X-Forwarded-For: 127.0.0.1", 26) != NULL);
    struct upstream_framing b;
    C->request_body_start(&b, &req, 4096);
    CHECK(b.active);
    const char *body = "3;x\r\nabc\r\n0\r\n\r\n";
    struct reframe_out o = {up, 0, sizeof up, NULL, 0};
    CHECK_EQ_INT(C->request_body(&b, body, strlen(body), 1 << 20, &o), (long)strlen(body));
    CHECK_STR(up, o.len, "3\r\nabc\r\n0\r\n\r\n");
    CHECK(!b.active);
}

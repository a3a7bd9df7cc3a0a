/* http_parse_request: valid heads field by field, every hostile input with
 * its exact status, byte-by-byte arrival and pipelining.
 *
 * Every parse runs on a heap copy of exactly the input's length, so under
 * ASan a read one byte past the end is a crash, and on a request struct
 * filled with junk first, so a field the parser forgets to set shows. */
#include "unit.h"

#include <strings.h>

#include "http/parser.h"

#define MAXH 8192

static char *g_buf; /* the copy the last parse ran on; req points into it */
static size_t g_len;

static int parse_max(const void *s, size_t len, size_t max, struct http_request *r)
{
    free(g_buf);
    g_buf = malloc(len ? len : 1);
    memcpy(g_buf, s, len);
    g_len = len;
    memset(r, 0xa5, sizeof *r);
    return http_parse_request(g_buf, len, max, r);
}

#define PARSE(lit, r) parse_max(lit, sizeof(lit) - 1, MAXH, r)

/* s lies inside the last parsed buffer. */
static int in_buf(struct http_str s)
{
    return s.p && s.p >= g_buf && s.p + s.len <= g_buf + g_len;
}

static const struct http_str *find_header(const struct http_request *r, const char *name)
{
    for (unsigned i = 0; i < r->nheaders; i++)
        if (r->headers[i].name.len == strlen(name) &&
            strncasecmp(r->headers[i].name.p, name, strlen(name)) == 0)
            return &r->headers[i].value;
    return NULL;
}

/* ------------------------------------------------------------ valid heads */

TEST(simple_get_11)
{
    struct http_request r;
    static const char in[] = "GET /index.html HTTP/1.1\r\nHost: example.com\r\n\r\n";
    CHECK_EQ_INT(PARSE(in, &r), sizeof in - 1);
    CHECK_EQ_INT(r.error, 0);
    CHECK_EQ_INT(r.method, HTTP_GET);
    CHECK_STR(r.method_str.p, r.method_str.len, "GET");
    CHECK_EQ_INT(r.minor, 1);
    CHECK_STR(r.target.p, r.target.len, "/index.html");
    CHECK_STR(r.path.p, r.path.len, "/index.html");
    CHECK_EQ_INT(r.query.len, 0);
    CHECK_STR(r.host.p, r.host.len, "example.com");
    CHECK_EQ_INT(r.nheaders, 1);
    CHECK_STR(r.headers[0].name.p, r.headers[0].name.len, "Host");
    CHECK_STR(r.headers[0].value.p, r.headers[0].value.len, "example.com");
    CHECK_EQ_INT(r.content_length, -1);
    CHECK_EQ_INT(r.chunked, 0);
    CHECK_EQ_INT(r.conn_close, 0);
    CHECK_EQ_INT(r.conn_keepalive, 0);
    CHECK(r.if_none_match.p == NULL && r.if_none_match.len == 0);
    CHECK(r.if_modified_since.p == NULL && r.if_modified_since.len == 0);
    CHECK(r.if_match.p == NULL && r.if_match.len == 0);
    CHECK(r.if_unmodified_since.p == NULL && r.if_unmodified_since.len == 0);
    CHECK(r.range.p == NULL && r.range.len == 0);
    CHECK(r.if_range.p == NULL && r.if_range.len == 0);
    CHECK_EQ_INT(r.repeated, 0);
    CHECK(http_wants_keepalive(&r));
    /* the strings point into the buffer, not into copies */
    CHECK(r.method_str.p == g_buf);
    CHECK(r.target.p == g_buf + 4);
    CHECK(in_buf(r.host) && in_buf(r.headers[0].name));
}

TEST(head_10_without_host)
{
    struct http_request r;
    static const char in[] = "HEAD /a HTTP/1.0\r\n\r\n";
    CHECK_EQ_INT(PARSE(in, &r), sizeof in - 1);
    CHECK_EQ_INT(r.method, HTTP_HEAD);
    CHECK_STR(r.method_str.p, r.method_str.len, "HEAD");
    CHECK_EQ_INT(r.minor, 0);
    CHECK_STR(r.path.p, r.path.len, "/a");
    CHECK(r.host.p == NULL && r.host.len == 0);
    CHECK_EQ_INT(r.nheaders, 0);
    CHECK(!http_wants_keepalive(&r)); /* 1.0 closes by default */
}

TEST(methods)
{
    static const struct {
        const char *in;
        enum http_method m;
        const char *name;
    } cases[] = {
        {"GET / HTTP/1.1\r\nHost: a\r\n\r\n", HTTP_GET, "GET"},
        {"HEAD / HTTP/1.1\r\nHost: a\r\n\r\n", HTTP_HEAD, "HEAD"},
        {"POST / HTTP/1.1\r\nHost: a\r\n\r\n", HTTP_POST, "POST"},
        {"PUT / HTTP/1.1\r\nHost: a\r\n\r\n", HTTP_PUT, "PUT"},
        {"DELETE / HTTP/1.1\r\nHost: a\r\n\r\n", HTTP_DELETE, "DELETE"},
        {"PATCH / HTTP/1.1\r\nHost: a\r\n\r\n", HTTP_PATCH, "PATCH"},
        {"OPTIONS / HTTP/1.1\r\nHost: a\r\n\r\n", HTTP_OPTIONS, "OPTIONS"},
        {"TRACE / HTTP/1.1\r\nHost: a\r\n\r\n", HTTP_TRACE, "TRACE"},
        {"CONNECT / HTTP/1.1\r\nHost: a\r\n\r\n", HTTP_CONNECT, "CONNECT"},
        /* methods are case-sensitive: "get" is some other method */
        {"get / HTTP/1.1\r\nHost: a\r\n\r\n", HTTP_OTHER, "get"},
        {"GETS / HTTP/1.1\r\nHost: a\r\n\r\n", HTTP_OTHER, "GETS"},
        {"GE / HTTP/1.1\r\nHost: a\r\n\r\n", HTTP_OTHER, "GE"},
        {"PROPFIND / HTTP/1.1\r\nHost: a\r\n\r\n", HTTP_OTHER, "PROPFIND"},
        {"M-SEARCH / HTTP/1.1\r\nHost: a\r\n\r\n", HTTP_OTHER, "M-SEARCH"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct http_request r;
        size_t n = strlen(cases[i].in);
        if (!CHECK_EQ_INT(parse_max(cases[i].in, n, MAXH, &r), n))
            continue;
        if (!CHECK_EQ_INT(r.method, cases[i].m))
            UNIT_NOTE("%s", cases[i].name);
        CHECK(r.method_str.len == strlen(cases[i].name) &&
              memcmp(r.method_str.p, cases[i].name, r.method_str.len) == 0);
    }
}

TEST(options_asterisk)
{
    struct http_request r;
    static const char in[] = "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n";
    CHECK_EQ_INT(PARSE(in, &r), sizeof in - 1);
    CHECK_EQ_INT(r.method, HTTP_OPTIONS);
    CHECK_STR(r.target.p, r.target.len, "*");
    CHECK_STR(r.path.p, r.path.len, "*");
    CHECK_EQ_INT(r.query.len, 0);
}

TEST(absolute_form)
{
    struct http_request r;
    static const char a[] = "GET http://example.com/a/b?x=1&y HTTP/1.1\r\nHost: example.com\r\n\r\n";
    CHECK_EQ_INT(PARSE(a, &r), sizeof a - 1);
    CHECK_STR(r.target.p, r.target.len, "http://example.com/a/b?x=1&y");
    CHECK_STR(r.path.p, r.path.len, "/a/b");
    CHECK_STR(r.query.p, r.query.len, "x=1&y");
    CHECK_STR(r.host.p, r.host.len, "example.com");

    /* no path: the path is "/" */
    static const char b[] = "GET http://example.com:8080 HTTP/1.1\r\nHost: x\r\n\r\n";
    CHECK_EQ_INT(PARSE(b, &r), sizeof b - 1);
    CHECK_STR(r.path.p, r.path.len, "/");
    CHECK_EQ_INT(r.query.len, 0);

    /* scheme is case-insensitive; https too */
    static const char c[] = "GET HTTPS://h/p HTTP/1.1\r\nHost: h\r\n\r\n";
    CHECK_EQ_INT(PARSE(c, &r), sizeof c - 1);
    CHECK_STR(r.path.p, r.path.len, "/p");

    /* the authority replaces a Host that disagrees (RFC 9112 3.2.2) */
    static const char d[] = "GET http://other/x HTTP/1.1\r\nHost: h\r\n\r\n";
    CHECK_EQ_INT(PARSE(d, &r), sizeof d - 1);
    CHECK_STR(r.path.p, r.path.len, "/x");
    CHECK_STR(r.host.p, r.host.len, "other");

    /* 1.0 absolute-form without Host: the authority is the host */
    static const char e[] = "GET http://h/q?z HTTP/1.0\r\n\r\n";
    CHECK_EQ_INT(PARSE(e, &r), sizeof e - 1);
    CHECK_STR(r.path.p, r.path.len, "/q");
    CHECK_STR(r.query.p, r.query.len, "z");
    CHECK_STR(r.host.p, r.host.len, "h");
    CHECK_EQ_INT(r.nheaders, 0);
}

/* RFC 9112 3.2.2: with an absolute-form target the server uses its
 * authority and ignores Host; req->host and the Host entry both say it, so
 * every consumer (the proxy's head builder, a log) sees the same host. */
TEST(absolute_form_authority_replaces_host)
{
    static const struct {
        const char *in, *host;
    } cases[] = {
        {"GET http://a.example/x HTTP/1.1\r\nHost: b.example\r\n\r\n", "a.example"},
        {"GET http://a.example:8080/x HTTP/1.1\r\nHost: b.example\r\n\r\n", "a.example:8080"},
        {"GET http://a.example HTTP/1.1\r\nHost: b.example\r\n\r\n", "a.example"},
        {"GET http://a.example?q HTTP/1.1\r\nHost: b.example\r\n\r\n", "a.example"},
        {"GET HTTPS://A.Example:443/ HTTP/1.1\r\nHost: b\r\n\r\n", "A.Example:443"},
        {"GET http://[::1]:80/x HTTP/1.1\r\nHost: b\r\n\r\n", "[::1]:80"},
        {"GET http://[2001:db8::7]/ HTTP/1.1\r\nHost: b\r\n\r\n", "[2001:db8::7]"},
        {"GET http://10.0.0.1:65535/ HTTP/1.1\r\nHost: b\r\n\r\n", "10.0.0.1:65535"},
        {"GET http://a-b_c~d.e%41/ HTTP/1.1\r\nHost: b\r\n\r\n", "a-b_c~d.e%41"},
        {"GET http://a/x HTTP/1.0\r\nHost: b\r\n\r\n", "a"},
        {"GET http://a/x HTTP/1.1\r\nX: 1\r\nhost: b\r\nY: 2\r\n\r\n", "a"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct http_request r;
        const char *in = cases[i].in;
        int ok = CHECK_EQ_INT(parse_max(in, strlen(in), MAXH, &r), (int)strlen(in));
        if (!ok) {
            UNIT_NOTE("case %zu: %s", i, in);
            continue;
        }
        size_t hl = strlen(cases[i].host);
        ok &= CHECK(r.host.len == hl && memcmp(r.host.p, cases[i].host, hl) == 0);
        ok &= CHECK(in_buf(r.host));
        const struct http_str *h = find_header(&r, "host");
        ok &= CHECK(h && h->len == hl && memcmp(h->p, cases[i].host, hl) == 0);
        if (!ok)
            UNIT_NOTE("case %zu: %s: host \"%.*s\"", i, in, (int)r.host.len, r.host.p);
    }
    /* other headers are untouched */
    struct http_request r;
    static const char in[] = "GET http://a/x HTTP/1.1\r\nX: 1\r\nhost: b\r\nY: 2\r\n\r\n";
    CHECK_EQ_INT(PARSE(in, &r), sizeof in - 1);
    CHECK_EQ_INT(r.nheaders, 3);
    CHECK_STR(r.headers[0].value.p, r.headers[0].value.len, "1");
    CHECK_STR(r.headers[2].value.p, r.headers[2].value.len, "2");
    CHECK_STR(r.headers[1].name.p, r.headers[1].name.len, "host");
    /* origin-form keeps the Host header's value */
    static const char o[] = "GET /x HTTP/1.1\r\nHost: b.example\r\n\r\n";
    CHECK_EQ_INT(PARSE(o, &r), sizeof o - 1);
    CHECK_STR(r.host.p, r.host.len, "b.example");
}

TEST(query_split)
{
    struct http_request r;
    static const char a[] = "GET /search?q=a+b&x=%20 HTTP/1.1\r\nHost: a\r\n\r\n";
    CHECK_EQ_INT(PARSE(a, &r), sizeof a - 1);
    CHECK_STR(r.target.p, r.target.len, "/search?q=a+b&x=%20");
    CHECK_STR(r.path.p, r.path.len, "/search");
    CHECK_STR(r.query.p, r.query.len, "q=a+b&x=%20");

    static const char b[] = "GET /p? HTTP/1.1\r\nHost: a\r\n\r\n";
    CHECK_EQ_INT(PARSE(b, &r), sizeof b - 1);
    CHECK_STR(r.path.p, r.path.len, "/p");
    CHECK_EQ_INT(r.query.len, 0);

    /* only the first '?' splits */
    static const char c[] = "GET /p?a?b=/c HTTP/1.1\r\nHost: a\r\n\r\n";
    CHECK_EQ_INT(PARSE(c, &r), sizeof c - 1);
    CHECK_STR(r.path.p, r.path.len, "/p");
    CHECK_STR(r.query.p, r.query.len, "a?b=/c");

    /* the path stays encoded */
    static const char d[] = "GET /a%20b/%2e%2E HTTP/1.1\r\nHost: a\r\n\r\n";
    CHECK_EQ_INT(PARSE(d, &r), sizeof d - 1);
    CHECK_STR(r.path.p, r.path.len, "/a%20b/%2e%2E");
}

TEST(headers_trimmed)
{
    struct http_request r;
    static const char in[] = "GET / HTTP/1.1\r\n"
                             "Host:example.com\r\n"
                             "X-A:   v1  \t\r\n"
                             "x-b:\t\tv 2\t \r\n"
                             "X-Empty:\r\n"
                             "X-Blank:   \t \r\n"
                             "X-Inner: a  b\t c\r\n"
                             "X-Obs: caf\xc3\xa9\r\n"
                             "\r\n";
    CHECK_EQ_INT(PARSE(in, &r), sizeof in - 1);
    CHECK_EQ_INT(r.nheaders, 7);
    CHECK_STR(r.host.p, r.host.len, "example.com");
    CHECK_STR(r.headers[1].name.p, r.headers[1].name.len, "X-A");
    CHECK_STR(r.headers[1].value.p, r.headers[1].value.len, "v1");
    CHECK_STR(r.headers[2].name.p, r.headers[2].name.len, "x-b");
    CHECK_STR(r.headers[2].value.p, r.headers[2].value.len, "v 2");
    CHECK_STR(r.headers[3].name.p, r.headers[3].name.len, "X-Empty");
    CHECK_EQ_INT(r.headers[3].value.len, 0);
    CHECK_EQ_INT(r.headers[4].value.len, 0);
    CHECK_STR(r.headers[5].value.p, r.headers[5].value.len, "a  b\t c");
    CHECK_STR(r.headers[6].value.p, r.headers[6].value.len, "caf\xc3\xa9");
    for (unsigned i = 0; i < r.nheaders; i++)
        CHECK(in_buf(r.headers[i].name) && r.headers[i].value.p >= g_buf &&
              r.headers[i].value.p + r.headers[i].value.len <= g_buf + g_len);
}

TEST(leading_empty_lines_skipped)
{
    struct http_request r;
    static const char a[] = "\r\n\r\nGET /x HTTP/1.1\r\nHost: a\r\n\r\n";
    CHECK_EQ_INT(PARSE(a, &r), sizeof a - 1); /* the empty lines count as taken */
    CHECK_STR(r.method_str.p, r.method_str.len, "GET");
    CHECK(r.method_str.p == g_buf + 4);
    CHECK_STR(r.path.p, r.path.len, "/x");

    static const char b[] = "\n\n\r\nGET /x HTTP/1.1\nHost: a\n\n";
    CHECK_EQ_INT(PARSE(b, &r), sizeof b - 1);
    CHECK_STR(r.path.p, r.path.len, "/x");

    /* only empty lines so far: wait for more */
    CHECK_EQ_INT(PARSE("\r\n\r\n", &r), HTTP_PARSE_INCOMPLETE);
    CHECK_EQ_INT(PARSE("\r", &r), HTTP_PARSE_INCOMPLETE);
}

TEST(lf_only_and_mixed_line_ends)
{
    struct http_request r;
    static const char a[] = "GET /lf HTTP/1.1\nHost: a\nX-Y: z\n\n";
    CHECK_EQ_INT(PARSE(a, &r), sizeof a - 1);
    CHECK_EQ_INT(r.nheaders, 2);
    CHECK_STR(r.host.p, r.host.len, "a");
    CHECK_STR(r.headers[1].value.p, r.headers[1].value.len, "z");

    static const char b[] = "GET /m HTTP/1.1\r\nHost: a\nX-Y: z\r\n\n";
    CHECK_EQ_INT(PARSE(b, &r), sizeof b - 1);
    CHECK_EQ_INT(r.nheaders, 2);
    CHECK_STR(r.headers[1].value.p, r.headers[1].value.len, "z");

    static const char c[] = "GET /m HTTP/1.0\n\r\n";
    CHECK_EQ_INT(PARSE(c, &r), sizeof c - 1);
    CHECK_EQ_INT(r.nheaders, 0);
}

TEST(connection_flags)
{
    struct http_request r;
    CHECK(PARSE("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", &r) > 0);
    CHECK_EQ_INT(r.conn_close, 1);
    CHECK_EQ_INT(r.conn_keepalive, 0);
    CHECK(!http_wants_keepalive(&r));

    CHECK(PARSE("GET / HTTP/1.1\r\nHost: a\r\nconnection: CLOSE\r\n\r\n", &r) > 0);
    CHECK_EQ_INT(r.conn_close, 1);

    CHECK(PARSE("GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, close\r\n\r\n", &r) > 0);
    CHECK_EQ_INT(r.conn_close, 1);

    CHECK(PARSE("GET / HTTP/1.1\r\nHost: a\r\nConnection: closed\r\n\r\n", &r) > 0);
    CHECK_EQ_INT(r.conn_close, 0); /* a token, not a prefix */
    CHECK(http_wants_keepalive(&r));

    CHECK(PARSE("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", &r) > 0);
    CHECK_EQ_INT(r.conn_keepalive, 1);
    CHECK_EQ_INT(r.conn_close, 0);
    CHECK(http_wants_keepalive(&r));

    CHECK(PARSE("GET / HTTP/1.0\r\nConnection: Keep-Alive,foo\r\n\r\n", &r) > 0);
    CHECK_EQ_INT(r.conn_keepalive, 1);

    CHECK(PARSE("GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n", &r) > 0);
    CHECK(!http_wants_keepalive(&r));

    CHECK(PARSE("GET / HTTP/1.0\r\nConnection: keep-alivex\r\n\r\n", &r) > 0);
    CHECK_EQ_INT(r.conn_keepalive, 0);
    CHECK(!http_wants_keepalive(&r));

    /* two Connection headers both count */
    CHECK(PARSE("GET / HTTP/1.0\r\nConnection: keep-alive\r\nConnection: close\r\n\r\n", &r) > 0);
    CHECK_EQ_INT(r.conn_keepalive, 1);
    CHECK_EQ_INT(r.conn_close, 1);
}

TEST(content_length)
{
    struct http_request r;
    CHECK(PARSE("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 42\r\n\r\n", &r) > 0);
    CHECK_EQ_INT(r.content_length, 42);
    CHECK_EQ_INT(r.chunked, 0);

    CHECK(PARSE("POST / HTTP/1.1\r\nHost: a\r\ncontent-length: 0\r\n\r\n", &r) > 0);
    CHECK_EQ_INT(r.content_length, 0);

    CHECK(PARSE("POST / HTTP/1.1\r\nHost: a\r\nContent-Length:   7  \r\n\r\n", &r) > 0);
    CHECK_EQ_INT(r.content_length, 7);

    /* the same value twice is one value */
    CHECK(PARSE("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n",
                &r) > 0);
    CHECK_EQ_INT(r.content_length, 5);
    CHECK(PARSE("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nX: 1\r\n"
                "content-length:\t5 \r\nCONTENT-LENGTH: 5\r\n\r\n", &r) > 0);
    CHECK_EQ_INT(r.content_length, 5);

    CHECK(PARSE("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 999999999999999\r\n\r\n", &r) > 0);
    CHECK_EQ_INT(r.content_length, 999999999999999LL);

    /* 1.0 may carry a body with Content-Length */
    CHECK(PARSE("POST / HTTP/1.0\r\nContent-Length: 3\r\n\r\n", &r) > 0);
    CHECK_EQ_INT(r.content_length, 3);
}

TEST(content_length_repeated_differently)
{
    /* Found by the differential against h11 (tests/diff): the same number
     * spelt twice differently is two framings to h11, so it is an error. */
    struct http_request r;
    CHECK_EQ_INT(PARSE("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n"
                       "Content-Length: 05\r\n\r\n", &r), HTTP_PARSE_ERROR);
    CHECK_EQ_INT(r.error, 400);
    CHECK_EQ_INT(PARSE("POST / HTTP/1.1\r\nHost: a\r\ncontent-length: 0005\r\nX: y\r\n"
                       "Content-Length: 5\r\n\r\n", &r), HTTP_PARSE_ERROR);
    CHECK_EQ_INT(r.error, 400);
    CHECK_EQ_INT(PARSE("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n"
                       "Content-Length: 00\r\n\r\n", &r), HTTP_PARSE_ERROR);
}

TEST(chunked)
{
    struct http_request r;
    CHECK(PARSE("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", &r) > 0);
    CHECK_EQ_INT(r.chunked, 1);
    CHECK_EQ_INT(r.content_length, -1);

    /* coding names are case-insensitive */
    CHECK(PARSE("POST / HTTP/1.1\r\nHost: a\r\ntransfer-encoding: Chunked \r\n\r\n", &r) > 0);
    CHECK_EQ_INT(r.chunked, 1);
}

TEST(validators_captured)
{
    struct http_request r;
    static const char in[] = "GET /f HTTP/1.1\r\n"
                             "Host: a\r\n"
                             "If-None-Match: \"abc\", W/\"def\"\r\n"
                             "If-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
                             "Range: bytes=0-99\r\n"
                             "If-Range: \"abc\"\r\n"
                             "If-Match: \"m\", *\r\n"
                             "If-Unmodified-Since: Sat, 01 Jan 2000 00:00:00 GMT\r\n"
                             "\r\n";
    CHECK_EQ_INT(PARSE(in, &r), sizeof in - 1);
    CHECK_STR(r.if_none_match.p, r.if_none_match.len, "\"abc\", W/\"def\"");
    CHECK_STR(r.if_modified_since.p, r.if_modified_since.len, "Sun, 06 Nov 1994 08:49:37 GMT");
    CHECK_STR(r.range.p, r.range.len, "bytes=0-99");
    CHECK_STR(r.if_range.p, r.if_range.len, "\"abc\"");
    CHECK_STR(r.if_match.p, r.if_match.len, "\"m\", *");
    CHECK_STR(r.if_unmodified_since.p, r.if_unmodified_since.len,
              "Sat, 01 Jan 2000 00:00:00 GMT");
    CHECK_EQ_INT(r.repeated, 0);
    CHECK_EQ_INT(r.nheaders, 7);

    /* names are case-insensitive */
    static const char lc[] = "GET /f HTTP/1.1\r\n"
                             "HOST: a\r\n"
                             "if-none-match: *\r\n"
                             "IF-MODIFIED-SINCE: x\r\n"
                             "rAnGe: bytes=-5\r\n"
                             "if-range: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
                             "IF-match: *\r\n"
                             "if-UNMODIFIED-since: y\r\n"
                             "\r\n";
    CHECK_EQ_INT(PARSE(lc, &r), sizeof lc - 1);
    CHECK_STR(r.if_match.p, r.if_match.len, "*");
    CHECK_STR(r.if_unmodified_since.p, r.if_unmodified_since.len, "y");
    CHECK_STR(r.host.p, r.host.len, "a");
    CHECK_STR(r.if_none_match.p, r.if_none_match.len, "*");
    CHECK_STR(r.if_modified_since.p, r.if_modified_since.len, "x");
    CHECK_STR(r.range.p, r.range.len, "bytes=-5");
    CHECK_STR(r.if_range.p, r.if_range.len, "Sun, 06 Nov 1994 08:49:37 GMT");

    /* an empty If-None-Match is present, with length 0 */
    CHECK(PARSE("GET / HTTP/1.1\r\nHost: a\r\nIf-None-Match:\r\n\r\n", &r) > 0);
    CHECK(r.if_none_match.p != NULL);
    CHECK_EQ_INT(r.if_none_match.len, 0);

    /* similar names are not captured */
    CHECK(PARSE("GET / HTTP/1.1\r\nHost: a\r\nRanges: bytes=0-1\r\nX-Range: bytes=0-1\r\n\r\n",
                &r) > 0);
    CHECK(r.range.p == NULL);
    CHECK(find_header(&r, "ranges") != NULL);
    CHECK(PARSE("GET / HTTP/1.1\r\nHost: a\r\nIf-Matches: *\r\nIf-Unmodified: x\r\n\r\n",
                &r) > 0);
    CHECK(r.if_match.p == NULL && r.if_unmodified_since.p == NULL);
}

/* Two lines of a singleton are an invalid field, which is ignored (RFC 9110
 * 13.1.3, 13.1.4, 14.2): it reads as absent, however the lines differ. */
TEST(repeated_singletons_read_as_absent)
{
    struct http_request r;
    CHECK(PARSE("GET / HTTP/1.1\r\nHost: a\r\nRange: bytes=0-9\r\nRange: bytes=10-19\r\n\r\n",
                &r) > 0);
    CHECK(r.range.p == NULL);
    CHECK(PARSE("GET / HTTP/1.1\r\nHost: a\r\nRange: bytes=0-9\r\nrange: bytes=0-9\r\n\r\n",
                &r) > 0);
    CHECK(r.range.p == NULL);
    /* a third line does not bring it back */
    CHECK(PARSE("GET / HTTP/1.1\r\nHost: a\r\nRange: bytes=0-1\r\nRange: bytes=2-3\r\n"
                "Range: bytes=4-5\r\n\r\n",
                &r) > 0);
    CHECK(r.range.p == NULL);
    CHECK(PARSE("GET / HTTP/1.1\r\nHost: a\r\nIf-Modified-Since: Thu, 01 Jan 1970 00:00:00 GMT\r\n"
                "If-Modified-Since: Sat, 01 Jan 2000 00:00:00 GMT\r\n\r\n",
                &r) > 0);
    CHECK(r.if_modified_since.p == NULL);
    /* an If-Range on two lines never matches: its Range is ignored */
    CHECK(PARSE("GET / HTTP/1.1\r\nHost: a\r\nRange: bytes=0-1\r\nIf-Range: \"a\"\r\n"
                "If-Range: \"a\"\r\n\r\n",
                &r) > 0);
    CHECK(r.range.p == NULL);
    /* one line of each stays */
    CHECK(PARSE("GET / HTTP/1.1\r\nHost: a\r\nRange: bytes=0-1\r\nIf-Range: \"a\"\r\n"
                "If-Modified-Since: x\r\n\r\n",
                &r) > 0);
    CHECK_STR(r.range.p, r.range.len, "bytes=0-1");
    CHECK_STR(r.if_range.p, r.if_range.len, "\"a\"");
    CHECK_STR(r.if_modified_since.p, r.if_modified_since.len, "x");
}

TEST(repeated_fields_noted)
{
    struct http_request r;
    CHECK(PARSE("GET / HTTP/1.1\r\nHost: a\r\nIf-Unmodified-Since: x\r\n"
                "If-Unmodified-Since: y\r\n\r\n",
                &r) > 0);
    CHECK(r.if_unmodified_since.p == NULL);
    CHECK_EQ_INT(r.repeated, HTTP_REPEAT_IF_UNMODIFIED_SINCE);
    CHECK(PARSE("GET / HTTP/1.1\r\nHost: a\r\nRange: bytes=0-1\r\nRange: bytes=0-1\r\n"
                "If-Modified-Since: x\r\nIf-Modified-Since: x\r\n\r\n",
                &r) > 0);
    CHECK_EQ_INT(r.repeated, HTTP_REPEAT_RANGE | HTTP_REPEAT_IF_MODIFIED_SINCE);
    /* lists keep their first line; the others are read from headers[] */
    CHECK(PARSE("GET / HTTP/1.1\r\nHost: a\r\nIf-None-Match: \"a\"\r\nIf-Match: *\r\n"
                "If-None-Match: \"b\"\r\nif-match: \"c\"\r\n\r\n",
                &r) > 0);
    CHECK_STR(r.if_none_match.p, r.if_none_match.len, "\"a\"");
    CHECK_STR(r.if_match.p, r.if_match.len, "*");
    CHECK_EQ_INT(r.repeated, HTTP_REPEAT_IF_NONE_MATCH | HTTP_REPEAT_IF_MATCH);
    CHECK_EQ_INT(r.nheaders, 5);
    /* an empty first line is still a line */
    CHECK(PARSE("GET / HTTP/1.1\r\nHost: a\r\nIf-None-Match:\r\nIf-None-Match: *\r\n\r\n",
                &r) > 0);
    CHECK(r.if_none_match.p != NULL && r.if_none_match.len == 0);
    CHECK_EQ_INT(r.repeated, HTTP_REPEAT_IF_NONE_MATCH);
}

TEST(max_headers_exactly_64)
{
    char in[4096];
    size_t n = (size_t)sprintf(in, "GET / HTTP/1.1\r\nHost: a\r\n");
    for (int i = 1; i < HTTP_MAX_HEADERS; i++)
        n += (size_t)sprintf(in + n, "X-%d: v%d\r\n", i, i);
    n += (size_t)sprintf(in + n, "\r\n");
    struct http_request r;
    CHECK_EQ_INT(parse_max(in, n, MAXH, &r), n);
    CHECK_EQ_INT(r.nheaders, HTTP_MAX_HEADERS);
    CHECK_STR(r.headers[63].name.p, r.headers[63].name.len, "X-63");
    CHECK_STR(r.headers[63].value.p, r.headers[63].value.len, "v63");
}

TEST(head_exactly_max)
{
    /* a head of exactly max_head bytes is fine, one more byte is not */
    static const char in[] = "GET / HTTP/1.1\r\nHost: a\r\nX: 0123456789\r\n\r\n";
    size_t n = sizeof in - 1;
    struct http_request r;
    CHECK_EQ_INT(parse_max(in, n, n, &r), n);
    CHECK_EQ_INT(parse_max(in, n, n - 1, &r), HTTP_PARSE_ERROR);
    CHECK_EQ_INT(r.error, 431);
    /* leading empty lines do not count against the limit */
    static const char lead[] = "\r\nGET / HTTP/1.1\r\nHost: a\r\nX: 0123456789\r\n\r\n";
    CHECK_EQ_INT(parse_max(lead, sizeof lead - 1, n, &r), sizeof lead - 1);
}

/* ------------------------------------------------------------ hostile heads */

struct bad {
    const char *in;
    size_t len;
    int status;
    int line;
};

#define BAD(lit, st) {lit, sizeof(lit) - 1, st, __LINE__}
#define H "Host: a\r\n"

static const struct bad bad_cases[] = {
    /* request line */
    BAD("GET  / HTTP/1.1\r\n" H "\r\n", 400),             /* double space */
    BAD("GET /  HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET / HTTP/1.1 \r\n" H "\r\n", 400),             /* trailing space */
    BAD(" GET / HTTP/1.1\r\n" H "\r\n", 400),             /* leading space */
    BAD("GET /\r\n" H "\r\n", 400),                       /* missing version */
    BAD("GET / \r\n" H "\r\n", 400),
    BAD("GET\r\n" H "\r\n", 400),
    BAD("GET / HTTP/1.1 extra\r\n" H "\r\n", 400),
    BAD("GET / http/1.1\r\n" H "\r\n", 400),              /* lowercase version */
    BAD("GET / Http/1.1\r\n" H "\r\n", 400),
    BAD("GET / HTTP/1\r\n" H "\r\n", 400),
    BAD("GET / HTTP/1.10\r\n" H "\r\n", 400),
    BAD("GET / HTTP/11\r\n" H "\r\n", 400),
    BAD("GET / HTTP/x.y\r\n" H "\r\n", 400),
    BAD("GET / FTP/1.1\r\n" H "\r\n", 400),
    BAD("GET\t/\tHTTP/1.1\r\n" H "\r\n", 400),            /* tab separators */
    BAD("GET\t/ HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET /\tHTTP/1.1\r\n" H "\r\n", 400),
    BAD("G(T / HTTP/1.1\r\n" H "\r\n", 400),              /* not a token */
    BAD("GET /a b HTTP/1.1\r\n" H "\r\n", 400),
    /* versions */
    BAD("GET / HTTP/2.0\r\n" H "\r\n", 505),
    BAD("GET / HTTP/1.2\r\n" H "\r\n", 505),
    BAD("GET / HTTP/0.9\r\n" H "\r\n", 505),
    BAD("GET / HTTP/3.0\r\n" H "\r\n", 505),
    BAD("GET / HTTP/1.9\r\n" H "\r\n", 505),
    /* Host */
    BAD("GET / HTTP/1.1\r\n\r\n", 400),                   /* missing in 1.1 */
    BAD("GET / HTTP/1.1\r\nX: y\r\n\r\n", 400),
    BAD("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
    BAD("GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", 400),
    BAD("GET / HTTP/1.0\r\nHost: a\r\nhost: a\r\n\r\n", 400),
    BAD("GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", 400),
    BAD("GET / HTTP/1.1\r\nHost: user@a\r\n\r\n", 400),
    BAD("GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400),
    BAD("GET / HTTP/1.1\r\nHost: a?b\r\n\r\n", 400),
    /* header syntax */
    BAD("GET / HTTP/1.1\r\n" H "NoColon\r\n\r\n", 400),
    BAD("GET / HTTP/1.1\r\n" H "No Colon: x\r\n\r\n", 400),
    BAD("GET / HTTP/1.1\r\nHost : a\r\n\r\n", 400),        /* space before colon */
    BAD("GET / HTTP/1.1\r\n" H "X-A\t: b\r\n\r\n", 400),
    BAD("GET / HTTP/1.1\r\n" H ": empty-name\r\n\r\n", 400),
    BAD("GET / HTTP/1.1\r\n" H "X(y): b\r\n\r\n", 400),
    BAD("GET / HTTP/1.1\r\n" H "X-A: b\r\n c\r\n\r\n", 400),     /* obs-fold */
    BAD("GET / HTTP/1.1\r\n" H "X-A: b\r\n\tc\r\n\r\n", 400),
    BAD("GET / HTTP/1.1\r\n Host: a\r\n\r\n", 400),        /* fold on the first */
    BAD("GET / HTTP/1.1\r\n" H "X-A: b\rc\r\n\r\n", 400),        /* bare CR */
    BAD("GET / HTTP/1.1\r\n" H "X-A: b\r\r\n\r\n", 400),
    BAD("GET / HTTP/1.1\r\n" H "X-A\r: b\r\n\r\n", 400),
    BAD("GET / HTTP/1.1\r\n" H "\rX-A: b\r\n\r\n", 400),
    BAD("GET / HTTP/1.1\r\n" H "\r\r\n\r\n", 400),
    BAD("GET /a\rb HTTP/1.1\r\n" H "\r\n", 400),           /* bare CR, request line */
    BAD("GET / HTTP/1.1\r" H "\r\n", 400),
    BAD("GET / HTTP/1.1\r\r\n" H "\r\n", 400),
    BAD("\rGET / HTTP/1.1\r\n" H "\r\n", 400),
    BAD("\r\n\rGET / HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET / HTTP/1.1\r\n" H "X-A: b\x01\r\n\r\n", 400),       /* control chars */
    BAD("GET / HTTP/1.1\r\n" H "X-A: \x1b[0m\r\n\r\n", 400),
    BAD("GET / HTTP/1.1\r\n" H "X-A: b\x7f\r\n\r\n", 400),
    BAD("GET / HTTP/1.1\r\n" H "X-A: b\x0b\r\n\r\n", 400),
    BAD("GET / HTTP/1.1\r\n" H "X\x01: b\r\n\r\n", 400),
    BAD("GET /a\x01 HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET /a\x7f HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET /\xc3\xa9 HTTP/1.1\r\n" H "\r\n", 400),       /* raw UTF-8 in target */
    BAD("GET / HTTP/1.1\r\n" H "X-A: b\0c\r\n\r\n", 400),        /* NUL */
    BAD("GET / HTTP/1.1\r\n" H "X-A: \0\r\n\r\n", 400),
    BAD("GET / HTTP/1.1\r\n" H "X\0: b\r\n\r\n", 400),
    BAD("GET /\0 HTTP/1.1\r\n" H "\r\n", 400),
    BAD("G\0T / HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET / HTTP/1.1\0\r\n" H "\r\n", 400),
    BAD("\0GET / HTTP/1.1\r\n" H "\r\n", 400),
    /* Content-Length */
    BAD("POST / HTTP/1.1\r\n" H "Content-Length: 1\r\nContent-Length: 2\r\n\r\n", 400),
    BAD("POST / HTTP/1.1\r\n" H "Content-Length: 10\r\nContent-Length: 1\r\n\r\n", 400),
    BAD("POST / HTTP/1.1\r\n" H "Content-Length: 1, 1\r\n\r\n", 400),
    BAD("POST / HTTP/1.1\r\n" H "Content-Length: -1\r\n\r\n", 400),
    BAD("POST / HTTP/1.1\r\n" H "Content-Length: +1\r\n\r\n", 400),
    BAD("POST / HTTP/1.1\r\n" H "Content-Length: abc\r\n\r\n", 400),
    BAD("POST / HTTP/1.1\r\n" H "Content-Length: 12a\r\n\r\n", 400),
    BAD("POST / HTTP/1.1\r\n" H "Content-Length: 0x10\r\n\r\n", 400),
    BAD("POST / HTTP/1.1\r\n" H "Content-Length: 1 2\r\n\r\n", 400),
    BAD("POST / HTTP/1.1\r\n" H "Content-Length: 1.0\r\n\r\n", 400),
    BAD("POST / HTTP/1.1\r\n" H "Content-Length:\r\n\r\n", 400),
    BAD("POST / HTTP/1.1\r\n" H "Content-Length:   \r\n\r\n", 400),
    BAD("POST / HTTP/1.1\r\n" H "Content-Length: 99999999999999999999\r\n\r\n", 400),
    BAD("POST / HTTP/1.1\r\n" H "Content-Length: 18446744073709551617\r\n\r\n", 400),
    BAD("POST / HTTP/1.1\r\n" H "Content-Length: 9223372036854775808\r\n\r\n", 400),
    /* Transfer-Encoding */
    BAD("POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", 400),
    BAD("POST / HTTP/1.1\r\n" H "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
    BAD("POST / HTTP/1.1\r\n" H "Content-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
    BAD("POST / HTTP/1.1\r\n" H "Transfer-Encoding: gzip\r\n\r\n", 400),
    BAD("POST / HTTP/1.1\r\n" H "Transfer-Encoding: gzip, chunked\r\n\r\n", 400),
    BAD("POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked, gzip\r\n\r\n", 400),
    BAD("POST / HTTP/1.1\r\n" H "Transfer-Encoding: identity\r\n\r\n", 400),
    BAD("POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked, chunked\r\n\r\n", 400),
    BAD("POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunkedx\r\n\r\n", 400),
    BAD("POST / HTTP/1.1\r\n" H "Transfer-Encoding:\r\n\r\n", 400),
    BAD("POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
        400),
    BAD("POST / HTTP/1.1\r\n" H "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n",
        400),
    BAD("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
    BAD("POST / HTTP/1.0\r\n" H "Transfer-Encoding: chunked\r\n\r\n", 400),
    /* target */
    BAD("GET /a#b HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET /a?b#c HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET # HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET http://h/a#b HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET http://h#f/a HTTP/1.1\r\n" H "\r\n", 400),    /* '#' in the authority */
    BAD("GET http://h#f HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET a HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET a/b HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET ?x HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET * HTTP/1.1\r\n" H "\r\n", 400),               /* '*' is for OPTIONS */
    BAD("OPTIONS *x HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET ftp://h/a HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET http:/h/a HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET http:///a HTTP/1.1\r\n" H "\r\n", 400),       /* empty authority */
    /* absolute-form authority: host[:port], no userinfo (RFC 9110 4.2.4) */
    BAD("GET http://user@a.example/ HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET http://user:pw@a.example/ HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET http://@a.example/ HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET http://a.example@evil.example/ HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET http://a.example@ HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET http://a@b?q HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET http://:80/ HTTP/1.1\r\n" H "\r\n", 400),      /* no host */
    BAD("GET http://a:/ HTTP/1.1\r\n" H "\r\n", 400),       /* empty port */
    BAD("GET http://a:x/ HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET http://a:65536/ HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET http://a:123456/ HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET http://a:80:80/ HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET http://a:-1/ HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET http://[::1/ HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET http://[]/ HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET http://[::1]x/ HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET http://[::g]/ HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET http://a%2/ HTTP/1.1\r\n" H "\r\n", 400),      /* bad escape */
    BAD("GET http://a%zz/ HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET http://a{b/ HTTP/1.1\r\n" H "\r\n", 400),      /* not host characters */
    BAD("GET http://a|b/ HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET http://a^b/ HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET http://a[b]/ HTTP/1.1\r\n" H "\r\n", 400),
    /* ... and a 1.1 request still needs one valid Host */
    BAD("GET http://a/ HTTP/1.1\r\n\r\n", 400),
    BAD("GET http://a/ HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", 400),
    BAD("GET http://a/ HTTP/1.1\r\nHost: a/b\r\n\r\n", 400),
    BAD("GET http://a/ HTTP/1.1\r\nHost: user@a\r\n\r\n", 400),
    /* leading garbage */
    BAD("\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n"
        "\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n"
        "GET / HTTP/1.1\r\n" H "\r\n", 400),             /* 66 bytes of empty lines */
};

TEST(hostile_exact_status)
{
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        const struct bad *b = &bad_cases[i];
        struct http_request r;
        int rc = parse_max(b->in, b->len, MAXH, &r);
        int ok = CHECK_EQ_INT(rc, HTTP_PARSE_ERROR);
        ok &= CHECK_EQ_INT(r.error, b->status);
        if (!ok) {
            UNIT_NOTE("case at %s:%d, input:", __FILE__, b->line);
            fputs("    ", stderr);
            unit_print_bytes_(b->in, b->len);
            fputc('\n', stderr);
        }
    }
}

/* The same inputs with the one bad thing removed parse, so each case above
 * fails for the reason it names and not for some other. */
TEST(hostile_controls_parse)
{
    static const char *const good[] = {
        "GET / HTTP/1.1\r\n" H "\r\n",
        "GET / HTTP/1.0\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a:8080\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n",
        "GET / HTTP/1.1\r\nHost:\r\n\r\n",
        "GET / HTTP/1.1\r\n" H "X-A: b c\r\n\r\n",
        "GET / HTTP/1.1\r\n" H "X-A:b\r\n\r\n",
        "GET / HTTP/1.1\r\n" H "X!#$%&'*+-.^_`|~09az: b\r\n\r\n",
        "GET / HTTP/1.1\r\n" H "X-A: \x80\xff\r\n\r\n",
        "POST / HTTP/1.1\r\n" H "Content-Length: 1\r\nContent-Length: 1\r\n\r\n",
        "POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked\r\n\r\n",
        "POST / HTTP/1.0\r\nContent-Length: 5\r\n\r\n",
        "GET /a?b HTTP/1.1\r\n" H "\r\n",
        "GET http://h/a HTTP/1.1\r\n" H "\r\n",
        "OPTIONS * HTTP/1.1\r\n" H "\r\n",
        "GET /!$&'()*+,;=:@-._~%41 HTTP/1.1\r\n" H "\r\n",
        "\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n"
        "GET / HTTP/1.1\r\n" H "\r\n",
        "GET //h/a HTTP/1.1\r\n" H "\r\n",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        struct http_request r;
        size_t n = strlen(good[i]);
        int rc = parse_max(good[i], n, MAXH, &r);
        if (!CHECK_EQ_INT(rc, n)) {
            UNIT_NOTE("status %d for:", r.error);
            fputs("    ", stderr);
            unit_print_bytes_(good[i], n);
            fputc('\n', stderr);
        }
    }
}

TEST(too_many_headers_431)
{
    char in[4096];
    size_t n = (size_t)sprintf(in, "GET / HTTP/1.1\r\nHost: a\r\n");
    for (int i = 1; i <= HTTP_MAX_HEADERS; i++)
        n += (size_t)sprintf(in + n, "X-%d: v\r\n", i);
    n += (size_t)sprintf(in + n, "\r\n");
    struct http_request r;
    CHECK_EQ_INT(parse_max(in, n, MAXH, &r), HTTP_PARSE_ERROR);
    CHECK_EQ_INT(r.error, 431);
}

TEST(head_over_max_431)
{
    /* complete but too long, in the headers */
    char in[10000];
    size_t n = (size_t)sprintf(in, "GET / HTTP/1.1\r\nHost: a\r\nX-Big: ");
    memset(in + n, 'x', 9000);
    n += 9000;
    n += (size_t)sprintf(in + n, "\r\n\r\n");
    struct http_request r;
    CHECK_EQ_INT(parse_max(in, n, MAXH, &r), HTTP_PARSE_ERROR);
    CHECK_EQ_INT(r.error, 431);
    /* incomplete, and already at max_head: no point waiting */
    CHECK_EQ_INT(parse_max(in, MAXH, MAXH, &r), HTTP_PARSE_ERROR);
    CHECK_EQ_INT(r.error, 431);
    /* incomplete, below max_head: wait */
    CHECK_EQ_INT(parse_max(in, MAXH - 1, MAXH, &r), HTTP_PARSE_INCOMPLETE);
    /* with a small limit */
    static const char s[] = "GET / HTTP/1.1\r\nHost: a\r\nX: 0123456789012345678901234567890\r\n\r\n";
    CHECK_EQ_INT(parse_max(s, sizeof s - 1, 48, &r), HTTP_PARSE_ERROR);
    CHECK_EQ_INT(r.error, 431);
    CHECK_EQ_INT(parse_max(s, 48, 48, &r), HTTP_PARSE_ERROR);
    CHECK_EQ_INT(r.error, 431);
}

TEST(request_line_over_max_414)
{
    char in[10000];
    size_t n = (size_t)sprintf(in, "GET /");
    memset(in + n, 'a', 9000);
    n += 9000;
    size_t line_only = n;
    n += (size_t)sprintf(in + n, " HTTP/1.1\r\nHost: a\r\n\r\n");
    struct http_request r;
    /* complete, too long */
    CHECK_EQ_INT(parse_max(in, n, MAXH, &r), HTTP_PARSE_ERROR);
    CHECK_EQ_INT(r.error, 414);
    /* no line end yet, at the limit */
    CHECK_EQ_INT(parse_max(in, line_only, MAXH, &r), HTTP_PARSE_ERROR);
    CHECK_EQ_INT(r.error, 414);
    CHECK_EQ_INT(parse_max(in, MAXH, MAXH, &r), HTTP_PARSE_ERROR);
    CHECK_EQ_INT(r.error, 414);
    CHECK_EQ_INT(parse_max(in, MAXH - 1, MAXH, &r), HTTP_PARSE_INCOMPLETE);
    /* small limit: the request line alone is past it */
    static const char s[] = "GET /0123456789012345678901234567890123456789 HTTP/1.1\r\nHost: a\r\n\r\n";
    CHECK_EQ_INT(parse_max(s, sizeof s - 1, 32, &r), HTTP_PARSE_ERROR);
    CHECK_EQ_INT(r.error, 414);
    CHECK_EQ_INT(parse_max(s, 40, 32, &r), HTTP_PARSE_ERROR);
    CHECK_EQ_INT(r.error, 414);
}

/* ------------------------------------------------ byte-by-byte, pipelining */

/* A canonical text of everything the parser reports, with strings given as
 * offsets into base, so two parses of the same bytes can be compared. */
static void put_str(char **o, char *end, const char *tag, struct http_str s, const char *base)
{
    int n;
    if (!s.p)
        n = snprintf(*o, (size_t)(end - *o), " %s=NULL/%u", tag, s.len);
    else
        n = snprintf(*o, (size_t)(end - *o), " %s@%td=%.*s", tag, s.p - base, (int)s.len, s.p);
    if (n > 0 && n < end - *o)
        *o += n;
}

static void summarize(const struct http_request *r, const char *base, char *out, size_t cap)
{
    char *o = out, *end = out + cap;
    o += snprintf(o, (size_t)(end - o), "m=%d v=%d ch=%d cl=%d ka=%d len=%lld nh=%d rep=%d",
                  r->method, r->minor, r->chunked, r->conn_close, r->conn_keepalive,
                  (long long)r->content_length, r->nheaders, r->repeated);
    put_str(&o, end, "method", r->method_str, base);
    put_str(&o, end, "target", r->target, base);
    /* path may be a static "/" for an absolute-form target without a path */
    put_str(&o, end, "path", r->path, r->path.len == 1 && *r->path.p == '/' ? r->path.p : base);
    put_str(&o, end, "query", r->query, base);
    put_str(&o, end, "host", r->host, base);
    put_str(&o, end, "inm", r->if_none_match, base);
    put_str(&o, end, "ims", r->if_modified_since, base);
    put_str(&o, end, "im", r->if_match, base);
    put_str(&o, end, "ius", r->if_unmodified_since, base);
    put_str(&o, end, "range", r->range, base);
    put_str(&o, end, "ifr", r->if_range, base);
    for (unsigned i = 0; i < r->nheaders && i < HTTP_MAX_HEADERS; i++) {
        put_str(&o, end, "n", r->headers[i].name, base);
        put_str(&o, end, "v", r->headers[i].value, base);
    }
}

static const char *const valid_requests[] = {
    "GET / HTTP/1.1\r\nHost: a\r\n\r\n",
    "GET /index.html HTTP/1.1\r\nHost: example.com\r\nUser-Agent: t/1.0\r\nAccept: */*\r\n\r\n",
    "HEAD /a/b?c=d HTTP/1.0\r\n\r\n",
    "GET /x HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    "GET http://example.com/p?q HTTP/1.1\r\nHost: example.com\r\n\r\n",
    "GET http://example.com HTTP/1.1\r\nHost: example.com\r\n\r\n",
    "\r\n\r\nGET /lead HTTP/1.1\r\nHost: a\r\n\r\n",
    "\n\nGET /lead HTTP/1.1\nHost: a\n\n",
    "GET /lf HTTP/1.1\nHost: a\nX: y\n\n",
    "GET /mixed HTTP/1.1\r\nHost: a\nX: y\r\n\n",
    "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    "POST /up HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n",
    "POST /up HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n",
    "POST /up HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
    "GET /f HTTP/1.1\r\nHost: a\r\nIf-None-Match: \"x\", W/\"y\"\r\n"
    "If-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\nRange: bytes=1-2\r\n"
    "If-Range: \"x\"\r\n\r\n",
    "GET /f HTTP/1.1\r\nHost: a\r\nIf-Match: \"x\"\r\nIf-Unmodified-Since: y\r\n"
    "Range: bytes=1-2\r\nIf-Match: *\r\nRange: bytes=3-4\r\n\r\n",
    "GET / HTTP/1.1\r\nHost:a\r\nX-Trim:  \t v \t \r\nX-Empty:\r\n\r\n",
    "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: a\r\n\n",
    "GET / HTTP/1.0\n\r\n",
};

TEST(every_prefix_incomplete)
{
    char want[16384], got[16384];
    for (size_t i = 0; i < sizeof valid_requests / sizeof valid_requests[0]; i++) {
        const char *in = valid_requests[i];
        size_t n = strlen(in);
        struct http_request ref, r;
        if (!CHECK_EQ_INT(parse_max(in, n, MAXH, &ref), n)) {
            UNIT_NOTE("request %zu, status %d", i, ref.error);
            continue;
        }
        summarize(&ref, g_buf, want, sizeof want);

        /* the bytes arrive one at a time into a growing buffer; the struct
         * is reused, as a connection does */
        char *buf = malloc(n);
        memset(&r, 0x5a, sizeof r);
        int bad_prefix = 0;
        for (size_t k = 0; k < n; k++) {
            buf[k] = in[k];
            char *exact = malloc(k ? k : 1); /* ASan: exact size */
            memcpy(exact, buf, k);
            int rc = http_parse_request(exact, k, MAXH, &r);
            free(exact);
            if (rc != HTTP_PARSE_INCOMPLETE && !bad_prefix++) {
                CHECK_EQ_INT(rc, HTTP_PARSE_INCOMPLETE);
                UNIT_NOTE("request %zu, prefix of %zu bytes, status %d", i, k, r.error);
            }
        }
        CHECK(!bad_prefix);
        CHECK_EQ_INT(http_parse_request(buf, n, MAXH, &r), n);
        summarize(&r, buf, got, sizeof got);
        if (!CHECK(strcmp(want, got) == 0))
            UNIT_NOTE("request %zu\n want %s\n  got %s", i, want, got);

        /* bytes after the head (the next request) change nothing */
        static const char next[] = "GET /next HTTP/1.1\r\nHo";
        char *more = malloc(n + sizeof next - 1);
        memcpy(more, in, n);
        memcpy(more + n, next, sizeof next - 1);
        CHECK_EQ_INT(http_parse_request(more, n + sizeof next - 1, MAXH, &r), n);
        summarize(&r, more, got, sizeof got);
        if (!CHECK(strcmp(want, got) == 0))
            UNIT_NOTE("request %zu with a follower\n want %s\n  got %s", i, want, got);

        /* with max_head equal to the head, the prefixes still wait */
        for (size_t k = 0; k < n; k++)
            if (http_parse_request(in, k, n, &r) != HTTP_PARSE_INCOMPLETE) {
                CHECK(!"prefix under max_head == head length is not incomplete");
                UNIT_NOTE("request %zu, prefix %zu", i, k);
                break;
            }
        CHECK_EQ_INT(http_parse_request(in, n, n, &r), n);
        free(more);
        free(buf);
    }
}

TEST(pipelined)
{
    static const char r1[] = "GET /one HTTP/1.1\r\nHost: a\r\n\r\n";
    static const char r2[] = "POST /two?x HTTP/1.1\nHost: a\nContent-Length: 0\n\n";
    static const char r3[] = "\r\nHEAD /three HTTP/1.0\r\nConnection: keep-alive\r\n\r\n";
    static const char r4[] = "GET /four HTTP/1.1\r\nHost: a\r\n";      /* incomplete */
    char all[512];
    size_t n = 0;
    memcpy(all + n, r1, sizeof r1 - 1), n += sizeof r1 - 1;
    memcpy(all + n, r2, sizeof r2 - 1), n += sizeof r2 - 1;
    memcpy(all + n, r3, sizeof r3 - 1), n += sizeof r3 - 1;
    memcpy(all + n, r4, sizeof r4 - 1), n += sizeof r4 - 1;
    char *buf = malloc(n);
    memcpy(buf, all, n);

    struct http_request r;
    size_t pos = 0;
    int rc = http_parse_request(buf + pos, n - pos, MAXH, &r);
    CHECK_EQ_INT(rc, sizeof r1 - 1);
    CHECK_STR(r.path.p, r.path.len, "/one");
    CHECK_EQ_INT(r.method, HTTP_GET);
    pos += rc > 0 ? (size_t)rc : 0;

    rc = http_parse_request(buf + pos, n - pos, MAXH, &r);
    CHECK_EQ_INT(rc, sizeof r2 - 1);
    CHECK_STR(r.path.p, r.path.len, "/two");
    CHECK_STR(r.query.p, r.query.len, "x");
    CHECK_EQ_INT(r.method, HTTP_POST);
    CHECK_EQ_INT(r.content_length, 0);
    pos += rc > 0 ? (size_t)rc : 0;

    rc = http_parse_request(buf + pos, n - pos, MAXH, &r);
    CHECK_EQ_INT(rc, sizeof r3 - 1); /* the empty line before it is taken too */
    CHECK_STR(r.path.p, r.path.len, "/three");
    CHECK_EQ_INT(r.method, HTTP_HEAD);
    CHECK_EQ_INT(r.minor, 0);
    CHECK_EQ_INT(r.content_length, -1); /* not left over from the POST */
    CHECK(r.host.p == NULL);
    CHECK(http_wants_keepalive(&r));
    pos += rc > 0 ? (size_t)rc : 0;

    rc = http_parse_request(buf + pos, n - pos, MAXH, &r);
    CHECK_EQ_INT(rc, HTTP_PARSE_INCOMPLETE);
    CHECK_EQ_INT(pos + sizeof r4 - 1, n);
    free(buf);
}

TEST(pipelined_state_not_leaking)
{
    /* a request with every capture, then one with none: nothing carries */
    static const char in[] =
        "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n"
        "If-None-Match: *\r\nIf-Modified-Since: x\r\nRange: bytes=0-1\r\nIf-Range: y\r\n"
        "If-Match: *\r\nIf-Unmodified-Since: z\r\nIf-Match: \"q\"\r\n\r\n"
        "GET /2 HTTP/1.1\r\nHost: b\r\n\r\n";
    struct http_request r;
    int rc = PARSE(in, &r);
    CHECK(rc > 0);
    CHECK_EQ_INT(r.chunked, 1);
    if (rc <= 0)
        return;
    CHECK_EQ_INT(http_parse_request(g_buf + rc, g_len - (size_t)rc, MAXH, &r),
                 g_len - (size_t)rc);
    CHECK_EQ_INT(r.chunked, 0);
    CHECK_EQ_INT(r.conn_close, 0);
    CHECK_EQ_INT(r.nheaders, 1);
    CHECK(r.if_none_match.p == NULL && r.if_modified_since.p == NULL);
    CHECK(r.range.p == NULL && r.if_range.p == NULL);
    CHECK(r.if_match.p == NULL && r.if_unmodified_since.p == NULL);
    CHECK_EQ_INT(r.repeated, 0);
    CHECK_STR(r.host.p, r.host.len, "b");
}

TEST(target_forbidden_chars)
{
    struct http_request r;
    static const char *const bad[] = {
        "GET /a<b HTTP/1.1\r\nHost: a\r\n\r\n",  "GET /a>b HTTP/1.1\r\nHost: a\r\n\r\n",
        "GET /a\"b HTTP/1.1\r\nHost: a\r\n\r\n", "GET /a\\b HTTP/1.1\r\nHost: a\r\n\r\n",
        "GET /a`b HTTP/1.1\r\nHost: a\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_EQ_INT(parse_max(bad[i], strlen(bad[i]), MAXH, &r), HTTP_PARSE_ERROR);
        CHECK_EQ_INT(r.error, 400);
    }
    /* tolerated: real clients send them unencoded */
    static const char ok[] = "GET /a{b}|c^d HTTP/1.1\r\nHost: a\r\n\r\n";
    CHECK_EQ_INT(PARSE(ok, &r), (int)sizeof ok - 1);
}

TEST(absolute_form_query_without_path)
{
    struct http_request r;
    static const char req[] = "GET http://h?q=1 HTTP/1.1\r\nHost: h\r\n\r\n";
    if (!CHECK_EQ_INT(PARSE(req, &r), (int)sizeof req - 1))
        return;
    CHECK_STR(r.path.p, r.path.len, "/");
    CHECK_STR(r.query.p, r.query.len, "q=1");
    static const char empty[] = "GET http://?q HTTP/1.1\r\nHost: h\r\n\r\n";
    CHECK_EQ_INT(PARSE(empty, &r), HTTP_PARSE_ERROR);
}

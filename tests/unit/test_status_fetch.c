/* herd status's client: what it reads from a URL and from an answer's head.
 * src/cmd is not linked into the tests, so the file is included. */
#include "unit.h"

#include "../../src/cmd/status_fetch.c"

static int64_t length_of(const char *head)
{
    return head_content_length(head, strlen(head));
}

TEST(content_length_is_read)
{
    CHECK_EQ_INT(length_of("HTTP/1.1 200 OK\r\nContent-Length: 42\r\n\r\n"), 42);
    CHECK_EQ_INT(length_of("HTTP/1.1 200 OK\r\ncontent-LENGTH:7\r\n\r\n"), 7);
    CHECK_EQ_INT(length_of("HTTP/1.1 200 OK\r\nContent-Length: \t0 \r\n\r\n"), 0);
    CHECK_EQ_INT(length_of("HTTP/1.1 200 OK\r\nA: b\r\nContent-Length: 5\r\nC: d\r\n\r\n"), 5);
    /* repeats that agree are one length (RFC 9110 8.6) */
    CHECK_EQ_INT(length_of("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n"),
                 5);
    /* past 64 bits it saturates, so the cap refuses it rather than a wrap */
    CHECK(length_of("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n") >=
          (int64_t)STATUS_ANSWER_MAX);
}

TEST(doubtful_lengths_are_none)
{
    CHECK_EQ_INT(length_of("HTTP/1.1 200 OK\r\n\r\n"), -1);
    CHECK_EQ_INT(length_of("HTTP/1.1 200 OK\r\nX: y\r\n\r\n"), -1);
    CHECK_EQ_INT(length_of("HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n"), -1);
    CHECK_EQ_INT(length_of("HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\n"), -1);
    CHECK_EQ_INT(length_of("HTTP/1.1 200 OK\r\nContent-Length: 5x\r\n\r\n"), -1);
    CHECK_EQ_INT(length_of("HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\n"), -1);
    CHECK_EQ_INT(length_of("HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n"), -1);
    CHECK_EQ_INT(length_of("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n"),
                 -1);
    CHECK_EQ_INT(length_of("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
                           "Content-Length: 5\r\n\r\n"), -1);
    /* a name that only starts like it is another header */
    CHECK_EQ_INT(length_of("HTTP/1.1 200 OK\r\nContent-Lengthy: 5\r\n\r\n"), -1);
}

TEST(targets)
{
    struct status_target t;
    char why[160];
    CHECK_EQ_INT(status_target_parse("http://127.0.0.1:8080/st?x=1", &t, why, sizeof why), 0);
    CHECK(!t.unix_socket && !strcmp(t.host, "127.0.0.1") && !strcmp(t.port, "8080") &&
          !strcmp(t.path, "/st?x=1"));
    CHECK_EQ_INT(status_target_parse("[::1]", &t, why, sizeof why), 0);
    CHECK(!strcmp(t.host, "::1") && !strcmp(t.port, "80") && !strcmp(t.path, "/herd-status"));
    CHECK_EQ_INT(status_target_parse("unix:/run/h.sock:/s", &t, why, sizeof why), 0);
    CHECK(t.unix_socket && !strcmp(t.host, "/run/h.sock") && !strcmp(t.path, "/s"));
    CHECK_EQ_INT(status_target_parse("unix:", &t, why, sizeof why), -1);
    CHECK_EQ_INT(status_target_parse("http://[::1/x", &t, why, sizeof why), -1);
    /* what would not be sent as written */
    CHECK_EQ_INT(status_target_parse("127.0.0.1:65535", &t, why, sizeof why), 0);
    CHECK_EQ_INT(status_target_parse("127.0.0.1:65536", &t, why, sizeof why), -1);
    CHECK_EQ_INT(status_target_parse("127.0.0.1:0", &t, why, sizeof why), -1);
    CHECK_EQ_INT(status_target_parse("127.0.0.1:1234567", &t, why, sizeof why), -1);
    CHECK_EQ_INT(status_target_parse("https://127.0.0.1/", &t, why, sizeof why), -1);
    CHECK(strstr(why, "plain HTTP") != NULL);
    CHECK_EQ_INT(status_target_parse("127.0.0.1/a://b", &t, why, sizeof why), 0);
    CHECK_EQ_INT(status_target_parse("127.0.0.1/a b", &t, why, sizeof why), -1);
    CHECK_EQ_INT(status_target_parse("127.0.0.1/a\x7f", &t, why, sizeof why), -1);
    CHECK_EQ_INT(status_target_parse("[::1]:8080", &t, why, sizeof why), 0);
    CHECK(!strcmp(t.host, "::1") && !strcmp(t.port, "8080"));
}

/* bench/load_script.c: the --requests file format (blocks, bodies, line
 * ends, comments) and its refusals with FILE:LINE. */
#include "unit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/load_script.h"
#include "core/readfile.h"

static char path[64];
static char err[256];

/* Writes text to a temporary file and parses it into s; returns the rc. */
static int parse(const char *text, struct load_script *s)
{
    snprintf(path, sizeof path, "/tmp/herd-unit-script-%d", (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f)
        return -2;
    fputs(text, f);
    fclose(f);
    err[0] = '\0';
    int rc = load_script_read(path, s, err, sizeof err);
    unlink(path);
    return rc;
}

TEST(blocks_headers_and_bodies)
{
    struct load_script s;
    const char *text = "# c\n\nGET /a?x=1\nX-A: 1\n---\nPOST /b\r\nCT: t\r\n\r\nl1\r\nl2\r\n"
                       "---\n---\nPUT /c\n\n---\nDELETE /d\nX-D: d";
    if (!CHECK_EQ_INT(parse(text, &s), 0))
        return;
    CHECK_EQ_INT(s.n, 4);
    CHECK_STR(s.reqs[0].method, s.reqs[0].method_len, "GET");
    CHECK_STR(s.reqs[0].target, s.reqs[0].target_len, "/a?x=1");
    CHECK_STR(s.reqs[0].headers, s.reqs[0].headers_len, "X-A: 1\n");
    CHECK_EQ_INT(s.reqs[0].body_len, 0);
    CHECK_STR(s.reqs[1].headers, s.reqs[1].headers_len, "CT: t\r\n");
    CHECK_STR(s.reqs[1].body, s.reqs[1].body_len, "l1\r\nl2"); /* not the break before --- */
    CHECK_STR(s.reqs[2].method, s.reqs[2].method_len, "PUT");
    CHECK_EQ_INT(s.reqs[2].headers_len, 0);
    CHECK_EQ_INT(s.reqs[2].body_len, 0);
    CHECK_STR(s.reqs[3].headers, s.reqs[3].headers_len, "X-D: d"); /* no LF at the end */
    load_script_free(&s);
}

TEST(body_at_the_end_of_the_file)
{
    struct load_script s;
    if (!CHECK_EQ_INT(parse("POST /x\n\n{\"a\":1}\n", &s), 0))
        return;
    CHECK_EQ_INT(s.n, 1);
    CHECK_STR(s.reqs[0].body, s.reqs[0].body_len, "{\"a\":1}");
    load_script_free(&s);
    /* an empty line kept inside: the body's own line break */
    if (!CHECK_EQ_INT(parse("POST /x\n\nbody\n\n---\n", &s), 0))
        return;
    CHECK_STR(s.reqs[0].body, s.reqs[0].body_len, "body\n");
    load_script_free(&s);
}

TEST(refusals_name_the_line)
{
    struct load_script s;
    CHECK_EQ_INT(parse("GET /a\nno colon\n", &s), -1);
    CHECK(strstr(err, ":2: expected a header line") != NULL);
    CHECK_EQ_INT(parse("\n\nGET  /a\n", &s), -1);
    CHECK(strstr(err, ":3: the target must start with '/'") != NULL);
    CHECK_EQ_INT(parse("GET /a b\n", &s), -1);
    CHECK(strstr(err, ":1: a space or control byte") != NULL);
    CHECK_EQ_INT(parse("HEAD /\n", &s), -1);
    CHECK(strstr(err, "HEAD is not supported") != NULL);
    CHECK_EQ_INT(parse("# nothing\n---\n", &s), -1);
    CHECK(strstr(err, "no requests") != NULL);
    CHECK_EQ_INT(parse("/a\n", &s), -1);
    CHECK(strstr(err, ":1: expected a request line") != NULL);
    CHECK_EQ_INT(load_script_read("/nonexistent/herd", &s, err, sizeof err), -1);
    CHECK(strstr(err, "cannot read --requests /nonexistent/herd") != NULL);
}

/* The bound the script reader relies on: a file of max bytes is read, one
 * byte more is EFBIG (and a directory is an error, not an empty file). */
TEST(bounded_read)
{
    char name[] = "/tmp/herd-unit-bounded-XXXXXX";
    int fd = mkstemp(name);
    if (!CHECK(fd >= 0))
        return;
    char big[10000];
    memset(big, 'x', sizeof big);
    CHECK(write(fd, big, sizeof big) == (ssize_t)sizeof big);
    close(fd);
    size_t len = 0;
    char *text = read_file_bounded(name, sizeof big, &len);
    CHECK(text != NULL && len == sizeof big && text[len] == '\0');
    free(text);
    errno = 0;
    CHECK(read_file_bounded(name, sizeof big - 1, &len) == NULL);
    CHECK_EQ_INT(errno, EFBIG);
    CHECK(read_file_bounded("/tmp", 100, &len) == NULL && errno == EISDIR);
    unlink(name);
}

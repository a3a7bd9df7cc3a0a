/* http/status_html.c: which requests get the live page instead of JSON
 * (Accept ranking, q-values, ?format=html), and the page is whole. */
#include "unit.h"

#include "http/status_html.h"

static int wants(const char *accept)
{
    static char buf[1024];
    int n = snprintf(buf, sizeof buf, "GET /s HTTP/1.1\r\nHost: x\r\n%s%s%s\r\n",
                     accept ? "Accept: " : "", accept ? accept : "", accept ? "\r\n" : "");
    struct http_request req;
    if (http_parse_request(buf, (size_t)n, sizeof buf, &req) <= 0)
        return -1;
    return status_wants_html(&req, 0);
}

TEST(accept_ranking)
{
    CHECK(wants(NULL) == 0);                           /* no Accept: JSON */
    CHECK(wants("*/*") == 0);                          /* curl, fetch() */
    CHECK(wants("application/json") == 0);
    CHECK(wants("text/html") == 1);
    CHECK(wants("text/html,application/xhtml+xml,application/xml;q=0.9,"
                "image/avif,image/webp,*/*;q=0.8") == 1); /* a browser */
    CHECK(wants("text/html;q=0.5, application/json") == 0);
    CHECK(wants("application/json;q=0.5, text/html") == 1);
    CHECK(wants("text/html;q=0, */*") == 0);
    CHECK(wants("text/*, application/*;q=0.2") == 1);
    CHECK(wants("TEXT/HTML ; Q=1") == 1);              /* case-insensitive */
    CHECK(wants("text/html;q=2") == 0);                /* a bad q is ignored */
    CHECK(wants("text/html;q=0.x") == 0);
    CHECK(wants("text/html;level=1;q=0.9, */*;q=0.1") == 1);
    CHECK(wants(";;;,,,  ,;q=") == 0);
}

TEST(format_html_wins)
{
    static char buf[] = "GET /s?format=html HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n";
    struct http_request req;
    CHECK(http_parse_request(buf, sizeof buf - 1, sizeof buf, &req) > 0);
    CHECK(status_wants_html(&req, 1) == 1);
}

TEST(page_whole)
{
    size_t len;
    const char *p = status_html(&len);
    CHECK(len > 1000);
    CHECK(memcmp(p, "<!doctype html>", 15) == 0);
    CHECK(memmem(p, len, "</html>\n", 8) == p + len - 8);
    CHECK(strstr(status_html_csp, "default-src 'none'") != NULL);
}

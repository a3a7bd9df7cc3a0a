/* error-page CODE=/path: accepted codes and paths. */
#include "unit.h"

#include "http/errorpage.h"

static struct error_pages P;

static int add(const char *spec)
{
    char err[300];
    return error_page_add(&P, spec, err, sizeof err);
}

TEST(valid_pages)
{
    memset(&P, 0, sizeof P);
    CHECK_EQ_INT(add("404=/404.html"), 0);
    CHECK_EQ_INT(add("403=/errors/forbidden.html"), 0);
    CHECK_EQ_INT(add("503=/e/503.html"), 0);
    size_t len;
    const char *p = error_page_for(&P, 404, &len);
    CHECK_STR(p, len, "404.html");
    p = error_page_for(&P, 403, &len);
    CHECK_STR(p, len, "errors/forbidden.html");
    CHECK(error_page_for(&P, 500, &len) == NULL);
    CHECK_EQ_INT(add("404=/other.html"), 0); /* replaces */
    p = error_page_for(&P, 404, &len);
    CHECK_STR(p, len, "other.html");
    CHECK_EQ_INT(P.n, 3);
}

TEST(invalid_pages)
{
    memset(&P, 0, sizeof P);
    static const char *const bad[] = {
        "404", "404=", "=/x.html", "404=x.html", "404=/", "404=/dir/", "404=/a/../b.html",
        "404=/a//b.html", "404=/./a.html", "404=/a%20b.html", "404=/a.html?x", "200=/ok.html",
        "302=/x.html", "499=/x.html", "600=/x.html", "+404=/x.html", " 404=/x.html",
        "404x=/x.html", "404=/a\r\nb.html", "404=/a\tb.html",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (!CHECK_EQ_INT(add(bad[i]), -1))
            UNIT_NOTE("accepted '%s'", bad[i]);
    CHECK_EQ_INT(P.n, 0);
}

TEST(too_many)
{
    memset(&P, 0, sizeof P);
    static const int codes[] = {400, 403, 404, 405, 406, 408, 413, 414, 416, 431, 500, 501,
                                502, 503, 504, 505};
    char spec[32];
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        snprintf(spec, sizeof spec, "%d=/e%d.html", codes[i], codes[i]);
        CHECK_EQ_INT(add(spec), 0);
    }
    CHECK_EQ_INT(P.n, ERROR_PAGES_MAX);
    CHECK_EQ_INT(add("404=/again.html"), 0); /* a replacement still fits */
}

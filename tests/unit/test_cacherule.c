/* Caching rules: MATCH parsing and validation (no control characters in
 * a header value), longest-match selection, and the header lines. */
#include "unit.h"

#include "core/httpdate.h"
#include "http/cacherule.h"

static struct cache_rules R;

static int add(int expires, const char *spec)
{
    char err[300];
    int rc = cache_rule_add(&R, expires, spec, err, sizeof err);
    if (rc < 0 && strlen(err) == 0)
        fprintf(stderr, "no reason given for '%s'\n", spec);
    return rc;
}

static const char *matched(const char *path)
{
    const struct cache_rule *r = cache_rule_match(R.cc, R.ncc, path, strlen(path));
    return r ? r->value : NULL;
}

static void check_matched(const char *path, const char *want, int line)
{
    const char *got = matched(path);
    int ok = (!got && !want) || (got && want && !strcmp(got, want));
    if (!unit_report_(ok, __FILE__, line))
        fprintf(stderr, "%s: got %s, want %s\n", path, got ? got : "(none)",
                want ? want : "(none)");
}
#define MATCHES(path, want) check_matched(path, want, __LINE__)

TEST(matching_longest_wins_then_first)
{
    memset(&R, 0, sizeof R);
    CHECK_EQ_INT(add(0, "*.css=css"), 0);
    CHECK_EQ_INT(add(0, "/static/=static"), 0);
    CHECK_EQ_INT(add(0, "*.min.css=mincss"), 0);
    CHECK_EQ_INT(add(0, "/=all"), 0);
    CHECK_EQ_INT(add(0, "*.html=html"), 0);
    CHECK_EQ_INT(add(0, "/a.ht=prefix5"), 0);
    MATCHES("/x.css", "css");
    MATCHES("/static/x.css", "static");       /* 8 > 4 */
    MATCHES("/x.min.css", "mincss");          /* 8 > 4 */
    MATCHES("/static/x.min.css", "static");   /* 8 == 8: the first given */
    MATCHES("/x.js", "all");
    MATCHES("/a.html", "html");               /* 5 == 5: html was given first */
    MATCHES("/staticx.css", "css");
    MATCHES("/x.CSS", "all");                 /* case matters, as in paths */
    MATCHES("/css", "all");
}

TEST(no_rules_no_match)
{
    memset(&R, 0, sizeof R);
    MATCHES("/x.css", NULL);
    CHECK_EQ_INT(add(0, "/static/=s"), 0);
    MATCHES("/static", NULL);
    MATCHES("/x.css", NULL);
    MATCHES("/static/", "s");
}

TEST(invalid_rules_are_refused)
{
    memset(&R, 0, sizeof R);
    CHECK_EQ_INT(add(0, "*.css"), -1);               /* no '=' */
    CHECK_EQ_INT(add(0, "*.css="), -1);              /* empty value */
    CHECK_EQ_INT(add(0, "css=public"), -1);          /* neither *SUFFIX nor /PREFIX */
    CHECK_EQ_INT(add(0, "*=public"), -1);
    CHECK_EQ_INT(add(0, "=public"), -1);
    CHECK_EQ_INT(add(0, "/a*b=public"), -1);
    CHECK_EQ_INT(add(0, "**.css=public"), -1);
    CHECK_EQ_INT(add(0, "*.css=public\r\nSet-Cookie: x=1"), -1);
    CHECK_EQ_INT(add(0, "*.css=public\n"), -1);
    CHECK_EQ_INT(add(0, "*.css=a\tb"), -1);
    CHECK_EQ_INT(add(0, "*.css=a\x7f"), -1);
    CHECK_EQ_INT(add(0, "/a\rb=public"), -1);
    char big[400];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    memcpy(big, "*.x=", 4);
    CHECK_EQ_INT(add(0, big), -1);
    CHECK_EQ_INT(R.ncc, 0);
    CHECK_EQ_INT(add(0, "*.css=public"), 0);
    CHECK_EQ_INT(add(0, "*.css=private"), -1);       /* given twice */
    CHECK_EQ_INT(add(0, "/x=max-age=60, a=b"), 0);   /* '=' in the value */
    CHECK_EQ_INT(R.ncc, 2);
    CHECK_EQ_INT(add(1, "*.css=1h"), 0);             /* another kind: no clash */
    CHECK_EQ_INT(add(1, "*.js=soon"), -1);
    CHECK_EQ_INT(add(1, "*.js=500ms"), -1);          /* whole seconds */
    CHECK_EQ_INT(add(1, "*.js=-1"), -1);
    CHECK_EQ_INT(add(1, "*.js=87601h"), -1);         /* over ten years */
    CHECK_EQ_INT(add(1, "*.js=87600h"), 0);
    CHECK_EQ_INT(add(1, "*.png=0"), 0);
}

TEST(too_many_rules)
{
    memset(&R, 0, sizeof R);
    char spec[32];
    for (int i = 0; i < CACHE_RULES_MAX; i++) {
        snprintf(spec, sizeof spec, "*.e%d=public", i);
        CHECK_EQ_INT(add(0, spec), 0);
    }
    CHECK_EQ_INT(add(0, "*.one-more=public"), -1);
}

static size_t render(const char *path, time_t now, char *buf, size_t cap)
{
    struct http_out out = {buf, 0, cap};
    cache_headers(&R, path, strlen(path), now, &out);
    return out.len;
}

TEST(header_lines)
{
    char buf[1024], want[256];
    time_t now = 1700000000;
    memset(&R, 0, sizeof R);
    add(0, "*.css=public, immutable");
    add(0, "/v/=no-cache, max-age=0");
    add(1, "*.css=1h");
    add(1, "/img/=60s");
    add(1, "/v/=2h");
    size_t n = render("/x.txt", now, buf, sizeof buf);
    CHECK_EQ_INT(n, 0);

    /* cache-control without max-age + expires: one Cache-Control line */
    char date[HTTPDATE_LEN + 1] = {0};
    httpdate_format(now + 3600, date);
    snprintf(want, sizeof want,
             "Cache-Control: public, immutable, max-age=3600\r\nExpires: %s\r\n", date);
    n = render("/a/x.css", now, buf, sizeof buf);
    if (!CHECK(n == strlen(want) && !memcmp(buf, want, n)))
        UNIT_NOTE("%.*s", (int)n, buf);

    /* expires alone */
    httpdate_format(now + 60, date);
    snprintf(want, sizeof want, "Cache-Control: max-age=60\r\nExpires: %s\r\n", date);
    n = render("/img/p.png", now, buf, sizeof buf);
    if (!CHECK(n == strlen(want) && !memcmp(buf, want, n)))
        UNIT_NOTE("%.*s", (int)n, buf);

    /* the value's own max-age stays the only one */
    httpdate_format(now + 7200, date);
    snprintf(want, sizeof want, "Cache-Control: no-cache, max-age=0\r\nExpires: %s\r\n", date);
    n = render("/v/x.js", now, buf, sizeof buf);
    if (!CHECK(n == strlen(want) && !memcmp(buf, want, n)))
        UNIT_NOTE("%.*s", (int)n, buf);

    /* cache-control alone */
    memset(&R, 0, sizeof R);
    add(0, "*.css=public");
    n = render("/x.css", now, buf, sizeof buf);
    CHECK_STR(buf, n, "Cache-Control: public\r\n");
}

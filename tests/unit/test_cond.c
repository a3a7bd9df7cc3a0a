/* Conditional requests: ETag list matching, If-None-Match over
 * If-Modified-Since, and If-Range by ETag and by date. */
#include "unit.h"

#include "http/cond.h"

#define ETAG "\"5f3e-1a2b\""
#define MTIME ((time_t)784111777) /* Sun, 06 Nov 1994 08:49:37 GMT */
#define LM "Sun, 06 Nov 1994 08:49:37 GMT"

/* cond_etag_list_matches on an exact-size heap copy of list. */
static int list_matches(const char *list, const char *etag)
{
    size_t n = strlen(list);
    char *l = malloc(n ? n : 1);
    memcpy(l, list, n);
    int r = cond_etag_list_matches(l, n, etag, strlen(etag));
    free(l);
    return r;
}

struct lcase {
    const char *list, *etag;
    int want, line;
};

#define L(list, etag, want) {list, etag, want, __LINE__}

static const struct lcase lists[] = {
    L("\"abc\"", "\"abc\"", 1),
    L("\"abc\"", "\"abd\"", 0),
    L("\"abc\"", "\"ab\"", 0),
    L("\"ab\"", "\"abc\"", 0),
    L("\"abcd\"", "\"abc\"", 0),
    L("\"ABC\"", "\"abc\"", 0),            /* opaque: case matters */
    /* weak comparison: W/ ignored on either side */
    L("W/\"abc\"", "\"abc\"", 1),
    L("\"abc\"", "W/\"abc\"", 1),
    L("W/\"abc\"", "W/\"abc\"", 1),
    L("w/\"abc\"", "\"abc\"", 0),          /* the prefix is "W/" exactly */
    L("W\"abc\"", "\"abc\"", 0),
    /* "*" */
    L("*", "\"abc\"", 1),
    L(" * ", "\"abc\"", 1),
    L("*", "W/\"x\"", 1),
    /* lists */
    L("\"x\", \"abc\"", "\"abc\"", 1),
    L("\"x\",\"abc\"", "\"abc\"", 1),
    L("\"x\" ,\t\"abc\" ", "\"abc\"", 1),
    L("\"x\", W/\"abc\", \"y\"", "\"abc\"", 1),
    L(",, \"abc\" ,,", "\"abc\"", 1),
    L("\"x\", \"y\", \"z\"", "\"abc\"", 0),
    L("\"a,b\"", "\"a,b\"", 1),            /* a comma inside the quotes */
    L("\"a,b\"", "\"a\"", 0),
    L("\"\"", "\"\"", 1),
    /* malformed */
    L("", "\"abc\"", 0),
    L("   ", "\"abc\"", 0),
    L("abc", "\"abc\"", 0),
    L("\"abc", "\"abc\"", 0),
    L("abc\"", "\"abc\"", 0),
    L("W/", "\"abc\"", 0),
    L("W/abc", "\"abc\"", 0),
    L("\"", "\"abc\"", 0),
    L("junk, \"abc\"", "\"abc\"", 0),
};

TEST(etag_lists)
{
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        const struct lcase *c = &lists[i];
        if (!CHECK_EQ_INT(list_matches(c->list, c->etag), c->want))
            UNIT_NOTE("case at line %d: list [%s] etag [%s]", c->line, c->list, c->etag);
    }
    /* only len bytes of the list count */
    CHECK_EQ_INT(cond_etag_list_matches("\"abc\"", 4, "\"abc\"", 5), 0);
    CHECK_EQ_INT(cond_etag_list_matches("\"x\", \"abc\"", 3, "\"abc\"", 5), 0);
    CHECK_EQ_INT(cond_etag_list_matches("\"abc\", \"x\"", 5, "\"abc\"", 5), 1);
}

/* A request with only the given validators (NULL: absent). */
static struct http_request req_with(const char *inm, const char *ims, const char *if_range)
{
    struct http_request r;
    memset(&r, 0, sizeof r);
    r.content_length = -1;
    if (inm)
        r.if_none_match = (struct http_str){inm, (uint32_t)strlen(inm)};
    if (ims)
        r.if_modified_since = (struct http_str){ims, (uint32_t)strlen(ims)};
    if (if_range)
        r.if_range = (struct http_str){if_range, (uint32_t)strlen(if_range)};
    return r;
}

static int not_modified(const char *inm, const char *ims, time_t mtime)
{
    struct http_request r = req_with(inm, ims, NULL);
    return cond_not_modified(&r, ETAG, sizeof ETAG - 1, mtime);
}

TEST(if_none_match)
{
    CHECK_EQ_INT(not_modified(NULL, NULL, MTIME), 0);
    CHECK_EQ_INT(not_modified(ETAG, NULL, MTIME), 1);
    CHECK_EQ_INT(not_modified("W/" ETAG, NULL, MTIME), 1);
    CHECK_EQ_INT(not_modified("\"other\", " ETAG, NULL, MTIME), 1);
    CHECK_EQ_INT(not_modified("*", NULL, MTIME), 1);
    CHECK_EQ_INT(not_modified("\"other\"", NULL, MTIME), 0);
    CHECK_EQ_INT(not_modified("", NULL, MTIME), 0);
}

TEST(if_modified_since)
{
    /* the three formats, same instant */
    CHECK_EQ_INT(not_modified(NULL, LM, MTIME), 1);
    CHECK_EQ_INT(not_modified(NULL, "Sunday, 06-Nov-94 08:49:37 GMT", MTIME), 1);
    CHECK_EQ_INT(not_modified(NULL, "Sun Nov  6 08:49:37 1994", MTIME), 1);
    /* modified one second after the date */
    CHECK_EQ_INT(not_modified(NULL, LM, MTIME + 1), 0);
    CHECK_EQ_INT(not_modified(NULL, "Sunday, 06-Nov-94 08:49:37 GMT", MTIME + 1), 0);
    CHECK_EQ_INT(not_modified(NULL, "Sun Nov  6 08:49:37 1994", MTIME + 1), 0);
    /* the file is older than the date */
    CHECK_EQ_INT(not_modified(NULL, LM, MTIME - 1), 1);
    CHECK_EQ_INT(not_modified(NULL, "Sat, 01 Jan 2000 00:00:00 GMT", MTIME), 1);
    CHECK_EQ_INT(not_modified(NULL, "Sat, 05 Nov 1994 08:49:37 GMT", MTIME), 0);
    CHECK_EQ_INT(not_modified(NULL, "Sun, 06 Nov 1994 08:49:36 GMT", MTIME), 0);
    /* garbage is ignored: send the file */
    CHECK_EQ_INT(not_modified(NULL, "", MTIME), 0);
    CHECK_EQ_INT(not_modified(NULL, "yesterday", MTIME), 0);
    CHECK_EQ_INT(not_modified(NULL, "Sun, 06 Nov 1994 08:49:37 GMT junk", MTIME), 0);
    CHECK_EQ_INT(not_modified(NULL, "Sun, 06 Nov 1994 08:49:37 UTC", MTIME), 0);
    CHECK_EQ_INT(not_modified(NULL, "Sun, 06 Nov 1994 25:49:37 GMT", MTIME), 0);
    CHECK_EQ_INT(not_modified(NULL, "784111777", MTIME), 0);
}

TEST(if_none_match_wins)
{
    /* INM does not match: 200 even though IMS says not modified */
    CHECK_EQ_INT(not_modified("\"other\"", LM, MTIME), 0);
    CHECK_EQ_INT(not_modified("\"other\"", "Sat, 01 Jan 2000 00:00:00 GMT", MTIME), 0);
    /* INM matches: 304 even though IMS says modified */
    CHECK_EQ_INT(not_modified(ETAG, "Sat, 01 Jan 1980 00:00:00 GMT", MTIME), 1);
    /* an empty INM is still an INM */
    CHECK_EQ_INT(not_modified("", LM, MTIME), 0);
    /* a garbage IMS does not spoil a matching INM */
    CHECK_EQ_INT(not_modified(ETAG, "garbage", MTIME), 1);
}

static int if_range_ok(const char *if_range)
{
    struct http_request r = req_with(NULL, NULL, if_range);
    return cond_if_range_ok(&r, ETAG, sizeof ETAG - 1, LM, sizeof LM - 1);
}

TEST(if_range)
{
    CHECK_EQ_INT(if_range_ok(NULL), 1);
    /* by ETag: strong comparison */
    CHECK_EQ_INT(if_range_ok(ETAG), 1);
    CHECK_EQ_INT(if_range_ok("\"other\""), 0);
    CHECK_EQ_INT(if_range_ok("\"5f3e-1a2\""), 0);
    CHECK_EQ_INT(if_range_ok("\"5f3e-1a2b\"x"), 0);
    CHECK_EQ_INT(if_range_ok("W/" ETAG), 0); /* weak tags never match */
    CHECK_EQ_INT(if_range_ok(ETAG ", \"x\""), 0);
    /* by date: the exact Last-Modified */
    CHECK_EQ_INT(if_range_ok(LM), 1);
    CHECK_EQ_INT(if_range_ok("Sun, 06 Nov 1994 08:49:38 GMT"), 0);
    CHECK_EQ_INT(if_range_ok("Sat, 01 Jan 2000 00:00:00 GMT"), 0);
    CHECK_EQ_INT(if_range_ok("Sun, 06 Nov 1994 08:49:37 GMTX"), 0);
    CHECK_EQ_INT(if_range_ok("Sun, 06 Nov 1994 08:49:37 GM"), 0);
    CHECK_EQ_INT(if_range_ok(""), 0);
    CHECK_EQ_INT(if_range_ok("garbage"), 0);

    /* a weak ETag on the file never satisfies If-Range */
    struct http_request r = req_with(NULL, NULL, "\"x\"");
    CHECK_EQ_INT(cond_if_range_ok(&r, "W/\"x\"", 6, LM, sizeof LM - 1), 0);
    r = req_with(NULL, NULL, "W/\"x\"");
    CHECK_EQ_INT(cond_if_range_ok(&r, "W/\"x\"", 6, LM, sizeof LM - 1), 0);
}

/* Conditional requests: ETag list matching (weak and strong), the
 * evaluation order of RFC 9110 13.2.2 (If-Match, If-Unmodified-Since,
 * If-None-Match, If-Modified-Since), fields on several lines, and If-Range
 * by ETag and by date. */
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

/* The strong comparison (If-Match): a W/ on either side never matches. */
static int strong_matches(const char *list, const char *etag)
{
    size_t n = strlen(list);
    char *l = malloc(n ? n : 1);
    memcpy(l, list, n);
    int r = cond_etag_list_matches_strong(l, n, etag, strlen(etag));
    free(l);
    return r;
}

static const struct lcase strong_lists[] = {
    L("\"abc\"", "\"abc\"", 1),
    L("\"abc\"", "\"abd\"", 0),
    L("W/\"abc\"", "\"abc\"", 0),
    L("\"abc\"", "W/\"abc\"", 0),
    L("W/\"abc\"", "W/\"abc\"", 0),
    L("W/\"abc\", \"abc\"", "\"abc\"", 1), /* the weak entry is passed over */
    L("\"x\", W/\"abc\"", "\"abc\"", 0),
    L("*", "\"abc\"", 1),
    L("*", "W/\"abc\"", 1),                  /* any current representation */
    L("\"x\", \"abc\"", "\"abc\"", 1),
    L("\"ABC\"", "\"abc\"", 0),
    L("", "\"abc\"", 0),
    L("junk, \"abc\"", "\"abc\"", 0),
    L("W/", "\"abc\"", 0),
};

TEST(etag_lists_strong)
{
    for (size_t i = 0; i < sizeof strong_lists / sizeof strong_lists[0]; i++) {
        const struct lcase *c = &strong_lists[i];
        if (!CHECK_EQ_INT(strong_matches(c->list, c->etag), c->want))
            UNIT_NOTE("case at line %d: list [%s] etag [%s]", c->line, c->list, c->etag);
    }
    /* without a W/ anywhere the two comparisons agree */
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        const struct lcase *c = &lists[i];
        if (strstr(c->list, "W/") || strstr(c->etag, "W/"))
            continue;
        if (!CHECK_EQ_INT(strong_matches(c->list, c->etag), c->want))
            UNIT_NOTE("case at line %d: list [%s] etag [%s]", c->line, c->list, c->etag);
    }
    CHECK_EQ_INT(cond_etag_list_matches_strong("\"abc\"", 4, "\"abc\"", 5), 0);
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
    return cond_evaluate(&r, ETAG, sizeof ETAG - 1, mtime) == COND_NOT_MODIFIED;
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

/* cond_evaluate on a request parsed from the given field lines (each
 * ending in CRLF), against ETAG and mtime; -1 when it does not parse. */
static int verdict_of(const char *method, const char *fields, const char *etag, time_t mtime)
{
    char head[2048];
    int n = snprintf(head, sizeof head, "%s /f HTTP/1.1\r\nHost: a\r\n%s\r\n", method, fields);
    struct http_request r;
    if (http_parse_request(head, (size_t)n, sizeof head, &r) != n)
        return -1;
    return (int)cond_evaluate(&r, etag, strlen(etag), mtime);
}

static int verdict(const char *fields) { return verdict_of("GET", fields, ETAG, MTIME); }

#define IM(v) "If-Match: " v "\r\n"
#define IUS(v) "If-Unmodified-Since: " v "\r\n"
#define INM(v) "If-None-Match: " v "\r\n"
#define IMS(v) "If-Modified-Since: " v "\r\n"
#define BEFORE "Sun, 06 Nov 1994 08:49:36 GMT" /* a second before MTIME */
#define AFTER "Sat, 01 Jan 2000 00:00:00 GMT"

TEST(if_match)
{
    CHECK_EQ_INT(verdict(""), COND_PROCEED);
    CHECK_EQ_INT(verdict(IM(ETAG)), COND_PROCEED);
    CHECK_EQ_INT(verdict(IM("\"nope\"")), COND_FAILED);
    CHECK_EQ_INT(verdict(IM("*")), COND_PROCEED);
    CHECK_EQ_INT(verdict(IM("\"nope\", " ETAG)), COND_PROCEED);
    CHECK_EQ_INT(verdict(IM("W/" ETAG)), COND_FAILED); /* strong comparison */
    CHECK_EQ_INT(verdict(IM("")), COND_FAILED);        /* an empty list matches nothing */
    CHECK_EQ_INT(verdict(IM("junk")), COND_FAILED);
    /* a weak ETag on the representation matches only "*" */
    CHECK_EQ_INT(verdict_of("GET", IM("W/\"x\""), "W/\"x\"", MTIME), COND_FAILED);
    CHECK_EQ_INT(verdict_of("GET", IM("\"x\""), "W/\"x\"", MTIME), COND_FAILED);
    CHECK_EQ_INT(verdict_of("GET", IM("*"), "W/\"x\"", MTIME), COND_PROCEED);
    CHECK_EQ_INT(verdict_of("HEAD", IM("\"nope\""), ETAG, MTIME), COND_FAILED);
}

TEST(if_unmodified_since)
{
    CHECK_EQ_INT(verdict(IUS(LM)), COND_PROCEED); /* equal: not modified since */
    CHECK_EQ_INT(verdict(IUS(AFTER)), COND_PROCEED);
    CHECK_EQ_INT(verdict(IUS(BEFORE)), COND_FAILED);
    CHECK_EQ_INT(verdict(IUS("Thu, 01 Jan 1970 00:00:00 GMT")), COND_FAILED);
    CHECK_EQ_INT(verdict(IUS("Sunday, 06-Nov-94 08:49:36 GMT")), COND_FAILED);
    /* not one valid date: ignored */
    CHECK_EQ_INT(verdict(IUS("garbage")), COND_PROCEED);
    CHECK_EQ_INT(verdict(IUS("")), COND_PROCEED);
    CHECK_EQ_INT(verdict(IUS(BEFORE ", " BEFORE)), COND_PROCEED);
}

TEST(evaluation_order)
{
    /* If-Match present: If-Unmodified-Since is not looked at (13.2.2 step 2) */
    CHECK_EQ_INT(verdict(IM(ETAG) IUS(BEFORE)), COND_PROCEED);
    CHECK_EQ_INT(verdict(IM("\"nope\"") IUS(AFTER)), COND_FAILED);
    /* 412 before 304 */
    CHECK_EQ_INT(verdict(IM("\"nope\"") INM(ETAG)), COND_FAILED);
    CHECK_EQ_INT(verdict(IUS(BEFORE) INM(ETAG)), COND_FAILED);
    CHECK_EQ_INT(verdict(IUS(BEFORE) IMS(AFTER)), COND_FAILED);
    CHECK_EQ_INT(verdict(IM(ETAG) INM(ETAG)), COND_NOT_MODIFIED);
    CHECK_EQ_INT(verdict(IM("*") IMS(AFTER)), COND_NOT_MODIFIED);
    CHECK_EQ_INT(verdict(IUS(AFTER) IMS(AFTER)), COND_NOT_MODIFIED);
    CHECK_EQ_INT(verdict(IUS(AFTER) INM("\"nope\"") IMS(AFTER)), COND_PROCEED);
    /* the order of the lines does not matter */
    CHECK_EQ_INT(verdict(INM(ETAG) IM("\"nope\"")), COND_FAILED);
    /* If-None-Match true for another method: 412; If-Modified-Since only
     * for GET and HEAD */
    CHECK_EQ_INT(verdict_of("HEAD", INM(ETAG), ETAG, MTIME), COND_NOT_MODIFIED);
    CHECK_EQ_INT(verdict_of("POST", INM(ETAG), ETAG, MTIME), COND_FAILED);
    CHECK_EQ_INT(verdict_of("PUT", INM("*"), ETAG, MTIME), COND_FAILED);
    CHECK_EQ_INT(verdict_of("DELETE", IMS(AFTER), ETAG, MTIME), COND_PROCEED);
    CHECK_EQ_INT(verdict_of("PUT", IM("\"nope\""), ETAG, MTIME), COND_FAILED);
}

TEST(lists_on_several_lines)
{
    /* one list (RFC 9110 5.3): any line may hold the match */
    CHECK_EQ_INT(verdict(IM("\"x\"") IM(ETAG)), COND_PROCEED);
    CHECK_EQ_INT(verdict(IM(ETAG) IM("\"x\"")), COND_PROCEED);
    CHECK_EQ_INT(verdict(IM("\"x\"") IM("\"y\"")), COND_FAILED);
    CHECK_EQ_INT(verdict(IM("\"x\"") IM("*")), COND_PROCEED);
    CHECK_EQ_INT(verdict(IM("\"x\"") "if-match: " ETAG "\r\n"), COND_PROCEED);
    CHECK_EQ_INT(verdict(IM("\"x\"") IM("W/" ETAG)), COND_FAILED);
    CHECK_EQ_INT(verdict(INM("\"x\"") INM(ETAG)), COND_NOT_MODIFIED);
    CHECK_EQ_INT(verdict(INM(ETAG) INM("\"x\"")), COND_NOT_MODIFIED);
    CHECK_EQ_INT(verdict(INM("\"x\"") "X: y\r\n" "IF-NONE-MATCH: W/" ETAG "\r\n"),
                 COND_NOT_MODIFIED);
    CHECK_EQ_INT(verdict(INM("\"x\"") INM("\"y\"")), COND_PROCEED);
    CHECK_EQ_INT(verdict(INM("") INM(ETAG)), COND_NOT_MODIFIED);
    /* a malformed entry ends the list, as it would in the joined value */
    CHECK_EQ_INT(verdict(INM("junk") INM(ETAG)), COND_PROCEED);
    CHECK_EQ_INT(verdict(IM("junk") IM(ETAG)), COND_FAILED);
}

TEST(dates_on_several_lines_are_ignored)
{
    /* two dates are not one HTTP-date: the field is ignored (13.1.3, 13.1.4) */
    CHECK_EQ_INT(verdict(IMS(AFTER) IMS(AFTER)), COND_PROCEED);
    CHECK_EQ_INT(verdict(IMS(BEFORE) IMS(AFTER)), COND_PROCEED);
    CHECK_EQ_INT(verdict(IMS(AFTER) IMS(BEFORE)), COND_PROCEED);
    CHECK_EQ_INT(verdict(IUS(BEFORE) IUS(BEFORE)), COND_PROCEED);
    CHECK_EQ_INT(verdict(IUS(AFTER) IUS(BEFORE)), COND_PROCEED);
    /* one of them alone still counts */
    CHECK_EQ_INT(verdict(IMS(AFTER)), COND_NOT_MODIFIED);
    CHECK_EQ_INT(verdict(IUS(BEFORE)), COND_FAILED);
}

/* httpdate_format and httpdate_parse, against known dates and against the
 * C library (gmtime_r/strftime and timegm) as an oracle. */
#include "unit.h"

#include <time.h>

#include "core/httpdate.h"

static int parse(const char *s, time_t *t)
{
    size_t n = strlen(s);
    char *b = malloc(n ? n : 1); /* exact size: ASan sees an over-read */
    memcpy(b, s, n);
    int r = httpdate_parse(b, n, t);
    free(b);
    return r;
}

static const struct {
    long long t;
    const char *s;
} known[] = {
    {0, "Thu, 01 Jan 1970 00:00:00 GMT"},
    {784111777, "Sun, 06 Nov 1994 08:49:37 GMT"},
    {951782400, "Tue, 29 Feb 2000 00:00:00 GMT"}, /* 2000 is a leap year */
    {951868799, "Tue, 29 Feb 2000 23:59:59 GMT"},
    {1234567890, "Fri, 13 Feb 2009 23:31:30 GMT"},
    {1709164800, "Thu, 29 Feb 2024 00:00:00 GMT"},
    {2147483647, "Tue, 19 Jan 2038 03:14:07 GMT"},
    {2147483648LL, "Tue, 19 Jan 2038 03:14:08 GMT"},
    {4102444800LL, "Fri, 01 Jan 2100 00:00:00 GMT"},
    {4107542400LL, "Mon, 01 Mar 2100 00:00:00 GMT"}, /* 2100 is not */
    {253402300799LL, "Fri, 31 Dec 9999 23:59:59 GMT"},
};

TEST(format_known)
{
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        char out[HTTPDATE_LEN + 1];
        memset(out, '#', sizeof out);
        httpdate_format((time_t)known[i].t, out);
        CHECK_EQ_INT(out[HTTPDATE_LEN], '#'); /* exactly HTTPDATE_LEN bytes */
        if (!CHECK(memcmp(out, known[i].s, HTTPDATE_LEN) == 0))
            UNIT_NOTE("%lld: got %.29s, want %s", known[i].t, out, known[i].s);
    }
}

TEST(parse_known)
{
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        time_t t = -1;
        if (!CHECK_EQ_INT(parse(known[i].s, &t), 0) || !CHECK_EQ_INT(t, known[i].t))
            UNIT_NOTE("%s", known[i].s);
    }
}

TEST(three_formats)
{
    time_t t;
    CHECK_EQ_INT(parse("Sun, 06 Nov 1994 08:49:37 GMT", &t), 0);
    CHECK_EQ_INT(t, 784111777);
    t = 0;
    CHECK_EQ_INT(parse("Sunday, 06-Nov-94 08:49:37 GMT", &t), 0);
    CHECK_EQ_INT(t, 784111777);
    t = 0;
    CHECK_EQ_INT(parse("Sun Nov  6 08:49:37 1994", &t), 0);
    CHECK_EQ_INT(t, 784111777);
    /* asctime with a two-digit day */
    CHECK_EQ_INT(parse("Wed Nov 16 08:49:37 1994", &t), 0);
    CHECK_EQ_INT(t, 784111777 + 10 * 86400);
    /* RFC 850 with the longest weekday, and a 20xx year */
    CHECK_EQ_INT(parse("Wednesday, 09-Nov-94 08:49:37 GMT", &t), 0);
    CHECK_EQ_INT(t, 784111777 + 3 * 86400);
    CHECK_EQ_INT(parse("Thursday, 29-Feb-24 00:00:00 GMT", &t), 0);
    CHECK_EQ_INT(t, 1709164800);
    CHECK_EQ_INT(parse("Tuesday, 19-Jan-38 03:14:08 GMT", &t), 0);
    CHECK_EQ_INT(t, 2147483648LL);
    /* asctime past 2038 */
    CHECK_EQ_INT(parse("Mon Mar  1 00:00:00 2100", &t), 0);
    CHECK_EQ_INT(t, 4107542400LL);
}

/* Round trip, and agreement with the C library, for times spread over
 * 1970..9999 plus every day of 1999..2001 and 2099..2101. */
TEST(round_trip)
{
    long bad = 0, n = 0;
    char out[HTTPDATE_LEN], want[64];
    for (int pass = 0; pass < 3; pass++) {
        long long from, to, step;
        if (pass == 0)
            from = 0, to = 253402300799LL, step = 7919LL * 3607; /* ~ 8900 samples */
        else if (pass == 1)
            from = 915148800LL, to = 1009843200LL, step = 86400 + 1; /* 1999-2001 */
        else
            from = 4070908800LL, to = 4165603200LL, step = 86400 - 7; /* 2099-2101 */
        for (long long v = from; v <= to; v += step) {
            time_t t = (time_t)v, back = -1;
            httpdate_format(t, out);
            struct tm tm;
            gmtime_r(&t, &tm);
            strftime(want, sizeof want, "%a, %d %b %Y %H:%M:%S GMT", &tm);
            int ok = memcmp(out, want, HTTPDATE_LEN) == 0;
            ok = ok && httpdate_parse(out, HTTPDATE_LEN, &back) == 0 && back == t;
            /* the asctime form of the same instant parses to it too */
            char asc[32];
            strftime(asc, sizeof asc, "%a %b %e %H:%M:%S %Y", &tm);
            time_t back2 = -1;
            ok = ok && httpdate_parse(asc, strlen(asc), &back2) == 0 && back2 == t;
            /* and the parse agrees with timegm */
            ok = ok && timegm(&tm) == back;
            n++;
            if (!ok && bad++ < 5) {
                CHECK(!"round trip");
                UNIT_NOTE("%lld: got %.29s -> %lld (asctime %s -> %lld), want %s", v, out,
                          (long long)back, asc, (long long)back2, want);
            }
        }
    }
    CHECK_EQ_INT(bad, 0);
    CHECK(n > 10000);
}

TEST(rfc850_two_digit_years)
{
    time_t t;
    CHECK_EQ_INT(parse("Thursday, 01-Jan-70 00:00:00 GMT", &t), 0);
    CHECK_EQ_INT(t, 0);
    CHECK_EQ_INT(parse("Saturday, 01-Jan-00 00:00:00 GMT", &t), 0);
    CHECK_EQ_INT(t, 946684800);
    CHECK_EQ_INT(parse("Friday, 31-Dec-99 23:59:59 GMT", &t), 0);
    CHECK_EQ_INT(t, 946684799);
}

TEST(rejects_garbage)
{
    static const char *const bad[] = {
        "",
        "garbage",
        "0",
        "784111777",
        "Sun, 06 Nov 1994 08:49:37 GMT ",     /* trailing space */
        " Sun, 06 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 08:49:37 UTC",
        "Sun, 06 Nov 1994 08:49:37 gmt",
        "Sun, 06 Nov 1994 08:49:37 +0000",
        "Sun, 6 Nov 1994 08:49:37 GMT",       /* one-digit day */
        "Sun, 06 Nov 94 08:49:37 GMT",
        "Sun, 06 Xyz 1994 08:49:37 GMT",
        "Sun, 06 nov 1994 08:49:37 GMT",      /* month names are case-sensitive */
        "Sun, 06 NOV 1994 08:49:37 GMT",
        "Sun, 00 Nov 1994 08:49:37 GMT",
        "Sun, 32 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 24:00:00 GMT",
        "Sun, 06 Nov 1994 08:60:37 GMT",
        "Sun, 06 Nov 1994 08:49:61 GMT",
        "Sun, 06 Nov 1994 08-49-37 GMT",
        "Sun, 06 Nov 1994 8:49:37 GMT",
        "Sun, 06 Nov 19x4 08:49:37 GMT",
        "Sun, +6 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 08:4 :37 GMT",
        "Sun,06 Nov 1994 08:49:37 GMT ",
        "Sun, 06-Nov-1994 08:49:37 GMT",
        "Sunday, 06-Nov-94 08:49:37 UTC",
        "Sunday, 06-Nov-94 08:49:37 GMT ",
        "Sunday, 06 Nov 94 08:49:37 GMT",
        "Sunday, 06-Nov-9x 08:49:37 GMT",
        "Sunday, 06-Xyz-94 08:49:37 GMT",
        "Sunday, 36-Nov-94 08:49:37 GMT",
        "Sunday, 06-Nov-94 08:49:3 GMT",
        "Sun Nov  6 08:49:37 1994 ",
        "Sun Nov 6 08:49:37 1994",
        "Sun Nov  6 08:49:37 94",
        "Sun Xyz  6 08:49:37 1994",
        "Sun Nov  6 08:49:77 1994",
        "Sun Nov  0 08:49:37 1994",
        "Sun Nov  x 08:49:37 1994",
        "Sun Nov  6 08:49:37 19944",
        "Sun, 06 Nov 1994 08:49:37 GMT\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        time_t t = 12345;
        if (!CHECK_EQ_INT(parse(bad[i], &t), -1))
            UNIT_NOTE("accepted [%s] as %lld", bad[i], (long long)t);
    }
    /* a NUL inside */
    time_t t;
    CHECK_EQ_INT(httpdate_parse("Sun, 06 Nov 1994 08:49:\0007 GMT", 29, &t), -1);
    /* only len bytes count */
    CHECK_EQ_INT(httpdate_parse("Sun, 06 Nov 1994 08:49:37 GMT", 28, &t), -1);
    CHECK_EQ_INT(httpdate_parse("Sun, 06 Nov 1994 08:49:37 GMTxx", 29, &t), 0);
    CHECK_EQ_INT(t, 784111777);
}

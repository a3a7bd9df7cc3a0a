#include "core/httpdate.h"

#include <string.h>

static const char wdays[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                   "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

/* Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm), so we
 * need neither timegm's locale nor its TZ lookups. */
static long days_from_civil(long y, unsigned m, unsigned d)
{
    y -= m <= 2;
    long era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (long)doe - 719468;
}

static void put2(char *p, unsigned v)
{
    p[0] = (char)('0' + v / 10);
    p[1] = (char)('0' + v % 10);
}

void httpdate_format(time_t t, char out[HTTPDATE_LEN])
{
    struct tm tm;
    gmtime_r(&t, &tm);
    memcpy(out, wdays[tm.tm_wday], 3);
    out[3] = ',';
    out[4] = ' ';
    put2(out + 5, (unsigned)tm.tm_mday);
    out[7] = ' ';
    memcpy(out + 8, months[tm.tm_mon], 3);
    out[11] = ' ';
    unsigned y = (unsigned)(tm.tm_year + 1900);
    put2(out + 12, y / 100 % 100);
    put2(out + 14, y % 100);
    out[16] = ' ';
    put2(out + 17, (unsigned)tm.tm_hour);
    out[19] = ':';
    put2(out + 20, (unsigned)tm.tm_min);
    out[22] = ':';
    put2(out + 23, (unsigned)tm.tm_sec);
    memcpy(out + 25, " GMT", 4);
}

static int num(const char *s, size_t n, unsigned *out)
{
    unsigned v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    *out = v;
    return 0;
}

static int month_index(const char *s)
{
    for (int i = 0; i < 12; i++)
        if (memcmp(s, months[i], 3) == 0)
            return i;
    return -1;
}

static int to_time(unsigned y, int mon, unsigned d, unsigned hh, unsigned mm,
                   unsigned ss, time_t *t)
{
    if (mon < 0 || d < 1 || d > 31 || hh > 23 || mm > 59 || ss > 60 || y < 1970)
        return -1;
    long days = days_from_civil((long)y, (unsigned)mon + 1, d);
    *t = (time_t)(days * 86400L + hh * 3600L + mm * 60L + ss);
    return 0;
}

/* "HH:MM:SS" */
static int hms(const char *p, unsigned *h, unsigned *m, unsigned *s)
{
    if (p[2] != ':' || p[5] != ':')
        return -1;
    return num(p, 2, h) | num(p + 3, 2, m) | num(p + 6, 2, s);
}

int httpdate_parse(const char *s, size_t len, time_t *t)
{
    unsigned d, y, hh, mm, ss;
    /* IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT" */
    if (len == 29 && s[3] == ',' && s[4] == ' ' && s[7] == ' ' && s[11] == ' ' &&
        s[16] == ' ' && memcmp(s + 25, " GMT", 4) == 0) {
        if (num(s + 5, 2, &d) || num(s + 12, 4, &y) || hms(s + 17, &hh, &mm, &ss))
            return -1;
        return to_time(y, month_index(s + 8), d, hh, mm, ss, t);
    }
    /* asctime: "Sun Nov  6 08:49:37 1994" */
    if (len == 24 && s[3] == ' ' && s[7] == ' ' && s[10] == ' ' && s[19] == ' ') {
        char dd[2] = {s[8] == ' ' ? '0' : s[8], s[9]};
        if (num(dd, 2, &d) || num(s + 20, 4, &y) || hms(s + 11, &hh, &mm, &ss))
            return -1;
        return to_time(y, month_index(s + 4), d, hh, mm, ss, t);
    }
    /* RFC 850: "Sunday, 06-Nov-94 08:49:37 GMT" */
    const char *comma = memchr(s, ',', len < 10 ? len : 10);
    if (comma && (size_t)(s + len - comma) == 24 && comma[1] == ' ' && comma[4] == '-' &&
        comma[8] == '-' && comma[11] == ' ' && memcmp(comma + 20, " GMT", 4) == 0) {
        if (num(comma + 2, 2, &d) || num(comma + 9, 2, &y) || hms(comma + 12, &hh, &mm, &ss))
            return -1;
        y += y < 70 ? 2000 : 1900;
        return to_time(y, month_index(comma + 5), d, hh, mm, ss, t);
    }
    return -1;
}

#include "http/range.h"

#include <stdint.h>
#include <strings.h>

/* Reads digits at *p; returns -1 when there are none. A position is of
 * any length (RFC 9110 14.1.1): one past 64 bits reads as INT64_MAX, past
 * the end of any file, so "0-<huge>" is the whole file and "<huge>-" is
 * unsatisfiable, as they would be with big integers. */
static int64_t digits(const char **p, const char *end)
{
    const char *s = *p;
    int64_t v = 0;
    while (*p < end && **p >= '0' && **p <= '9') {
        int d = **p - '0';
        v = v > (INT64_MAX - d) / 10 ? INT64_MAX : v * 10 + d;
        (*p)++;
    }
    return *p == s ? -1 : v;
}

/* Skips whitespace and empty list elements: a recipient ignores those
 * (RFC 9110 5.6.1.2), so "bytes=0-9," and "bytes=, 0-9" hold one range. */
static void skip_empty(const char **p, const char *end)
{
    while (*p < end && (**p == ' ' || **p == '\t' || **p == ','))
        (*p)++;
}

enum range_result range_parse(const char *h, size_t len, off_t size, off_t *start,
                              off_t *rlen)
{
    const char *p = h, *end = h + len;
    if (len < 6 || strncasecmp(p, "bytes=", 6) != 0)
        return RANGE_NONE;
    p += 6;
    skip_empty(&p, end);
    int64_t a = -1, b = -1;
    if (p < end && *p == '-') {
        p++;
        b = digits(&p, end);
        if (b < 0)
            return RANGE_NONE;
    } else {
        a = digits(&p, end);
        if (a < 0 || p >= end || *p != '-')
            return RANGE_NONE;
        p++;
        if (p < end && *p >= '0' && *p <= '9') {
            b = digits(&p, end);
            if (b < 0 || b < a)
                return RANGE_NONE;
        }
    }
    skip_empty(&p, end);
    if (p != end)
        return RANGE_NONE; /* several ranges, or junk: the whole file */
    if (a < 0) {
        /* suffix: the last b bytes */
        if (b == 0 || size == 0)
            return RANGE_UNSATISFIABLE;
        *start = b >= size ? 0 : size - b;
        *rlen = size - *start;
        return RANGE_OK;
    }
    if (a >= size)
        return RANGE_UNSATISFIABLE;
    if (b < 0 || b >= size)
        b = size - 1;
    *start = a;
    *rlen = b - a + 1;
    return RANGE_OK;
}

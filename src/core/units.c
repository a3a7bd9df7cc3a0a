#include "core/units.h"

#include <string.h>
#include <strings.h>

/* Digits then an optional suffix; the digits must be all there is before it. */
static int number(const char *s, uint64_t *n, const char **suffix)
{
    if (!s || !*s)
        return -1;
    uint64_t v = 0;
    const char *p = s;
    while (*p >= '0' && *p <= '9') {
        if (v > (UINT64_MAX - 9) / 10)
            return -1;
        v = v * 10 + (uint64_t)(*p - '0');
        p++;
    }
    if (p == s)
        return -1;
    *n = v;
    *suffix = p;
    return 0;
}

int unit_size(const char *s, uint64_t *out)
{
    uint64_t n, mul = 1;
    const char *suf;
    if (number(s, &n, &suf) < 0)
        return -1;
    if (!*suf)
        mul = 1;
    else if (!strcasecmp(suf, "k") || !strcasecmp(suf, "kb") || !strcasecmp(suf, "kib"))
        mul = 1024;
    else if (!strcasecmp(suf, "m") || !strcasecmp(suf, "mb") || !strcasecmp(suf, "mib"))
        mul = 1024 * 1024;
    else if (!strcasecmp(suf, "g") || !strcasecmp(suf, "gb") || !strcasecmp(suf, "gib"))
        mul = 1024 * 1024 * 1024;
    else
        return -1;
    if (n > UINT64_MAX / mul)
        return -1;
    *out = n * mul;
    return 0;
}

int unit_duration_ms(const char *s, int64_t *out)
{
    uint64_t n, mul;
    const char *suf;
    if (number(s, &n, &suf) < 0)
        return -1;
    if (!strcmp(suf, "ms"))
        mul = 1;
    else if (!*suf || !strcmp(suf, "s"))
        mul = 1000;
    else if (!strcmp(suf, "m"))
        mul = 60000;
    else if (!strcmp(suf, "h"))
        mul = 3600000;
    else
        return -1;
    if (n > (uint64_t)INT64_MAX / mul / 2)
        return -1;
    *out = (int64_t)(n * mul);
    return 0;
}

int unit_count(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    uint64_t n;
    const char *suf;
    if (number(s, &n, &suf) < 0 || *suf || n < min || n > max)
        return -1;
    *out = n;
    return 0;
}

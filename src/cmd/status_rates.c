#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd/status_rates.h"

/* The number after "key": in json (the first occurrence is the total,
 * before the per-slot array): digits only, as herd writes its counters,
 * ending the value. A sign, a value past 64 bits, a string or a missing
 * key is -1, never a wrapped or zero count. */
static int number(const char *json, const char *key, unsigned long long *v)
{
    char pat[48];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(json, pat);
    if (!p)
        return -1;
    p += strlen(pat);
    if (*p < '0' || *p > '9')
        return -1;
    char *end;
    errno = 0;
    *v = strtoull(p, &end, 10);
    if (errno == ERANGE || (*end != ',' && *end != '}'))
        return -1;
    return 0;
}

int status_sample_parse(const char *json, double t, struct status_sample *s, const char **bad)
{
    memset(s, 0, sizeof *s);
    s->t = t;
    const struct { const char *key; unsigned long long *v; } totals[] = {
        {"requests", &s->requests}, {"bytes_in", &s->bytes_in}, {"bytes_out", &s->bytes_out},
    }, classes[] = {
        {"1xx", &s->cls[1]}, {"2xx", &s->cls[2]}, {"3xx", &s->cls[3]},
        {"4xx", &s->cls[4]}, {"5xx", &s->cls[5]},
    };
    for (size_t i = 0; i < sizeof totals / sizeof totals[0]; i++) {
        *bad = totals[i].key;
        if (number(json, *bad, totals[i].v) < 0)
            return -1;
    }
    /* the classes are looked up inside the responses object only */
    const char *resp = strstr(json, "\"responses\":{");
    if (!resp) {
        *bad = "responses";
        return -1;
    }
    for (size_t i = 0; i < sizeof classes / sizeof classes[0]; i++) {
        *bad = classes[i].key;
        if (number(resp, *bad, classes[i].v) < 0)
            return -1;
    }
    *bad = NULL;
    return 0;
}

static double rate(unsigned long long a, unsigned long long b, double dt)
{
    return b >= a && dt > 0 ? (double)(b - a) / dt : 0;
}

void status_rates_print(FILE *out, const struct status_sample *prev,
                        const struct status_sample *cur)
{
    char stamp[16];
    time_t now = time(NULL);
    strftime(stamp, sizeof stamp, "%H:%M:%S", localtime(&now));
    fprintf(out, "%s requests %llu", stamp, cur->requests);
    if (!prev) {
        fputs("  (rates from the next sample)\n", out);
        return;
    }
    double dt = cur->t - prev->t;
    fprintf(out, "  req/s %.1f  in B/s %.0f  out B/s %.0f  2xx/s %.1f  3xx/s %.1f"
                 "  4xx/s %.1f  5xx/s %.1f\n",
            rate(prev->requests, cur->requests, dt), rate(prev->bytes_in, cur->bytes_in, dt),
            rate(prev->bytes_out, cur->bytes_out, dt), rate(prev->cls[2], cur->cls[2], dt),
            rate(prev->cls[3], cur->cls[3], dt), rate(prev->cls[4], cur->cls[4], dt),
            rate(prev->cls[5], cur->cls[5], dt));
}

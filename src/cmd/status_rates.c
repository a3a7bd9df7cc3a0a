#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd/status_rates.h"

/* The number after "key": in json, looked up after from (the first
 * occurrence is the total, before the per-slot array). */
static int number(const char *json, const char *key, unsigned long long *v)
{
    char pat[48];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(json, pat);
    if (!p)
        return -1;
    char *end;
    *v = strtoull(p + strlen(pat), &end, 10);
    return end == p + strlen(pat) ? -1 : 0;
}

int status_sample_parse(const char *json, double t, struct status_sample *s)
{
    memset(s, 0, sizeof *s);
    s->t = t;
    const char *resp = strstr(json, "\"responses\":{");
    if (number(json, "requests", &s->requests) < 0 || number(json, "bytes_in", &s->bytes_in) < 0 ||
        number(json, "bytes_out", &s->bytes_out) < 0 || !resp)
        return -1;
    for (int k = 1; k <= 5; k++) {
        char key[16];
        snprintf(key, sizeof key, "%dxx", k);
        if (number(resp, key, &s->cls[k]) < 0)
            return -1;
    }
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

/* `herd status --watch`: per-second rates from two samples of the status
 * JSON's totals. */
#ifndef HERD_CMD_STATUS_RATES_H
#define HERD_CMD_STATUS_RATES_H

#include <stdio.h>

struct status_sample {
    double t;                   /* CLOCK_MONOTONIC seconds */
    unsigned long long requests, bytes_in, bytes_out, cls[6]; /* cls[2] = 2xx ... */
};

/* Reads the totals from the status JSON; returns 0, or -1 with *bad naming
 * the first key that is missing or not an unsigned 64-bit count (not
 * herd's status JSON). */
int status_sample_parse(const char *json, double t, struct status_sample *s, const char **bad);

/* One line: totals, then per-second rates since prev (none when prev is
 * NULL). */
void status_rates_print(FILE *out, const struct status_sample *prev,
                        const struct status_sample *cur);

#endif

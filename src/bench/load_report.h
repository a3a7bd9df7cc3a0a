/* What herd load prints and saves: the text report (laid out like wrk's),
 * the JSON object (with the full histogram), reading JSON back to merge
 * runs, and the verdict that refuses to print figures for work that did
 * not happen. */
#ifndef HERD_BENCH_LOAD_REPORT_H
#define HERD_BENCH_LOAD_REPORT_H

#include <stddef.h>
#include <stdio.h>

#include "bench/load_run.h"

/* Returns 1 when r has no successful response (status < 400), with the
 * reason in msg; else 0. */
int load_failure(const struct load_result *r, char *msg, size_t n);

/* The report after the run; distribution adds the percentile table. */
void load_print_text(FILE *f, const struct load_result *r, int distribution);

/* With --rate: a warning line when the achieved rate fell short of it by
 * more than LOAD_RATE_TOLERANCE_PCT (the JSON says so in rate_missed). */
void load_warn_rate(FILE *f, const struct load_result *r);

/* Writes r as one JSON object to path ("-" is stdout). Returns 0, or -1
 * with a reason in err. */
int load_write_json(const char *path, const struct load_result *r, char *err, size_t errlen);

/* Adds the run saved in path to r, as one more run that ran at the same
 * time: counts and rates add up, the duration is the longest, histograms
 * merge. r must start zeroed with r->latency allocated. Returns 0, or -1
 * with a reason in err. */
int load_merge_json(const char *path, struct load_result *r, char *err, size_t errlen);

#endif

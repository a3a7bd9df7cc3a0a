/* HDR histogram (the HdrHistogram layout): log-linear buckets that keep 3
 * significant digits for every value from 1 up to HDR_MAX, in a fixed
 * array, so recording is a few shifts and one increment, and histograms of
 * several threads, runs or machines merge by adding counts.
 *
 * Values are plain integers (herd records nanoseconds). Values above
 * HDR_MAX are recorded as HDR_MAX. min, max and the sum are kept exactly;
 * percentiles and stdev come from the buckets. */
#ifndef HERD_BENCH_HDR_H
#define HERD_BENCH_HDR_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define HDR_MAX 3600000000000ULL /* one hour in nanoseconds */
#define HDR_SIGNIFICANT_DIGITS 3

struct hdr;
struct json;

/* A zeroed histogram, or NULL when memory is exhausted (about 270 KiB). */
struct hdr *hdr_new(void);
void hdr_free(struct hdr *h);
void hdr_reset(struct hdr *h);

void hdr_record(struct hdr *h, uint64_t v);
void hdr_record_n(struct hdr *h, uint64_t v, uint64_t n);
/* Adds every count of src to dst. */
void hdr_merge(struct hdr *dst, const struct hdr *src);

uint64_t hdr_count(const struct hdr *h);
uint64_t hdr_min(const struct hdr *h); /* 0 when empty */
uint64_t hdr_max(const struct hdr *h);
double hdr_mean(const struct hdr *h);
double hdr_stdev(const struct hdr *h);
/* The value below which pct percent of the recorded values fall (the
 * highest value of its bucket, capped at the exact max); pct in [0, 100].
 * 0 when empty. */
uint64_t hdr_percentile(const struct hdr *h, double pct);

/* Values that share v's bucket; for tests and for reading dumps back. */
uint64_t hdr_lowest_equivalent(uint64_t v);
uint64_t hdr_highest_equivalent(uint64_t v);

/* One JSON object: {"unit": unit, "significant_digits": 3, "count",
 * "min", "max", "sum", "buckets": [[value, count], ...]} with only the
 * non-empty buckets, each named by its lowest value. */
void hdr_write_json(const struct hdr *h, const char *unit, FILE *f);
/* Adds a histogram written by hdr_write_json with the same unit to h.
 * Returns 0, or -1 with a reason in err (and h unchanged). */
int hdr_add_json(struct hdr *h, const struct json *obj, const char *unit,
                 char *err, size_t errlen);

#endif

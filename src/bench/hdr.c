#include "bench/hdr.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/json.h"

/* 3 significant digits need 2 * 10^3 distinct steps in the first bucket:
 * 2048 sub-buckets. Every further bucket covers twice the range with the
 * upper half of those sub-buckets (the lower half repeats the previous
 * bucket), so the relative error stays below 1/1024 everywhere. */
#define SUB_MAG 11                      /* log2 of the sub-bucket count */
#define HALF_MAG (SUB_MAG - 1)
#define SUB_COUNT (1u << SUB_MAG)
#define HALF_COUNT (1u << HALF_MAG)
#define SUB_MASK ((uint64_t)SUB_COUNT - 1)
#define BUCKETS 32                      /* enough for HDR_MAX, checked below */
#define COUNTS_LEN ((BUCKETS + 1) * HALF_COUNT)

_Static_assert(((uint64_t)SUB_COUNT << (BUCKETS - 1)) > HDR_MAX, "too few buckets for HDR_MAX");
_Static_assert(((uint64_t)SUB_COUNT << (BUCKETS - 2)) <= HDR_MAX, "more buckets than HDR_MAX needs");

struct hdr {
    uint64_t total, min, max, sum;
    uint64_t counts[COUNTS_LEN];
};

static inline int bucket_of(uint64_t v)
{
    return 64 - __builtin_clzll(v | SUB_MASK) - SUB_MAG;
}

static inline uint32_t index_of(uint64_t v)
{
    int b = bucket_of(v);
    return ((uint32_t)(b + 1) << HALF_MAG) + (uint32_t)(v >> b) - HALF_COUNT;
}

/* The lowest value counted at index i. */
static inline uint64_t value_at(uint32_t i)
{
    int b = (int)(i >> HALF_MAG) - 1;
    uint64_t sub = (i & (HALF_COUNT - 1)) + HALF_COUNT;
    if (b < 0) {
        sub -= HALF_COUNT;
        b = 0;
    }
    return sub << b;
}

uint64_t hdr_lowest_equivalent(uint64_t v)
{
    int b = bucket_of(v);
    return v >> b << b;
}

uint64_t hdr_highest_equivalent(uint64_t v)
{
    int b = bucket_of(v);
    return (v >> b << b) + ((uint64_t)1 << b) - 1;
}

static uint64_t median_equivalent(uint64_t v)
{
    int b = bucket_of(v);
    return (v >> b << b) + (((uint64_t)1 << b) >> 1);
}

struct hdr *hdr_new(void)
{
    struct hdr *h = calloc(1, sizeof *h);
    if (h)
        h->min = UINT64_MAX;
    return h;
}

void hdr_free(struct hdr *h)
{
    free(h);
}

void hdr_reset(struct hdr *h)
{
    memset(h, 0, sizeof *h);
    h->min = UINT64_MAX;
}

void hdr_record_n(struct hdr *h, uint64_t v, uint64_t n)
{
    if (v > HDR_MAX)
        v = HDR_MAX;
    h->counts[index_of(v)] += n;
    h->total += n;
    h->sum += v * n;
    if (v < h->min)
        h->min = v;
    if (v > h->max)
        h->max = v;
}

void hdr_record(struct hdr *h, uint64_t v)
{
    hdr_record_n(h, v, 1);
}

void hdr_merge(struct hdr *dst, const struct hdr *src)
{
    if (!src->total)
        return;
    for (uint32_t i = 0; i < COUNTS_LEN; i++)
        dst->counts[i] += src->counts[i];
    dst->total += src->total;
    dst->sum += src->sum;
    if (src->min < dst->min)
        dst->min = src->min;
    if (src->max > dst->max)
        dst->max = src->max;
}

uint64_t hdr_count(const struct hdr *h) { return h->total; }
uint64_t hdr_min(const struct hdr *h) { return h->total ? h->min : 0; }
uint64_t hdr_max(const struct hdr *h) { return h->max; }

double hdr_mean(const struct hdr *h)
{
    return h->total ? (double)h->sum / (double)h->total : 0.0;
}

double hdr_stdev(const struct hdr *h)
{
    if (h->total < 2)
        return 0.0;
    double mean = hdr_mean(h), acc = 0.0;
    for (uint32_t i = 0; i < COUNTS_LEN; i++) {
        if (!h->counts[i])
            continue;
        double d = (double)median_equivalent(value_at(i)) - mean;
        acc += d * d * (double)h->counts[i];
    }
    return sqrt(acc / (double)h->total);
}

uint64_t hdr_percentile(const struct hdr *h, double pct)
{
    if (!h->total)
        return 0;
    if (pct >= 100.0)
        return h->max;
    if (pct < 0.0)
        pct = 0.0;
    uint64_t want = (uint64_t)(pct / 100.0 * (double)h->total + 0.5);
    if (want < 1)
        want = 1;
    uint64_t seen = 0;
    for (uint32_t i = 0; i < COUNTS_LEN; i++) {
        seen += h->counts[i];
        if (seen >= want) {
            uint64_t v = hdr_highest_equivalent(value_at(i));
            return v < h->max ? v : h->max;
        }
    }
    return h->max;
}

void hdr_write_json(const struct hdr *h, const char *unit, FILE *f)
{
    fputs("{\"unit\": ", f);
    json_write_str(f, unit);
    fprintf(f, ", \"significant_digits\": %d, \"count\": %llu, \"min\": %llu, "
               "\"max\": %llu, \"sum\": %llu, \"buckets\": [",
            HDR_SIGNIFICANT_DIGITS, (unsigned long long)h->total,
            (unsigned long long)hdr_min(h), (unsigned long long)h->max,
            (unsigned long long)h->sum);
    int first = 1;
    for (uint32_t i = 0; i < COUNTS_LEN; i++) {
        if (!h->counts[i])
            continue;
        fprintf(f, "%s[%llu, %llu]", first ? "" : ", ",
                (unsigned long long)value_at(i), (unsigned long long)h->counts[i]);
        first = 0;
    }
    fputs("]}", f);
}

int hdr_add_json(struct hdr *h, const struct json *obj, const char *unit,
                 char *err, size_t errlen)
{
    const struct json *u = json_get(obj, "unit");
    if (!u || u->type != JSON_STR || strcmp(u->str, unit)) {
        snprintf(err, errlen, "histogram unit is not \"%s\"", unit);
        return -1;
    }
    uint64_t count, min, max, sum;
    if (json_get_u64(obj, "count", &count) || json_get_u64(obj, "min", &min) ||
        json_get_u64(obj, "max", &max) || json_get_u64(obj, "sum", &sum)) {
        snprintf(err, errlen, "histogram lacks count, min, max or sum");
        return -1;
    }
    const struct json *b = json_get(obj, "buckets");
    if (!b || b->type != JSON_ARR) {
        snprintf(err, errlen, "histogram lacks its buckets");
        return -1;
    }
    /* Check everything before adding anything, so a bad file leaves h as it was. */
    uint64_t seen = 0;
    for (const struct json *e = b->child; e; e = e->next) {
        const struct json *v = e->type == JSON_ARR ? e->child : NULL;
        const struct json *c = v ? v->next : NULL;
        if (!c || c->next || !v->is_u64 || !c->is_u64 || v->u64 > HDR_MAX) {
            snprintf(err, errlen, "histogram bucket is not [value, count]");
            return -1;
        }
        if (__builtin_add_overflow(seen, c->u64, &seen)) {
            snprintf(err, errlen, "histogram counts do not add up");
            return -1;
        }
    }
    if (seen != count || (count && (min > max || max > HDR_MAX))) {
        snprintf(err, errlen, "histogram counts do not add up");
        return -1;
    }
    uint64_t total, total_sum; /* each bucket is at most the total: it cannot wrap either */
    if (__builtin_add_overflow(h->total, count, &total) ||
        __builtin_add_overflow(h->sum, sum, &total_sum)) {
        snprintf(err, errlen, "histogram count or sum past 2^64 once added");
        return -1;
    }
    if (!count)
        return 0;
    for (const struct json *e = b->child; e; e = e->next)
        h->counts[index_of(e->child->u64)] += e->child->next->u64;
    h->total = total;
    h->sum = total_sum;
    if (min < h->min)
        h->min = min;
    if (max > h->max)
        h->max = max;
    return 0;
}

/* The HDR histogram against distributions whose percentiles are known. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench/hdr.h"
#include "bench/json.h"
#include "unit.h"

/* |got - want| <= rel * want */
static int near(double got, double want, double rel)
{
    return fabs(got - want) <= rel * fabs(want);
}

#define CHECK_NEAR(got, want, rel)                                                  \
    do {                                                                            \
        double g_ = (double)(got), w_ = (double)(want);                             \
        if (!CHECK(near(g_, w_, rel)))                                              \
            UNIT_NOTE("%s = %.6g, want %.6g within %.3g%%", #got, g_, w_, (rel) * 100); \
    } while (0)

TEST(empty)
{
    struct hdr *h = hdr_new();
    CHECK_EQ_U64(hdr_count(h), 0);
    CHECK_EQ_U64(hdr_percentile(h, 50), 0);
    CHECK_EQ_U64(hdr_min(h), 0);
    CHECK_EQ_U64(hdr_max(h), 0);
    CHECK(hdr_mean(h) == 0.0);
    CHECK(hdr_stdev(h) == 0.0);
    hdr_free(h);
}

/* Below 2048 every value has a bucket of its own: exact answers. */
TEST(exact_small_values)
{
    struct hdr *h = hdr_new();
    for (uint64_t v = 1; v <= 1000; v++)
        hdr_record(h, v);
    CHECK_EQ_U64(hdr_count(h), 1000);
    CHECK_EQ_U64(hdr_min(h), 1);
    CHECK_EQ_U64(hdr_max(h), 1000);
    CHECK_EQ_U64(hdr_percentile(h, 50), 500);
    CHECK_EQ_U64(hdr_percentile(h, 90), 900);
    CHECK_EQ_U64(hdr_percentile(h, 99), 990);
    CHECK_EQ_U64(hdr_percentile(h, 99.9), 999);
    CHECK_EQ_U64(hdr_percentile(h, 100), 1000);
    CHECK_EQ_U64(hdr_percentile(h, 0), 1);
    CHECK_NEAR(hdr_mean(h), 500.5, 1e-12);
    CHECK_NEAR(hdr_stdev(h), sqrt((1000.0 * 1000.0 - 1) / 12.0), 1e-9);
    hdr_free(h);
}

/* Three significant digits: a bucket is never wider than 1/1024 of its
 * values, at every magnitude up to HDR_MAX. */
TEST(bucket_precision)
{
    uint64_t v = 1;
    int checked = 0;
    while (v <= HDR_MAX) {
        for (uint64_t d = 0; d < 3; d++) {
            uint64_t x = v + d * (v / 3);
            if (x > HDR_MAX)
                break;
            uint64_t lo = hdr_lowest_equivalent(x), hi = hdr_highest_equivalent(x);
            if (!CHECK(lo <= x && x <= hi))
                UNIT_NOTE("x=%llu lo=%llu hi=%llu", (unsigned long long)x,
                          (unsigned long long)lo, (unsigned long long)hi);
            if (!CHECK((double)(hi - lo + 1) <= (double)x / 1024.0 || hi == lo))
                UNIT_NOTE("x=%llu width=%llu", (unsigned long long)x,
                          (unsigned long long)(hi - lo + 1));
            CHECK_EQ_U64(hdr_lowest_equivalent(hi), lo);
            CHECK_EQ_U64(hdr_lowest_equivalent(hi + 1), hi + 1);
            checked++;
        }
        v = v * 2 + 1;
    }
    CHECK(checked > 100);
}

TEST(uniform_large)
{
    struct hdr *h = hdr_new();
    for (uint64_t v = 1; v <= 1000000; v++)
        hdr_record(h, v);
    CHECK_NEAR(hdr_percentile(h, 50), 500000, 0.001);
    CHECK_NEAR(hdr_percentile(h, 75), 750000, 0.001);
    CHECK_NEAR(hdr_percentile(h, 90), 900000, 0.001);
    CHECK_NEAR(hdr_percentile(h, 99), 990000, 0.001);
    CHECK_NEAR(hdr_percentile(h, 99.9), 999000, 0.001);
    CHECK_NEAR(hdr_percentile(h, 99.99), 999900, 0.001);
    CHECK_EQ_U64(hdr_max(h), 1000000);
    CHECK_NEAR(hdr_mean(h), 500000.5, 1e-12);        /* the sum is exact */
    CHECK_NEAR(hdr_stdev(h), 1000000 / sqrt(12.0), 0.001);
    hdr_free(h);
}

/* Exponential with mean 1 ms, sampled at its quantiles: p = -ln(1 - q) * mean. */
TEST(exponential)
{
    struct hdr *h = hdr_new();
    const int n = 200000;
    const double mean = 1e6;
    for (int i = 0; i < n; i++)
        hdr_record(h, (uint64_t)(-log(1.0 - (i + 0.5) / n) * mean));
    CHECK_NEAR(hdr_percentile(h, 50), mean * log(2.0), 0.002);
    CHECK_NEAR(hdr_percentile(h, 90), mean * log(10.0), 0.002);
    CHECK_NEAR(hdr_percentile(h, 99), mean * log(100.0), 0.002);
    CHECK_NEAR(hdr_percentile(h, 99.9), mean * log(1000.0), 0.002);
    CHECK_NEAR(hdr_mean(h), mean, 0.002);
    CHECK_NEAR(hdr_stdev(h), mean, 0.01);
    hdr_free(h);
}

/* 99% fast, 1% slow: the percentile table must show the step where it is. */
TEST(bimodal)
{
    struct hdr *h = hdr_new();
    hdr_record_n(h, 100000, 9900);    /* 100 us */
    hdr_record_n(h, 10000000, 100);   /* 10 ms */
    CHECK_EQ_U64(hdr_count(h), 10000);
    CHECK_NEAR(hdr_percentile(h, 50), 100000, 0.001);
    CHECK_NEAR(hdr_percentile(h, 99), 100000, 0.001);
    CHECK_NEAR(hdr_percentile(h, 99.5), 10000000, 0.001);
    CHECK_NEAR(hdr_percentile(h, 99.99), 10000000, 0.001);
    CHECK_EQ_U64(hdr_max(h), 10000000);
    CHECK_EQ_U64(hdr_min(h), 100000);
    CHECK_NEAR(hdr_mean(h), 0.99 * 100000 + 0.01 * 10000000, 1e-12);
    hdr_free(h);
}

TEST(clamps_above_max)
{
    struct hdr *h = hdr_new();
    hdr_record(h, HDR_MAX * 4);
    hdr_record(h, UINT64_MAX);
    CHECK_EQ_U64(hdr_count(h), 2);
    CHECK_EQ_U64(hdr_max(h), HDR_MAX);
    CHECK_EQ_U64(hdr_percentile(h, 50), HDR_MAX);
    hdr_free(h);
}

TEST(merge_equals_single)
{
    struct hdr *a = hdr_new(), *b = hdr_new(), *all = hdr_new();
    for (uint64_t v = 1; v <= 300000; v += 7) {
        hdr_record(v % 2 ? a : b, v * 13);
        hdr_record(all, v * 13);
    }
    hdr_merge(a, b);
    CHECK_EQ_U64(hdr_count(a), hdr_count(all));
    CHECK_EQ_U64(hdr_min(a), hdr_min(all));
    CHECK_EQ_U64(hdr_max(a), hdr_max(all));
    CHECK(hdr_mean(a) == hdr_mean(all));
    CHECK(hdr_stdev(a) == hdr_stdev(all));
    static const double ps[] = {1, 25, 50, 75, 90, 99, 99.9, 99.99, 100};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
        CHECK_EQ_U64(hdr_percentile(a, ps[i]), hdr_percentile(all, ps[i]));
    /* Merging an empty histogram changes nothing, also not min. */
    struct hdr *empty = hdr_new();
    hdr_merge(a, empty);
    CHECK_EQ_U64(hdr_min(a), hdr_min(all));
    hdr_reset(a);
    CHECK_EQ_U64(hdr_count(a), 0);
    CHECK_EQ_U64(hdr_min(a), 0);
    hdr_free(a);
    hdr_free(b);
    hdr_free(all);
    hdr_free(empty);
}

static struct json *dump(const struct hdr *h, const char *unit)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    hdr_write_json(h, unit, f);
    fclose(f);
    char err[128];
    struct json *j = json_parse(text, len, err, sizeof err);
    if (!j)
        fprintf(stderr, "json: %s\n%s\n", err, text);
    free(text);
    return j;
}

TEST(json_round_trip)
{
    struct hdr *h = hdr_new(), *back = hdr_new();
    for (int i = 0; i < 50000; i++)
        hdr_record(h, (uint64_t)(-log(1.0 - (i + 0.5) / 50000) * 2e5) + 1);
    hdr_record(h, 3000000000ULL);
    struct json *j = dump(h, "ns");
    if (!CHECK(j != NULL))
        return;
    char err[128];
    CHECK_EQ_INT(hdr_add_json(back, j, "ns", err, sizeof err), 0);
    CHECK_EQ_U64(hdr_count(back), hdr_count(h));
    CHECK_EQ_U64(hdr_min(back), hdr_min(h));
    CHECK_EQ_U64(hdr_max(back), hdr_max(h));
    CHECK(hdr_mean(back) == hdr_mean(h));
    CHECK(hdr_stdev(back) == hdr_stdev(h));
    static const double ps[] = {50, 75, 90, 99, 99.9, 99.99};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
        CHECK_EQ_U64(hdr_percentile(back, ps[i]), hdr_percentile(h, ps[i]));
    /* Adding it again doubles every count: merging two runs. */
    CHECK_EQ_INT(hdr_add_json(back, j, "ns", err, sizeof err), 0);
    CHECK_EQ_U64(hdr_count(back), 2 * hdr_count(h));
    CHECK_EQ_U64(hdr_percentile(back, 90), hdr_percentile(h, 90));
    /* The wrong unit is refused and leaves the histogram as it was. */
    CHECK_EQ_INT(hdr_add_json(back, j, "us", err, sizeof err), -1);
    CHECK_EQ_U64(hdr_count(back), 2 * hdr_count(h));
    json_free(j);
    hdr_free(h);
    hdr_free(back);
}

TEST(json_refuses_bad_histograms)
{
    static const char *const bad[] = {
        "{\"unit\":\"ns\",\"count\":3,\"min\":1,\"max\":2,\"sum\":4,\"buckets\":[[1,1],[2,1]]}",
        "{\"unit\":\"ns\",\"count\":1,\"min\":1,\"max\":1,\"sum\":1,\"buckets\":[[1]]}",
        "{\"unit\":\"ns\",\"count\":1,\"min\":1,\"max\":1,\"sum\":1,\"buckets\":[[-1,1]]}",
        "{\"unit\":\"ns\",\"count\":1,\"min\":1,\"max\":1,\"buckets\":[[1,1]]}",
        "{\"unit\":\"ns\",\"count\":1,\"min\":5,\"max\":1,\"sum\":1,\"buckets\":[[1,1]]}",
        "{\"count\":1,\"min\":1,\"max\":1,\"sum\":1,\"buckets\":[[1,1]]}",
    };
    struct hdr *h = hdr_new();
    hdr_record(h, 7);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[128];
        struct json *j = json_parse(bad[i], strlen(bad[i]), err, sizeof err);
        if (!CHECK(j != NULL))
            continue;
        if (!CHECK_EQ_INT(hdr_add_json(h, j, "ns", err, sizeof err), -1))
            UNIT_NOTE("accepted: %s", bad[i]);
        json_free(j);
    }
    CHECK_EQ_U64(hdr_count(h), 1);
    CHECK_EQ_U64(hdr_max(h), 7);
    hdr_free(h);
}

TEST(json_reader)
{
    static const char text[] =
        " {\"a\": [1, 2.5, -3, 18446744073709551615, 1e3], \"s\": \"x\\\"y\\u00e9\\n\",\n"
        "   \"t\": true, \"f\": false, \"n\": null, \"o\": {}} ";
    char err[128];
    struct json *j = json_parse(text, sizeof text - 1, err, sizeof err);
    if (!CHECK(j != NULL))
        return;
    const struct json *a = json_get(j, "a");
    CHECK(a && a->type == JSON_ARR);
    const struct json *e = a->child;
    CHECK(e->is_u64 && e->u64 == 1);
    e = e->next;
    CHECK(!e->is_u64 && e->num == 2.5);
    e = e->next;
    CHECK(!e->is_u64 && e->num == -3);
    e = e->next;
    CHECK(e->is_u64 && e->u64 == UINT64_MAX);
    e = e->next;
    CHECK(!e->is_u64 && e->num == 1000);
    const struct json *s = json_get(j, "s");
    CHECK(s && s->type == JSON_STR && !strcmp(s->str, "x\"y\xc3\xa9\n"));
    CHECK(json_get(j, "t")->num == 1 && json_get(j, "f")->num == 0);
    CHECK(json_get(j, "n")->type == JSON_NULL);
    CHECK(json_get(j, "o")->type == JSON_OBJ && !json_get(j, "o")->child);
    CHECK(json_get(j, "missing") == NULL);
    json_free(j);
    static const char *const bad[] = {"", "{", "[1,]", "{\"a\" 1}", "[1] x", "\"\\q\"", "nul", "-"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (!CHECK(json_parse(bad[i], strlen(bad[i]), err, sizeof err) == NULL))
            UNIT_NOTE("accepted: %s", bad[i]);
}

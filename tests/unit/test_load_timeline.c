/* herd load --timeline: slices by time, latency bins that stay within
 * 1/16 of the value they name, and JSON that hdr_add_json reads back with
 * percentiles near the recorded ones. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/hdr.h"
#include "bench/json.h"
#include "bench/load_timeline.h"
#include "unit.h"

TEST(bins_name_their_values_closely)
{
    for (uint64_t v = 0; v < 8; v++)
        CHECK_EQ_U64(tl_bin_value(tl_bin(v)), v);
    uint64_t prev = 0;
    for (uint64_t v = 8; v < (1ULL << 42); v = v * 17 / 16 + 1) {
        uint64_t m = tl_bin_value(tl_bin(v));
        uint64_t d = m > v ? m - v : v - m;
        if (!CHECK(d * 16 <= v))
            UNIT_NOTE("v %llu named %llu", (unsigned long long)v, (unsigned long long)m);
        CHECK(tl_bin(v) >= prev);
        CHECK(tl_bin(v) < TL_BINS);
        prev = tl_bin(v);
    }
    CHECK(tl_bin(UINT64_MAX) < TL_BINS);
}

TEST(events_land_in_their_slice)
{
    struct load_timeline tl, sum;
    int64_t o = 1000000000;
    CHECK_EQ_INT(tl_init(&tl, o, 100000000, 1000000000), 0);
    CHECK_EQ_INT(tl_init(&sum, o, 100000000, 1000000000), 0);
    tl_response(&tl, o + 5, 1000);
    tl_response(&tl, o + 150000000, 3000);
    tl_response(&tl, o + 150000001, 2000);
    tl_error(&tl, o + 250000000, LERR_CLOSED_REUSED);
    tl_response(&tl, o + 3600000000000LL, 1);
    CHECK_EQ_U64(tl.s[0].responses, 1);
    CHECK_EQ_U64(tl.s[1].responses, 2);
    CHECK_EQ_U64(tl.s[1].lat_min, 2000);
    CHECK_EQ_U64(tl.s[1].lat_max, 3000);
    CHECK_EQ_U64(tl.s[2].errors[LERR_CLOSED_REUSED], 1);
    CHECK_EQ_U64(tl.late, 1);
    tl_merge(&sum, &tl);
    tl_merge(&sum, &tl);
    CHECK_EQ_U64(sum.s[1].responses, 4);
    CHECK_EQ_U64(sum.s[1].lat_min, 2000);
    CHECK_EQ_U64(sum.s[2].errors[LERR_CLOSED_REUSED], 2);
    CHECK_EQ_U64(sum.late, 2);
    tl_free(&tl);
    tl_free(&sum);
}

TEST(json_reads_back_as_a_histogram)
{
    struct load_timeline tl;
    int64_t o = 0;
    CHECK_EQ_INT(tl_init(&tl, o, 100000000, 500000000), 0);
    for (uint64_t i = 1; i <= 1000; i++)
        tl_response(&tl, o + 1, i * 1000);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    tl_write_json(&tl, f);
    fclose(f);
    char err[160];
    struct json *j = json_parse(buf, len, err, sizeof err);
    CHECK(j != NULL);
    const struct json *slices = j ? json_get(j, "slices") : NULL;
    CHECK(slices && slices->child && !slices->child->next);
    struct hdr *h = hdr_new();
    if (slices && slices->child)
        CHECK_EQ_INT(hdr_add_json(h, json_get(slices->child, "latency"), "ns", err, sizeof err), 0);
    CHECK_EQ_U64(hdr_count(h), 1000);
    uint64_t p99 = hdr_percentile(h, 99);
    if (!CHECK(p99 >= 990000 * 15 / 16 && p99 <= 990000 * 17 / 16))
        UNIT_NOTE("p99 %llu", (unsigned long long)p99);
    hdr_free(h);
    json_free(j);
    free(buf);
    tl_free(&tl);
}

/* Flag values: sizes, durations, counts. src/cmd is not linked into the
 * tests, so the file is included. */
#include "unit.h"

#include "../../src/cmd/flags.c"

static int size_is(const char *s, uint64_t want)
{
    uint64_t v = 12345;
    return flag_size(s, &v) == 0 && v == want;
}

static int size_bad(const char *s)
{
    uint64_t v = 12345;
    return flag_size(s, &v) == -1;
}

TEST(sizes)
{
    CHECK(size_is("0", 0));
    CHECK(size_is("1", 1));
    CHECK(size_is("512", 512));
    CHECK(size_is("16384", 16384));
    CHECK(size_is("8k", 8192));
    CHECK(size_is("8K", 8192));
    CHECK(size_is("8kb", 8192));
    CHECK(size_is("8KiB", 8192));
    CHECK(size_is("1m", 1048576));
    CHECK(size_is("64M", 64ull << 20));
    CHECK(size_is("2mib", 2ull << 20));
    CHECK(size_is("1g", 1073741824ull));
    CHECK(size_is("3G", 3ull << 30));
    CHECK(size_is("4GB", 4ull << 30));
    CHECK(size_is("0k", 0));
    CHECK(size_is("007", 7));
    /* the largest that fit */
    CHECK(size_is("17179869183g", UINT64_MAX - (1ull << 30) + 1));
    CHECK(size_is("18014398509481983k", UINT64_MAX - 1023));
    CHECK(size_is("10000000000000000000", 10000000000000000000ull));
}

TEST(sizes_bad)
{
    CHECK(size_bad(""));
    CHECK(size_bad(NULL));
    CHECK(size_bad("k"));
    CHECK(size_bad("kb"));
    CHECK(size_bad("8x"));
    CHECK(size_bad("8t"));
    CHECK(size_bad("8kk"));
    CHECK(size_bad("8kib2"));
    CHECK(size_bad("8 k"));
    CHECK(size_bad(" 8"));
    CHECK(size_bad("8 "));
    CHECK(size_bad("8k "));
    CHECK(size_bad("-1"));
    CHECK(size_bad("+1"));
    CHECK(size_bad("1.5k"));
    CHECK(size_bad("1e3"));
    CHECK(size_bad("0x10"));
    CHECK(size_bad("ten"));
    /* overflow */
    CHECK(size_bad("17179869184g"));          /* 2^64 */
    CHECK(size_bad("18014398509481984k"));    /* 2^64 */
    CHECK(size_bad("99999999999999999999"));
    CHECK(size_bad("999999999999999999999999999999"));
}

static int dur_is(const char *s, int64_t want)
{
    int64_t v = 12345;
    return flag_duration_ms(s, &v) == 0 && v == want;
}

static int dur_bad(const char *s)
{
    int64_t v = 12345;
    return flag_duration_ms(s, &v) == -1;
}

TEST(durations)
{
    CHECK(dur_is("15s", 15000));
    CHECK(dur_is("15", 15000)); /* seconds by default */
    CHECK(dur_is("500ms", 500));
    CHECK(dur_is("0", 0));
    CHECK(dur_is("0ms", 0));
    CHECK(dur_is("1ms", 1));
    CHECK(dur_is("2m", 120000));
    CHECK(dur_is("1h", 3600000));
    CHECK(dur_is("24h", 86400000));
    CHECK(dur_is("1000000h", 3600000000000LL));
    CHECK(dur_is("90s", 90000));
}

TEST(durations_bad)
{
    CHECK(dur_bad(""));
    CHECK(dur_bad(NULL));
    CHECK(dur_bad("s"));
    CHECK(dur_bad("ms"));
    CHECK(dur_bad("1.5s"));
    CHECK(dur_bad("15x"));
    CHECK(dur_bad("15 s"));
    CHECK(dur_bad(" 15s"));
    CHECK(dur_bad("15s "));
    CHECK(dur_bad("-1s"));
    CHECK(dur_bad("-1"));
    CHECK(dur_bad("1sec"));
    CHECK(dur_bad("1d"));
    CHECK(dur_bad("1hm"));
    CHECK(dur_bad("1mss"));
    CHECK(dur_bad("1us"));
    /* overflow */
    CHECK(dur_bad("9999999999999999999h"));
    CHECK(dur_bad("99999999999999999999"));
    CHECK(dur_bad("9223372036854775807s"));
    CHECK(dur_bad("9223372036854775807"));
}

static int count_is(const char *s, uint64_t min, uint64_t max, uint64_t want)
{
    uint64_t v = 12345;
    return flag_count(s, min, max, &v) == 0 && v == want;
}

static int count_bad(const char *s, uint64_t min, uint64_t max)
{
    uint64_t v = 12345;
    return flag_count(s, min, max, &v) == -1;
}

TEST(counts)
{
    CHECK(count_is("5", 1, 10, 5));
    CHECK(count_is("1", 1, 10, 1));   /* bounds are inclusive */
    CHECK(count_is("10", 1, 10, 10));
    CHECK(count_is("0", 0, 0, 0));
    CHECK(count_is("65536", 1, 1000000, 65536));
    CHECK(count_is("10000000000000000000", 0, UINT64_MAX, 10000000000000000000ull));
    CHECK(count_is("0010", 1, 10, 10));
}

TEST(counts_bad)
{
    CHECK(count_bad("0", 1, 10));
    CHECK(count_bad("11", 1, 10));
    CHECK(count_bad("1000000", 1, 10));
    CHECK(count_bad("", 1, 10));
    CHECK(count_bad(NULL, 1, 10));
    CHECK(count_bad("5k", 1, 100000)); /* counts take no suffix */
    CHECK(count_bad("5s", 1, 10));
    CHECK(count_bad("-1", 0, 10));
    CHECK(count_bad("+5", 0, 10));
    CHECK(count_bad(" 5", 0, 10));
    CHECK(count_bad("5 ", 0, 10));
    CHECK(count_bad("0x5", 0, 10));
    CHECK(count_bad("5.0", 0, 10));
    CHECK(count_bad("99999999999999999999", 0, UINT64_MAX));
}

/* core/ratelimit.h: at most `burst` lines a period; the lines held back are
 * handed, as a count, to the first caller of the next period. */
#include "unit.h"

#include "core/ratelimit.h"

TEST(burst_then_held_then_counted)
{
    struct ratelimit r = {0};
    unsigned held = 99;
    CHECK(ratelimit_take(&r, 5000, 1000, 2, &held));
    CHECK_EQ_INT(held, 0);
    CHECK(ratelimit_take(&r, 5100, 1000, 2, &held));
    CHECK(!ratelimit_take(&r, 5200, 1000, 2, &held));
    CHECK(!ratelimit_take(&r, 5999, 1000, 2, &held));
    CHECK_EQ_INT(held, 0);
    /* the next period starts at 6000: two lines were held back */
    CHECK(ratelimit_take(&r, 6000, 1000, 2, &held));
    CHECK_EQ_INT(held, 2);
    CHECK(ratelimit_take(&r, 6001, 1000, 2, &held));
    CHECK_EQ_INT(held, 0);
}

/* A period starts with its first line, not on a fixed grid: one line a
 * minute means a minute between two lines, whenever they come. */
TEST(period_starts_at_its_first_line)
{
    struct ratelimit r = {0};
    CHECK(ratelimit_take(&r, 100, 60000, 1, NULL));
    CHECK(!ratelimit_take(&r, 60099, 60000, 1, NULL));
    CHECK(ratelimit_take(&r, 60100, 60000, 1, NULL));
    CHECK(!ratelimit_take(&r, 60101, 60000, 1, NULL));
    /* after a quiet spell the next line passes, and hands over the one held before it */
    unsigned held = 99;
    CHECK(ratelimit_take(&r, 500000, 60000, 1, &held));
    CHECK_EQ_INT(held, 1);
    CHECK(!ratelimit_take(&r, 500001, 60000, 1, &held));
    CHECK(ratelimit_take(&r, 900000, 60000, 1, &held));
    CHECK_EQ_INT(held, 1);
}

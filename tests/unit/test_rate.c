/* The open-loop schedule: due times on a fixed grid, no drift, catch-up
 * after a stall, and latency from due time (coordinated omission). */
#include "bench/hdr.h"
#include "bench/rate.h"
#include "unit.h"

#define MS 1000000LL
#define SEC 1000000000LL

TEST(grid)
{
    struct rate r;
    rate_init(&r, 1000.0, 5 * SEC);
    CHECK_EQ_INT(rate_at(&r, 0), 5 * SEC);
    CHECK_EQ_INT(rate_at(&r, 1), 5 * SEC + MS);
    CHECK_EQ_INT(rate_at(&r, 1000), 6 * SEC);
    CHECK_EQ_U64(rate_due(&r, 5 * SEC - 1), 0);
    CHECK_EQ_U64(rate_due(&r, 5 * SEC), 1);         /* request 0 is due at t0 */
    CHECK_EQ_U64(rate_due(&r, 5 * SEC + MS - 1), 1);
    CHECK_EQ_U64(rate_due(&r, 5 * SEC + MS), 2);
    CHECK_EQ_INT(rate_take(&r), 5 * SEC);
    CHECK_EQ_INT(rate_take(&r), 5 * SEC + MS);
    CHECK_EQ_U64(rate_due(&r, 5 * SEC + MS), 0);
    CHECK_EQ_INT(rate_next(&r), 5 * SEC + 2 * MS);
}

/* An interval that is no whole number of nanoseconds must not drift. */
TEST(no_drift)
{
    struct rate r;
    rate_init(&r, 3.0, 0);
    for (uint64_t k = 0; k <= 3000000; k += 3 * 101) {
        int64_t want = (int64_t)(k / 3) * SEC;
        int64_t got = rate_at(&r, k);
        if (!CHECK(got >= want - 2 && got <= want + 2)) {
            UNIT_NOTE("k=%llu at %lld, want %lld", (unsigned long long)k, (long long)got,
                      (long long)want);
            break;
        }
    }
    rate_init(&r, 7777.0, 0);
    CHECK(rate_at(&r, 7777ULL * 3600) >= 3600 * SEC - 2 && rate_at(&r, 7777ULL * 3600) <= 3600 * SEC + 2);
}

/* rate_due agrees with rate_at at every boundary (brute force). */
TEST(due_matches_schedule)
{
    struct rate r;
    rate_init(&r, 333.3, 12345);
    uint64_t k = 0;
    for (int64_t now = 0; now < 2 * SEC; now += 99991) {
        while (rate_at(&r, k) <= now)
            k++;
        if (!CHECK_EQ_U64(rate_due(&r, now), k))
            break;
        int64_t edge = rate_at(&r, k);
        CHECK_EQ_U64(rate_due(&r, edge), k + 1);
        CHECK_EQ_U64(rate_due(&r, edge - 1), k);
    }
}

/* Connections sharing a rate interleave: together they send exactly on the
 * total rate's grid. */
TEST(share_interleaves)
{
    struct rate c[4];
    for (uint32_t i = 0; i < 4; i++)
        rate_init_share(&c[i], 1000.0, i, 4, 0);
    for (int64_t k = 0; k < 400; k++) {
        struct rate *r = &c[k % 4];
        CHECK_EQ_INT(rate_take(r), k * MS);
    }
    uint64_t due = 0;
    for (int i = 0; i < 4; i++)
        due += rate_due(&c[i], SEC - 1);
    CHECK_EQ_U64(due, 1000 - 400);
}

/* A simulated server answering in 1 ms that stalls for one second in the
 * middle of a 10 s run at 100 requests/s over one connection. Timed from
 * the due time, every request that waited for the stall shows it; timed
 * from the late send, only one does (coordinated omission). */
TEST(coordinated_omission)
{
    struct rate r;
    rate_init(&r, 100.0, 0);
    struct hdr *from_due = hdr_new(), *from_send = hdr_new();
    int64_t now = 0, end = 10 * SEC;
    uint64_t sent = 0;
    while (rate_next(&r) < end) {
        if (now < rate_next(&r))
            now = rate_next(&r);           /* idle until the next one is due */
        CHECK(rate_due(&r, now) >= 1);
        int64_t due = rate_take(&r);
        int64_t service = MS;
        if (now >= 5 * SEC && now < 5 * SEC + 10 * MS)
            service = SEC;                 /* the stall */
        int64_t done = now + service;
        hdr_record(from_due, (uint64_t)(done - due));
        hdr_record(from_send, (uint64_t)(done - now));
        now = done;                        /* one request in flight: wait for it */
        sent++;
    }
    /* Every scheduled request was sent: the backlog after the stall is caught up. */
    CHECK_EQ_U64(sent, 1000);
    CHECK_EQ_U64(hdr_count(from_due), 1000);
    /* About 100 requests were due during the stall: p95 from due time is
     * around half a second, while the uncorrected view sees 1 ms. */
    CHECK(hdr_percentile(from_due, 95) > 400 * MS);
    CHECK(hdr_percentile(from_due, 50) < 2 * MS);
    CHECK(hdr_percentile(from_send, 95) < 2 * MS);
    CHECK(hdr_percentile(from_send, 99.95) >= SEC);
    hdr_free(from_due);
    hdr_free(from_send);
}

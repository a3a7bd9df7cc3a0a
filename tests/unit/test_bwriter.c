/* core/bwriter.c: whole pieces all or nothing, full is sticky, escaped text
 * cut at its budget with the mark and never inside an escape, and nothing
 * ever written at or past cap (a guard region after cap must stay intact,
 * for every cap and budget). */
#include "unit.h"

#include "core/bwriter.h"

#define GUARD 64
static char mem[4096 + GUARD];

/* A writer on mem[0..cap) with a guard pattern after it. */
static void start(struct bw *w, size_t cap)
{
    memset(mem, '#', sizeof mem);
    bw_init(w, mem, cap);
}

static int guard_intact(size_t cap)
{
    for (size_t i = cap; i < cap + GUARD; i++)
        if (mem[i] != '#')
            return 0;
    return 1;
}

TEST(pieces_fit_then_full_is_sticky)
{
    struct bw w;
    start(&w, 10);
    bw_puts(&w, "abc");
    bw_u64(&w, 1234);
    CHECK_STR(w.buf, w.len, "abc1234");
    CHECK(!w.full);
    bw_puts(&w, "wxyz"); /* 4 > 3 left: not appended at all */
    CHECK(w.full);
    CHECK_STR(w.buf, w.len, "abc1234");
    bw_put(&w, "x", 1); /* would fit, but the writer stopped */
    bw_u64(&w, 7);
    bw_escaped(&w, "y", 1, BW_ESC_LOG, 10);
    bw_printf(&w, "%d", 5);
    CHECK_STR(w.buf, w.len, "abc1234");
    CHECK(guard_intact(10));
}

TEST(exact_fit_and_empty_pieces)
{
    struct bw w;
    start(&w, 4);
    bw_put(&w, NULL, 0);
    bw_puts(&w, "abcd");
    CHECK(!w.full);
    CHECK_STR(w.buf, w.len, "abcd");
    bw_puts(&w, "");
    bw_printf(&w, "%s", "");
    bw_escaped(&w, "", 0, BW_ESC_JSON, 0);
    CHECK(!w.full);
    bw_put(&w, "e", 1);
    CHECK(w.full);
    CHECK(guard_intact(4));

    start(&w, 0);
    bw_u64(&w, 0);
    CHECK(w.full);
    CHECK_EQ_U64(w.len, 0);
    CHECK(guard_intact(0));
}

TEST(numbers)
{
    struct bw w;
    start(&w, 64);
    bw_u64(&w, 0);
    bw_put(&w, " ", 1);
    bw_u64(&w, UINT64_MAX);
    CHECK_STR(w.buf, w.len, "0 18446744073709551615");
    start(&w, 19); /* UINT64_MAX has 20 digits */
    bw_u64(&w, UINT64_MAX);
    CHECK(w.full);
    CHECK_EQ_U64(w.len, 0);
    CHECK(guard_intact(19));
}

TEST(printf_needs_room_for_its_nul)
{
    struct bw w;
    start(&w, 8);
    bw_printf(&w, "%s=%d", "ab", 42);
    CHECK_STR(w.buf, w.len, "ab=42");
    bw_printf(&w, "%d", 123); /* 3 bytes, 3 left, but vsnprintf needs 4 */
    CHECK(w.full);
    CHECK_STR(w.buf, w.len, "ab=42");
    CHECK(guard_intact(8));
    start(&w, 8);
    bw_printf(&w, "%s", "0123456789");
    CHECK(w.full);
    CHECK_EQ_U64(w.len, 0);
    CHECK(guard_intact(8));
}

TEST(escapes_log_style)
{
    struct bw w;
    start(&w, 256);
    const char in[] = "a\"b\\c\x01\x1f\x7f\x80\xff ~";
    CHECK(!bw_escaped(&w, in, sizeof in - 1, BW_ESC_LOG, 256));
    CHECK_STR(w.buf, w.len, "a\\x22b\\x5cc\\x01\\x1f\\x7f\\x80\\xff ~");
    CHECK(!w.cut);
}

TEST(escapes_json_style)
{
    struct bw w;
    start(&w, 256);
    const char in[] = "a\"b\\c\x01\n\x7f\xe9 ~";
    CHECK(!bw_escaped(&w, in, sizeof in - 1, BW_ESC_JSON, 256));
    CHECK_STR(w.buf, w.len, "a\\\"b\\\\c\\u0001\\u000a\\u007f\\u00e9 ~");
}

TEST(cut_at_budget_with_mark)
{
    struct bw w;
    start(&w, 256);
    CHECK(bw_escaped(&w, "abcdefghij", 10, BW_ESC_LOG, 8));
    CHECK_STR(w.buf, w.len, "abcde...");
    CHECK(w.cut && !w.full);
    /* exactly the budget: not cut */
    start(&w, 256);
    CHECK(!bw_escaped(&w, "abcdefgh", 8, BW_ESC_LOG, 8));
    CHECK_STR(w.buf, w.len, "abcdefgh");
    CHECK(!w.cut);
    /* never inside an escape: \xff is 4 bytes, so only one fits before the mark */
    start(&w, 256);
    CHECK(bw_escaped(&w, "\xff\xff\xff", 3, BW_ESC_LOG, 10));
    CHECK_STR(w.buf, w.len, "\\xff...");
    start(&w, 256);
    CHECK(bw_escaped(&w, "\x01\x01", 2, BW_ESC_JSON, 11));
    CHECK_STR(w.buf, w.len, "\\u0001...");
    /* a budget under the mark leaves a cut text empty */
    start(&w, 256);
    CHECK(bw_escaped(&w, "abc", 3, BW_ESC_LOG, 2));
    CHECK_EQ_U64(w.len, 0);
    CHECK(bw_escaped(&w, "abcd", 4, BW_ESC_LOG, 3));
    CHECK_STR(w.buf, w.len, "...");
}

TEST(cut_text_that_does_not_fit_the_room_is_not_appended)
{
    struct bw w;
    start(&w, 6);
    bw_puts(&w, "ab");
    bw_escaped(&w, "\xff\xff", 2, BW_ESC_LOG, 100); /* 8 bytes, 4 left */
    CHECK(w.full);
    CHECK_STR(w.buf, w.len, "ab");
    CHECK(guard_intact(6));
}

/* Every cap and budget from 0 to 80 over a text of every byte value:
 * the output stays within cap and budget, is the escaped text or a prefix
 * of it (cut between escapes) plus the mark, and the guard is intact. */
TEST(never_past_cap_or_budget)
{
    char in[256];
    for (int i = 0; i < 256; i++)
        in[i] = (char)i;
    static char full_esc[2][256 * 6];
    static uint8_t boundary[2][256 * 6 + 1]; /* offsets where an escape starts */
    size_t full_len[2];
    for (int e = 0; e < 2; e++) {
        struct bw w;
        bw_init(&w, full_esc[e], sizeof full_esc[e]);
        for (int i = 0; i < 256; i++) {
            boundary[e][w.len] = 1;
            bw_escaped(&w, in + i, 1, (enum bw_esc)e, 6);
        }
        boundary[e][w.len] = 1;
        full_len[e] = w.len;
    }
    CHECK_EQ_U64(full_len[0], 95 - 2 + (256 - 95 + 2) * 4);
    CHECK_EQ_U64(full_len[1], 95 - 2 + 2 * 2 + (256 - 95) * 6);
    for (int e = 0; e < 2; e++)
        for (size_t cap = 0; cap <= 80; cap++)
            for (size_t budget = 0; budget <= 80; budget++) {
                struct bw w;
                start(&w, cap);
                int cut = bw_escaped(&w, in, sizeof in, (enum bw_esc)e, budget);
                int ok = guard_intact(cap) && w.len <= cap && w.len <= budget && cut;
                if (!w.full && w.len >= 3) {
                    size_t kept = w.len - 3;
                    ok = ok && memcmp(w.buf, full_esc[e], kept) == 0 &&
                         memcmp(w.buf + kept, "...", 3) == 0 &&
                         boundary[e][kept];
                } else if (!w.full) {
                    ok = ok && w.len == 0 && budget < 3;
                } else {
                    ok = ok && w.len == 0;
                }
                if (!CHECK(ok)) {
                    UNIT_NOTE("esc %d cap %zu budget %zu: len %zu full %d", e, cap, budget,
                              w.len, w.full);
                    return;
                }
            }
}

/* A tiny unit-test harness: no library, one header, one process per file.
 *
 *   #include "unit.h"
 *   TEST(addition) { CHECK_EQ_INT(1 + 1, 2); }
 *
 * TEST() registers the function (a constructor runs before main) and this
 * header supplies main(), which runs every test in file order, prints each
 * failure as file:line with the values, then "test_x: N checks, F failed",
 * and exits 1 if anything failed. Include it from exactly one .c file. */
#ifndef HERD_TESTS_UNIT_H
#define HERD_TESTS_UNIT_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct unit_test {
    const char *name;
    void (*fn)(void);
};

#define UNIT_MAX_TESTS 256

static struct unit_test unit_tests_[UNIT_MAX_TESTS];
static int unit_ntests_;
static long unit_checks_, unit_failed_;
static const char *unit_current_ = "?";

__attribute__((unused)) static void unit_register_(const char *name, void (*fn)(void))
{
    if (unit_ntests_ == UNIT_MAX_TESTS) {
        fprintf(stderr, "unit.h: more than %d tests\n", UNIT_MAX_TESTS);
        exit(2);
    }
    unit_tests_[unit_ntests_].name = name;
    unit_tests_[unit_ntests_].fn = fn;
    unit_ntests_++;
}

#define TEST(name)                                                            \
    static void test_##name(void);                                            \
    __attribute__((constructor)) static void unit_reg_##name(void)           \
    {                                                                         \
        unit_register_(#name, test_##name);                                   \
    }                                                                         \
    static void test_##name(void)

/* Returns 1 when the check passed, so a test can stop before using a result
 * that is not there: if (!CHECK(n > 0)) return; */
__attribute__((unused)) static int unit_report_(int ok, const char *file, int line)
{
    unit_checks_++;
    if (ok)
        return 1;
    unit_failed_++;
    fprintf(stderr, "%s:%d: [%s] FAILED: ", file, line, unit_current_);
    return 0;
}

/* Prints s[0..len) with C escapes, for failure messages. */
__attribute__((unused)) static void unit_print_bytes_(const char *s, size_t len)
{
    fputc('"', stderr);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            fprintf(stderr, "\\%c", c);
        else if (c >= 0x20 && c < 0x7f)
            fputc(c, stderr);
        else if (c == '\r')
            fputs("\\r", stderr);
        else if (c == '\n')
            fputs("\\n", stderr);
        else
            fprintf(stderr, "\\x%02x", c);
    }
    fputc('"', stderr);
}

#define CHECK(cond)                                                           \
    (unit_report_(!!(cond), __FILE__, __LINE__)                               \
         ? 1                                                                  \
         : (fprintf(stderr, "CHECK(%s)\n", #cond), 0))

#define CHECK_EQ_INT(a, b)                                                    \
    __extension__({                                                           \
        long long unit_a_ = (long long)(a), unit_b_ = (long long)(b);         \
        int unit_ok_ = unit_report_(unit_a_ == unit_b_, __FILE__, __LINE__);  \
        if (!unit_ok_)                                                        \
            fprintf(stderr, "%s == %s: got %lld, want %lld\n", #a, #b,        \
                    unit_a_, unit_b_);                                        \
        unit_ok_;                                                             \
    })

#define CHECK_EQ_U64(a, b)                                                    \
    __extension__({                                                           \
        unsigned long long unit_a_ = (unsigned long long)(a),                 \
                           unit_b_ = (unsigned long long)(b);                 \
        int unit_ok_ = unit_report_(unit_a_ == unit_b_, __FILE__, __LINE__);  \
        if (!unit_ok_)                                                        \
            fprintf(stderr, "%s == %s: got %llu, want %llu\n", #a, #b,        \
                    unit_a_, unit_b_);                                        \
        unit_ok_;                                                             \
    })

/* p[0..len) equals the string literal lit (p may be NULL when len is 0). */
#define CHECK_STR(p, len, lit)                                                \
    __extension__({                                                           \
        const char *unit_p_ = (const char *)(p);                              \
        size_t unit_n_ = (size_t)(len);                                       \
        int unit_ok_ = unit_n_ == sizeof(lit) - 1 &&                          \
                       (unit_n_ == 0 || memcmp(unit_p_, lit, unit_n_) == 0);  \
        if (!unit_report_(unit_ok_, __FILE__, __LINE__)) {                    \
            fprintf(stderr, "%s: got ", #p);                                  \
            if (unit_p_)                                                      \
                unit_print_bytes_(unit_p_, unit_n_);                          \
            else                                                              \
                fprintf(stderr, "NULL (len %zu)", unit_n_);                   \
            fprintf(stderr, ", want ");                                       \
            unit_print_bytes_(lit, sizeof(lit) - 1);                          \
            fputc('\n', stderr);                                              \
        }                                                                     \
        unit_ok_;                                                             \
    })

/* Prints extra context after a failed check: if (!CHECK(x)) UNIT_NOTE(...). */
#define UNIT_NOTE(...)                                                        \
    do {                                                                      \
        fprintf(stderr, "    note: ");                                        \
        fprintf(stderr, __VA_ARGS__);                                         \
        fputc('\n', stderr);                                                  \
    } while (0)

int main(int argc, char **argv)
{
    const char *prog = argc > 0 && argv[0] ? argv[0] : "test";
    const char *slash = strrchr(prog, '/');
    if (slash)
        prog = slash + 1;
    /* Optional filter: run only the tests whose names contain argv[1]. */
    const char *only = argc > 1 ? argv[1] : NULL;
    int ran = 0;
    for (int i = 0; i < unit_ntests_; i++) {
        if (only && !strstr(unit_tests_[i].name, only))
            continue;
        unit_current_ = unit_tests_[i].name;
        long before = unit_failed_;
        unit_tests_[i].fn();
        ran++;
        if (unit_failed_ != before)
            fprintf(stderr, "%s: test %s: %ld failed\n", prog, unit_current_,
                    unit_failed_ - before);
    }
    printf("%s: %ld checks, %ld failed\n", prog, unit_checks_, unit_failed_);
    if (ran == 0) {
        fprintf(stderr, "%s: no test ran\n", prog);
        return 1;
    }
    return unit_failed_ ? 1 : 0;
}

#endif

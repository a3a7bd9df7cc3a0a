#include "http/encoding.h"

#include <stdint.h>
#include <string.h>

const char *const coding_token[CODING_COUNT] = {"br", "zstd", "gzip"};
const char *const coding_suffix[CODING_COUNT] = {".br", ".zst", ".gz"};
const uint8_t coding_token_len[CODING_COUNT] = {2, 4, 4};
const uint8_t coding_suffix_len[CODING_COUNT] = {3, 4, 3};

#define Q_UNLISTED (-1)

/* What a request says about each coding: q in thousandths, or Q_UNLISTED. */
struct prefs {
    int q[CODING_COUNT];
    int identity, star;
};

/* RFC 9110 5.6.2 tchar; GNU range designators keep it a constant table. */
static const uint8_t tchar[256] = {
    ['0' ... '9'] = 1, ['a' ... 'z'] = 1, ['A' ... 'Z'] = 1, ['!'] = 1, ['#'] = 1,
    ['$'] = 1, ['%'] = 1, ['&'] = 1, ['\''] = 1, ['*'] = 1, ['+'] = 1, ['-'] = 1, ['.'] = 1,
    ['^'] = 1, ['_'] = 1, ['`'] = 1, ['|'] = 1, ['~'] = 1,
};

static int is_tchar(unsigned char c) { return tchar[c]; }

/* p[0..n) equals the lowercase word w of the same length, ignoring case. */
static int word_is(const char *p, const char *w, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((p[i] | 0x20) != w[i])
            return 0;
    return 1;
}

/* The slot a coding token names, or NULL for one we have no sidecar for. */
static int *slot_of(struct prefs *pr, const char *t, size_t len)
{
    switch (len) {
    case 1:
        return t[0] == '*' ? &pr->star : NULL;
    case 2:
        return word_is(t, "br", 2) ? &pr->q[CODING_BR] : NULL;
    case 4:
        return word_is(t, "gzip", 4)   ? &pr->q[CODING_GZIP]
               : word_is(t, "zstd", 4) ? &pr->q[CODING_ZSTD]
                                       : NULL;
    case 6:
        return word_is(t, "x-gzip", 6) ? &pr->q[CODING_GZIP] : NULL;
    case 8:
        return word_is(t, "identity", 8) ? &pr->identity : NULL;
    }
    return NULL;
}

/* qvalue = "0" [ "." 0*3DIGIT ] / "1" [ "." 0*3"0" ], in thousandths; -1 if
 * it is not one. */
static int parse_q(const char *p, size_t len)
{
    if (len == 0 || (p[0] != '0' && p[0] != '1') || (len > 1 && p[1] != '.') || len > 5)
        return -1;
    int q = (p[0] - '0') * 1000, scale = 100;
    for (size_t i = 2; i < len; i++, scale /= 10) {
        if (p[i] < '0' || p[i] > '9' || (p[0] == '1' && p[i] != '0'))
            return -1;
        q += (p[i] - '0') * scale;
    }
    return q;
}

/* The parameters after a coding: ";q=0.5" and others (ignored). Returns q
 * (1000 when absent), or -1 when malformed. */
static int parse_params(const char *p, const char *end)
{
    int q = 1000;
    while (p < end) {
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        if (p == end)
            break;
        if (*p++ != ';')
            return -1;
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        const char *name = p;
        while (p < end && is_tchar((unsigned char)*p))
            p++;
        size_t nlen = (size_t)(p - name);
        if (!nlen || p == end || *p++ != '=')
            return -1;
        const char *val = p;
        while (p < end && *p != ';' && *p != ' ' && *p != '\t')
            p++;
        if (nlen == 1 && (name[0] | 0x20) == 'q' && (q = parse_q(val, (size_t)(p - val))) < 0)
            return -1;
    }
    return q;
}

static void parse_value(const char *p, const char *end, struct prefs *pr)
{
    while (p < end) {
        const char *el = p;
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *el_end = comma ? comma : end;
        p = comma ? comma + 1 : end;
        while (el < el_end && (*el == ' ' || *el == '\t'))
            el++;
        const char *tok = el;
        while (el < el_end && is_tchar((unsigned char)*el))
            el++;
        int *slot = slot_of(pr, tok, (size_t)(el - tok));
        if (!slot)
            continue; /* empty, or a coding no sidecar has */
        int q = el == el_end ? 1000 : parse_params(el, el_end);
        if (q >= 0 && *slot == Q_UNLISTED) /* the first mention counts */
            *slot = q;
    }
}

int coding_negotiate(const struct http_str *values, size_t n, unsigned available)
{
    if (n == 0)
        return CODING_IDENTITY;
    struct prefs pr = {.identity = Q_UNLISTED, .star = Q_UNLISTED};
    for (int c = 0; c < CODING_COUNT; c++)
        pr.q[c] = Q_UNLISTED;
    for (size_t i = 0; i < n; i++)
        parse_value(values[i].p, values[i].p + values[i].len, &pr);

    /* Rank = q * 4 + preference, so q decides and the preference breaks
     * ties; an unlisted identity ranks 0, below any acceptable coding. */
    int best = CODING_NONE, best_rank = -1;
    int idq = pr.identity != Q_UNLISTED ? pr.identity : pr.star == 0 ? 0 : Q_UNLISTED;
    if (idq != 0) {
        best = CODING_IDENTITY;
        best_rank = idq == Q_UNLISTED ? 0 : idq * 4;
    }
    for (int c = 0; c < CODING_COUNT; c++) {
        int q = pr.q[c] != Q_UNLISTED ? pr.q[c] : pr.star;
        if (!(available & (1u << c)) || q <= 0)
            continue;
        int rank = q * 4 + (CODING_COUNT - c);
        if (rank > best_rank) {
            best = c;
            best_rank = rank;
        }
    }
    return best;
}

int coding_of_name(const char *name, size_t len)
{
    for (int c = 0; c < CODING_COUNT; c++) {
        size_t n = coding_suffix_len[c];
        if (len > n && memcmp(name + len - n, coding_suffix[c], n) == 0)
            return c;
    }
    return -1;
}

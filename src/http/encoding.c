#include "http/encoding.h"

#include <string.h>

const char *const coding_token[CODING_COUNT] = {"br", "zstd", "gzip"};
const char *const coding_suffix[CODING_COUNT] = {".br", ".zst", ".gz"};

#define Q_UNLISTED (-1)

/* What a request says about each coding: q in thousandths, or Q_UNLISTED. */
struct prefs {
    int q[CODING_COUNT];
    int identity, star;
};

static int is_tchar(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

static int word_is(const char *p, size_t len, const char *lower)
{
    size_t n = strlen(lower);
    if (len != n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((p[i] | 0x20) != lower[i])
            return 0;
    return 1;
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
        if (word_is(name, nlen, "q") && (q = parse_q(val, (size_t)(p - val))) < 0)
            return -1;
    }
    return q;
}

static void note(int *slot, int q)
{
    if (*slot == Q_UNLISTED) /* the first mention counts */
        *slot = q;
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
        size_t tlen = (size_t)(el - tok);
        int q = tlen ? parse_params(el, el_end) : -1;
        if (q < 0)
            continue; /* empty or malformed element */
        if (word_is(tok, tlen, "*"))
            note(&pr->star, q);
        else if (word_is(tok, tlen, "identity"))
            note(&pr->identity, q);
        else if (word_is(tok, tlen, "x-gzip"))
            note(&pr->q[CODING_GZIP], q);
        else
            for (int c = 0; c < CODING_COUNT; c++)
                if (word_is(tok, tlen, coding_token[c]))
                    note(&pr->q[c], q);
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
        size_t n = strlen(coding_suffix[c]);
        if (len > n && memcmp(name + len - n, coding_suffix[c], n) == 0)
            return c;
    }
    return -1;
}

/* libFuzzer target for the pure string functions a request's fields go
 * through: path_normalize (and path_has_dotfile), range_parse,
 * cond_etag_list_matches (weak and strong) and httpdate_parse, all on the
 * same bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "core/httpdate.h"
#include "http/cond.h"
#include "http/path.h"
#include "http/range.h"

#define ENSURE(c)                                                                   \
    do {                                                                            \
        if (!(c))                                                                   \
            __builtin_trap();                                                       \
    } while (0)

/* out[0..n) is a clean absolute path. */
static void check_clean(const char *out, int n)
{
    ENSURE(n >= 1 && out[0] == '/');
    ENSURE(out[n] == '\0' && strlen(out) == (size_t)n); /* no NUL inside */
    for (int i = 0; i < n; i++) {
        if (out[i] != '/')
            continue;
        /* segment starting after this '/' */
        const char *s = out + i + 1;
        int len = 0;
        while (i + 1 + len < n && s[len] != '/')
            len++;
        int more = i + 1 + len < n; /* a '/' follows */
        ENSURE(!(len == 0 && more));                       /* "//" */
        ENSURE(!(len == 1 && s[0] == '.'));                /* "/./" or "/." */
        ENSURE(!(len == 2 && s[0] == '.' && s[1] == '.')); /* "/../" or "/.." */
    }
    ENSURE(strstr(out, "//") == NULL && strstr(out, "/./") == NULL &&
           strstr(out, "/../") == NULL);
    ENSURE(path_has_dotfile(out, (size_t)n) == (strstr(out, "/.") != NULL));
}

static void fuzz_path(const char *in, size_t size)
{
    char big[4096];
    int n = path_normalize(in, size, big, sizeof big);
    ENSURE(n >= 0 || n == -1 || n == PATH_TOO_LONG);
    if (n >= 0) {
        ENSURE((size_t)n < sizeof big);
        ENSURE((size_t)n <= size); /* decoding and resolving only shrink */
        check_clean(big, n);
        /* normalising again changes nothing (when nothing decodes again) */
        if (!memchr(big, '%', (size_t)n)) {
            char again[4096];
            ENSURE(path_normalize(big, (size_t)n, again, sizeof again) == n);
            ENSURE(memcmp(big, again, (size_t)n + 1) == 0);
        }
    }
    /* a tight output buffer on the heap: no write past it, and any success
     * agrees with the big buffer */
    size_t cap = size % 24;
    char *small = malloc(cap ? cap : 1);
    int m = path_normalize(in, size, small, cap);
    if (m >= 0) {
        ENSURE((size_t)m < cap);
        ENSURE(m == n && memcmp(small, big, (size_t)m + 1) == 0);
    }
    /* what is invalid in the room a small buffer had is invalid in any */
    if (m == -1)
        ENSURE(n == -1);
    free(small);
}

static void fuzz_range(const char *in, size_t size)
{
    static const off_t sizes[] = {0, 1, 2, 100, 1000, (off_t)1 << 40, INT64_MAX / 2};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        off_t start = -1, len = -1, fsize = sizes[i];
        enum range_result r = range_parse(in, size, fsize, &start, &len);
        ENSURE(r == RANGE_NONE || r == RANGE_OK || r == RANGE_UNSATISFIABLE);
        if (r == RANGE_OK) {
            ENSURE(start >= 0 && start < fsize);
            ENSURE(len >= 1 && len <= fsize - start);
        }
        if (fsize == 0)
            ENSURE(r != RANGE_OK);
    }
}

static void fuzz_etag(const char *in, size_t size)
{
    static const char etag[] = "\"5f3e-1a2b\"";
    int r = cond_etag_list_matches(in, size, etag, sizeof etag - 1);
    ENSURE(r == 0 || r == 1);
    /* the weak form of the same tag matches the same lists */
    ENSURE(cond_etag_list_matches(in, size, "W/" "\"5f3e-1a2b\"", sizeof etag + 1) == r);
    /* a list holding just the tag matches; so does "*" */
    if (size >= 1 && size <= 64) {
        char l[80];
        ENSURE(cond_etag_list_matches(etag, sizeof etag - 1, etag, sizeof etag - 1) == 1);
        /* the input as an ETag against a list made of it, when quoted */
        if (size >= 2 && in[0] == '"' && in[size - 1] == '"' && !memchr(in + 1, '"', size - 2)) {
            memcpy(l, in, size);
            ENSURE(cond_etag_list_matches(l, size, in, size) == 1);
        }
    }
    /* the input split into an ETag and a list */
    if (size >= 1) {
        size_t k = (unsigned char)in[0] % size;
        r = cond_etag_list_matches(in + k, size - k, in, k);
        ENSURE(r == 0 || r == 1);
        int s = cond_etag_list_matches_strong(in + k, size - k, in, k);
        ENSURE(s == 0 || s == 1);
        ENSURE(!s || r); /* a strong match is a weak one */
    }
}

/* The strong comparison (If-Match) against the weak one on the same list. */
static void fuzz_etag_strong(const char *in, size_t size)
{
    static const char etag[] = "\"5f3e-1a2b\"";
    int weak = cond_etag_list_matches(in, size, etag, sizeof etag - 1);
    int strong = cond_etag_list_matches_strong(in, size, etag, sizeof etag - 1);
    ENSURE(strong == 0 || strong == 1);
    ENSURE(!strong || weak);
    /* without a W/ anywhere there is nothing for the two to differ on */
    if (!memmem(in, size, "W/", 2))
        ENSURE(strong == weak);
    /* a weak tag matches strongly only by "*": whatever the tag, and only
     * where the strong one matches too */
    int weak_tag = cond_etag_list_matches_strong(in, size, "W/\"5f3e-1a2b\"", sizeof etag + 1);
    ENSURE(weak_tag == cond_etag_list_matches_strong(in, size, "W/\"zz\"", 6));
    ENSURE(!weak_tag || strong);
    ENSURE(!weak_tag || memchr(in, '*', size));
    /* a list holding just the tag matches */
    ENSURE(cond_etag_list_matches_strong(etag, sizeof etag - 1, etag, sizeof etag - 1) == 1);
}

static void fuzz_date(const char *in, size_t size)
{
    time_t t;
    if (httpdate_parse(in, size, &t) == 0) {
        char out[HTTPDATE_LEN];
        httpdate_format(t, out);
        time_t back;
        ENSURE(httpdate_parse(out, HTTPDATE_LEN, &back) == 0 && back == t);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *in = (const char *)data;
    fuzz_path(in, size);
    /* the same bytes as a path, whatever the first byte */
    if (size < 4000) {
        char *p = malloc(size + 1);
        p[0] = '/';
        memcpy(p + 1, in, size);
        fuzz_path(p, size + 1);
        free(p);
    }
    fuzz_range(in, size);
    fuzz_etag(in, size);
    fuzz_etag_strong(in, size);
    fuzz_date(in, size);
    return 0;
}

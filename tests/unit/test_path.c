/* path_normalize, path_encode and path_has_dotfile. */
#include "unit.h"

#include "http/path.h"

/* Normalises in (a C string, or len bytes of it) into a buffer of outcap
 * bytes on the heap (so ASan sees a write past it); returns the result and
 * copies the output to got. */
static int norm_cap(const char *in, size_t len, size_t outcap, char *got, size_t gotcap)
{
    char *inb = malloc(len ? len : 1);
    memcpy(inb, in, len);
    char *out = malloc(outcap ? outcap : 1);
    memset(out, 'Z', outcap ? outcap : 1);
    int n = path_normalize(inb, len, out, outcap);
    got[0] = '\0';
    if (n >= 0 && (size_t)n < outcap && (size_t)n < gotcap) {
        memcpy(got, out, (size_t)n + 1);
        if (out[n] != '\0')
            snprintf(got, gotcap, "<not NUL-terminated>");
        else if (strlen(out) != (size_t)n)
            snprintf(got, gotcap, "<length %d but strlen %zu>", n, strlen(out));
    }
    free(out);
    free(inb);
    return n;
}

struct ok_case {
    const char *in, *want;
    int line;
};

#define OK(in, want) {in, want, __LINE__}

static const struct ok_case ok_cases[] = {
    OK("/", "/"),
    OK("/a", "/a"),
    OK("/a/b/c.txt", "/a/b/c.txt"),
    /* "." */
    OK("/./a", "/a"),
    OK("/a/./b", "/a/b"),
    OK("/a/./././b", "/a/b"),
    OK("/.", "/"),
    OK("/a/.", "/a/"),
    /* ".." */
    OK("/a/../b", "/b"),
    OK("/a/b/../c", "/a/c"),
    OK("/a/b/../../c", "/c"),
    OK("/a/..", "/"),
    OK("/a/b/..", "/a/"),
    OK("/a/b/c/../../..", "/"),
    OK("/a/../b/../c/", "/c/"),
    /* not dot segments */
    OK("/...", "/..."),
    OK("/..a", "/..a"),
    OK("/a..", "/a.."),
    OK("/.a", "/.a"),
    OK("/a./b", "/a./b"),
    OK("/a/.../..", "/a/"),
    /* empty segments */
    OK("//", "/"),
    OK("//a", "/a"),
    OK("/a//b", "/a/b"),
    OK("/a///b", "/a/b"),
    OK("/a/b//", "/a/b/"),
    OK("/a//./b", "/a/b"),
    /* a trailing '/' is kept */
    OK("/a/", "/a/"),
    OK("/a/b/", "/a/b/"),
    /* percent-decoding */
    OK("/%41%62c", "/Abc"),
    OK("/a%20b", "/a b"),
    OK("/%7e%7E", "/~~"),
    OK("/%ff", "/\xff"),
    OK("/%25", "/%"),
    OK("/%2541", "/%41"),      /* decoded once only */
    OK("/a%2Fb", "/a/b"),      /* %2F is a separator after decoding */
    OK("/a%2fb", "/a/b"),
    OK("/a%2F%2Fb", "/a/b"),
    OK("/a/%2e/b", "/a/b"),
    OK("/a/%2e%2e/b", "/b"),
    OK("/a/%2E%2e%2fb", "/b"),
    OK("/a/b/.%2e/c", "/a/c"),
    OK("/a/b/%2e./c", "/a/c"),
    OK("/a/b%2f..%2fc", "/a/c"),
    OK("/a%2f%2e%2e", "/"),
};

TEST(normalise_ok)
{
    for (size_t i = 0; i < sizeof ok_cases / sizeof ok_cases[0]; i++) {
        const struct ok_case *c = &ok_cases[i];
        char got[256];
        int n = norm_cap(c->in, strlen(c->in), 256, got, sizeof got);
        int ok = CHECK_EQ_INT(n, (int)strlen(c->want));
        ok &= CHECK(strcmp(got, c->want) == 0);
        if (!ok)
            UNIT_NOTE("case at line %d: \"%s\" -> \"%s\", want \"%s\"", c->line, c->in, got,
                      c->want);
    }
}

struct bad_case {
    const char *in;
    size_t len;
    int line;
};

#define BADP(lit) {lit, sizeof(lit) - 1, __LINE__}

static const struct bad_case bad_cases[] = {
    /* above the root, plain and encoded */
    BADP("/.."),
    BADP("/../"),
    BADP("/../a"),
    BADP("/../etc/passwd"),
    BADP("/a/../.."),
    BADP("/a/../../b"),
    BADP("/a/b/../../../c"),
    BADP("/./.."),
    BADP("//.."),
    BADP("/%2e%2e"),
    BADP("/%2E%2E/etc/passwd"),
    BADP("/.%2e/x"),
    BADP("/%2e./x"),
    BADP("/a/%2e%2e/%2e%2e/x"),
    BADP("/a%2f..%2f..%2fx"),
    BADP("/%2f.."),
    BADP("/a/.%2e/.."),
    /* NUL */
    BADP("/%00"),
    BADP("/a%00b"),
    BADP("/a\0b"),
    BADP("/\0"),
    /* bad or short escapes */
    BADP("/%"),
    BADP("/a%"),
    BADP("/%4"),
    BADP("/a%2"),
    BADP("/%zz"),
    BADP("/%4g"),
    BADP("/%g4"),
    BADP("/%%41"),
    BADP("/% 41"),
    BADP("/%-1"),
    BADP("/%+f"),
    BADP("/%0x"),
    /* not absolute */
    BADP(""),
    BADP("a/b"),
    BADP("."),
    BADP("%2fa"),
};

TEST(normalise_rejects)
{
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        const struct bad_case *c = &bad_cases[i];
        char got[256];
        int n = norm_cap(c->in, c->len, 256, got, sizeof got);
        if (!CHECK_EQ_INT(n, -1))
            UNIT_NOTE("case at line %d gave \"%s\"", c->line, got);
    }
}

TEST(length_not_nul)
{
    /* only len bytes are read: what follows does not matter */
    char got[64];
    CHECK_EQ_INT(norm_cap("/abc/../x", 4, 64, got, sizeof got), 4);
    CHECK(strcmp(got, "/abc") == 0);
    CHECK_EQ_INT(norm_cap("/a%41", 3, 64, got, sizeof got), -1); /* "/a%" */
}

TEST(output_capacity)
{
    char got[64];
    /* "/abc" needs 5 bytes with its NUL */
    CHECK_EQ_INT(norm_cap("/abc", 4, 64, got, sizeof got), 4);
    CHECK_EQ_INT(norm_cap("/abc", 4, 5, got, sizeof got), 4);
    CHECK(strcmp(got, "/abc") == 0);
    CHECK_EQ_INT(norm_cap("/abc", 4, 4, got, sizeof got), PATH_TOO_LONG);
    CHECK_EQ_INT(norm_cap("/abc", 4, 2, got, sizeof got), PATH_TOO_LONG);
    CHECK_EQ_INT(norm_cap("/abc", 4, 1, got, sizeof got), PATH_TOO_LONG);
    CHECK_EQ_INT(norm_cap("/abc", 4, 0, got, sizeof got), PATH_TOO_LONG);
    /* with a trailing '/' */
    CHECK_EQ_INT(norm_cap("/ab/", 4, 5, got, sizeof got), 4);
    CHECK(strcmp(got, "/ab/") == 0);
    CHECK_EQ_INT(norm_cap("/ab/", 4, 4, got, sizeof got), PATH_TOO_LONG);
    /* the root fits in 2 */
    CHECK_EQ_INT(norm_cap("/", 1, 2, got, sizeof got), 1);
    CHECK(strcmp(got, "/") == 0);
    CHECK_EQ_INT(norm_cap("/./", 3, 2, got, sizeof got), 1);
    /* decoding shrinks: the output size is what counts */
    CHECK_EQ_INT(norm_cap("/%41%42%43", 10, 5, got, sizeof got), 4);
    CHECK(strcmp(got, "/ABC") == 0);
    /* long input, big enough buffer */
    char in[3000];
    in[0] = '/';
    memset(in + 1, 'x', sizeof in - 1);
    CHECK_EQ_INT(norm_cap(in, sizeof in, 3001, got, sizeof got), 3000);
    CHECK_EQ_INT(norm_cap(in, sizeof in, 3000, got, sizeof got), PATH_TOO_LONG);
    CHECK_EQ_INT(norm_cap(in, sizeof in, 100, got, sizeof got), PATH_TOO_LONG);
}

/* A plain model of the rules for inputs made of '/', '.', 'a' and 'b':
 * split on '/', drop empty and "." segments, ".." pops (or fails at the
 * root), and the result ends in '/' when the last raw segment was empty,
 * "." or ".." and the result is not the root. */
static int model(const char *in, size_t len, char *out)
{
    size_t starts[64], nseg = 0, o = 0;
    out[o++] = '/';
    size_t i = 1;
    int last_dir = 0;
    while (i <= len) {
        size_t s = i;
        while (i < len && in[i] != '/')
            i++;
        size_t n = i - s;
        last_dir = n == 0 || (n == 1 && in[s] == '.') || (n == 2 && in[s] == '.' && in[s + 1] == '.');
        if (n == 2 && in[s] == '.' && in[s + 1] == '.') {
            if (nseg == 0)
                return -1;
            o = starts[--nseg];
        } else if (n > 0 && !(n == 1 && in[s] == '.')) {
            starts[nseg++] = o;
            memcpy(out + o, in + s, n);
            o += n;
            out[o++] = '/';
        }
        i++;
    }
    if (o > 1 && !last_dir)
        o--;
    out[o] = '\0';
    return (int)o;
}

TEST(matches_model_exhaustive)
{
    /* every string of up to 8 characters over "/.ab" after a leading '/' */
    static const char alpha[] = "/.ab";
    char in[16], want[64], got[64];
    long mismatches = 0, total = 0;
    for (int len = 0; len <= 8; len++) {
        long count = 1;
        for (int k = 0; k < len; k++)
            count *= 4;
        for (long v = 0; v < count; v++) {
            long x = v;
            in[0] = '/';
            for (int k = 0; k < len; k++, x /= 4)
                in[1 + k] = alpha[x % 4];
            size_t n = (size_t)len + 1;
            int w = model(in, n, want);
            int g = norm_cap(in, n, 64, got, sizeof got);
            total++;
            if (w != g || (w >= 0 && strcmp(want, got) != 0)) {
                if (mismatches++ < 5) {
                    CHECK(!"path_normalize differs from the model");
                    UNIT_NOTE("\"%.*s\": got %d \"%s\", want %d \"%s\"", (int)n, in, g, got, w,
                              want);
                }
            }
        }
    }
    CHECK_EQ_INT(mismatches, 0);
    CHECK(total > 80000);
}

TEST(has_dotfile)
{
    CHECK_EQ_INT(path_has_dotfile("/.git", 5), 1);
    CHECK_EQ_INT(path_has_dotfile("/.git/config", 12), 1);
    CHECK_EQ_INT(path_has_dotfile("/a/.htaccess", 12), 1);
    CHECK_EQ_INT(path_has_dotfile("/a/b/.x/c", 9), 1);
    CHECK_EQ_INT(path_has_dotfile("/a/.", 4), 1);
    CHECK_EQ_INT(path_has_dotfile("/", 1), 0);
    CHECK_EQ_INT(path_has_dotfile("/a/b.c", 6), 0);
    CHECK_EQ_INT(path_has_dotfile("/a./b.", 6), 0);
    CHECK_EQ_INT(path_has_dotfile("/index.html", 11), 0);
    CHECK_EQ_INT(path_has_dotfile("/a/", 3), 0);
    /* len bounds the search */
    CHECK_EQ_INT(path_has_dotfile("/a/.x", 3), 0);
    CHECK_EQ_INT(path_has_dotfile("/a/.x", 4), 1);
    CHECK_EQ_INT(path_has_dotfile("", 0), 0);
}

/* Encodes in (len bytes) into a heap buffer of exactly outcap bytes (so
 * ASan sees a write past it); the result is copied to got as a C string. */
static int enc_cap(const char *in, size_t len, size_t outcap, char *got, size_t gotcap)
{
    char *out = malloc(outcap ? outcap : 1);
    int n = path_encode(in, len, out, outcap);
    got[0] = '\0';
    if (n >= 0 && (size_t)n < gotcap) {
        memcpy(got, out, (size_t)n);
        got[n] = '\0';
    }
    free(out);
    return n;
}

TEST(encode_for_location)
{
    static const struct {
        const char *in, *want;
    } cases[] = {
        {"/", "/"},
        {"/about", "/about"},
        {"/a/b-c_d.e~f", "/a/b-c_d.e~f"},
        {"/!$&'()*+,;=:@", "/!$&'()*+,;=:@"},   /* sub-delims, ':' and '@' stay */
        {"/a b", "/a%20b"},
        {"/%", "/%25"},                          /* a decoded '%' is encoded again */
        {"/%41", "/%2541"},
        {"/a?b#c", "/a%3Fb%23c"},                /* would end the path */
        {"/\\evil", "/%5Cevil"},                 /* browsers read "/\\" as "//" */
        {"/a\r\nSet-Cookie: x=1", "/a%0D%0ASet-Cookie:%20x=1"},
        {"/\t\x01\x7f", "/%09%01%7F"},
        {"/caf\xc3\xa9", "/caf%C3%A9"},
        {"/\xff", "/%FF"},
        {"/{}|^`\"<>[]", "/%7B%7D%7C%5E%60%22%3C%3E%5B%5D"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char got[256];
        int n = enc_cap(cases[i].in, strlen(cases[i].in), 256, got, sizeof got);
        if (!CHECK_EQ_INT(n, (int)strlen(cases[i].want)) || !CHECK(strcmp(got, cases[i].want) == 0))
            UNIT_NOTE("\"%s\" -> \"%s\", want \"%s\"", cases[i].in, got, cases[i].want);
    }
    /* an embedded NUL is encoded too (len, not strlen, bounds the input) */
    char got[64];
    CHECK_EQ_INT(enc_cap("/a\0b", 4, 64, got, sizeof got), 6);
    CHECK(strcmp(got, "/a%00b") == 0);
}

TEST(encode_capacity)
{
    char got[64];
    CHECK_EQ_INT(enc_cap("/ab", 3, 3, got, sizeof got), 3);
    CHECK_EQ_INT(enc_cap("/ab", 3, 2, got, sizeof got), -1);
    CHECK_EQ_INT(enc_cap("/ ", 2, 4, got, sizeof got), 4);
    CHECK(strcmp(got, "/%20") == 0);
    CHECK_EQ_INT(enc_cap("/ ", 2, 3, got, sizeof got), -1); /* no half escape */
    CHECK_EQ_INT(enc_cap("/ ", 2, 0, got, sizeof got), -1);
    CHECK_EQ_INT(enc_cap("", 0, 0, got, sizeof got), 0);
    /* the worst case is three bytes per byte */
    char in[4096];
    memset(in, '{', sizeof in);
    in[0] = '/';
    CHECK_EQ_INT(enc_cap(in, sizeof in, 3 * sizeof in, got, 0), 1 + 3 * 4095);
    CHECK_EQ_INT(enc_cap(in, sizeof in, 3 * sizeof in - 3, got, 0), -1);
}

/* Whatever a normalised path holds, its encoding is a safe Location: no
 * "//" at the start, no "." or ".." segment, no byte outside the URI
 * characters, and decoding it gives the path back. */
TEST(encode_normalised_is_safe_location)
{
    static const char *const raw[] = {
        "//evil.example/../about", "/%2F%2Fevil/", "/%5Cevil", "/./x", "/a/../b",
        "/%2e%2e%2fx/..%2f%2e/y", "/dir%0D%0ALocation:%20//evil", "/%00", "/%C3%A9/%25",
        "/%2F/%2F/%5C%5C", "/a/%2e/b/%2E%2E/c",
    };
    for (size_t i = 0; i < sizeof raw / sizeof raw[0]; i++) {
        char norm[256], loc[768];
        int n = norm_cap(raw[i], strlen(raw[i]), 256, norm, sizeof norm);
        if (n < 0)
            continue; /* refused (NUL, above the root): never redirected */
        int m = path_encode(norm, (size_t)n, loc, sizeof loc - 1);
        if (!CHECK(m > 0))
            continue;
        loc[m] = '\0';
        int ok = CHECK(loc[0] == '/' && loc[1] != '/' && loc[1] != '\\');
        ok &= CHECK(strstr(loc, "/./") == NULL && strstr(loc, "/../") == NULL);
        size_t k = strlen(loc);
        ok &= CHECK(!(k >= 2 && strcmp(loc + k - 2, "/.") == 0) &&
                    !(k >= 3 && strcmp(loc + k - 3, "/..") == 0));
        for (int j = 0; j < m; j++)
            ok &= CHECK(loc[j] > 0x20 && loc[j] < 0x7f && !strchr("\\\"<>`{}|^ ?#", loc[j]));
        char back[256];
        ok &= CHECK_EQ_INT(norm_cap(loc, (size_t)m, 256, back, sizeof back), n);
        ok &= CHECK(strcmp(back, norm) == 0);
        if (!ok)
            UNIT_NOTE("\"%s\" -> \"%s\" -> \"%s\"", raw[i], norm, loc);
    }
}

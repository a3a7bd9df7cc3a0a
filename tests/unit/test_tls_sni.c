/* tls_sni_from_ext: the host name of a raw server_name extension, read
 * before OpenSSL parses it, so every malformed body must come out as "no
 * name" without reading past it; and the name matching of --tls-sni. */
#include "unit.h"

#include "net/tls_sni.h"

/* A server_name extension body with one entry of type t holding name. */
static size_t ext_of(unsigned char *b, unsigned t, const char *name, size_t n)
{
    b[0] = (unsigned char)((n + 3) >> 8);
    b[1] = (unsigned char)(n + 3);
    b[2] = (unsigned char)t;
    b[3] = (unsigned char)(n >> 8);
    b[4] = (unsigned char)n;
    memcpy(b + 5, name, n);
    return n + 5;
}

/* Parses a copy of exactly len bytes, so reading past it is an ASan error. */
static int parse_exact(const unsigned char *b, size_t len, char *out)
{
    unsigned char *c = malloc(len ? len : 1);
    memcpy(c, b, len);
    int n = tls_sni_from_ext(c, len, out);
    free(c);
    return n;
}

TEST(a_host_name)
{
    unsigned char b[600];
    char out[TLS_SNI_MAX + 1];
    size_t len = ext_of(b, 0, "a.test", 6);
    CHECK_EQ_INT(parse_exact(b, len, out), 6);
    CHECK(strcmp(out, "a.test") == 0);
    /* the absolute form is the same host */
    len = ext_of(b, 0, "a.test.", 7);
    CHECK_EQ_INT(parse_exact(b, len, out), 6);
    CHECK(strcmp(out, "a.test") == 0);
    /* every shorter prefix is malformed, and nothing is read past it */
    for (size_t k = 0; k < len; k++)
        CHECK_EQ_INT(parse_exact(b, k, out), -1);
}

TEST(names_that_are_no_name)
{
    unsigned char b[600];
    char out[TLS_SNI_MAX + 1];
    CHECK_EQ_INT(parse_exact(b, ext_of(b, 0, "", 0), out), -1);
    CHECK_EQ_INT(parse_exact(b, ext_of(b, 0, ".", 1), out), -1);
    CHECK_EQ_INT(parse_exact(b, ext_of(b, 0, "a\0b", 3), out), -1);
    char big[300];
    memset(big, 'a', sizeof big);
    CHECK_EQ_INT(parse_exact(b, ext_of(b, 0, big, 255), out), 255);
    CHECK_EQ_INT(parse_exact(b, ext_of(b, 0, big, 256), out), -1);
    /* 255 letters and the trailing dot: 255 */
    big[255] = '.';
    CHECK_EQ_INT(parse_exact(b, ext_of(b, 0, big, 256), out), 255);
    /* another type only */
    CHECK_EQ_INT(parse_exact(b, ext_of(b, 7, "a.test", 6), out), -1);
    /* a list length that disagrees with the body */
    size_t len = ext_of(b, 0, "a.test", 6);
    b[1]++;
    CHECK_EQ_INT(parse_exact(b, len, out), -1);
    b[1] -= 2;
    CHECK_EQ_INT(parse_exact(b, len, out), -1);
    /* an entry longer than the list */
    len = ext_of(b, 0, "a.test", 6);
    b[4] = 7;
    CHECK_EQ_INT(parse_exact(b, len, out), -1);
    b[3] = 0xff;
    CHECK_EQ_INT(parse_exact(b, len, out), -1);
}

TEST(the_first_host_name_after_other_types)
{
    unsigned char b[64];
    char out[TLS_SNI_MAX + 1];
    /* list: type 9 "xx", then host_name "h.test" */
    const unsigned char e[] = {0, 14, 9, 0, 2, 'x', 'x', 0, 0, 6, 'h', '.', 't', 'e', 's', 't'};
    memcpy(b, e, sizeof e);
    CHECK_EQ_INT(parse_exact(b, sizeof e, out), 6);
    CHECK(strcmp(out, "h.test") == 0);
    for (size_t k = 0; k < sizeof e; k++)
        CHECK_EQ_INT(parse_exact(b, k, out), -1);
}

TEST(every_byte_pattern_of_a_short_body_stays_inside)
{
    /* all 3-byte bodies and a sample of 6-byte ones: never a crash, a
     * result within the body */
    char out[TLS_SNI_MAX + 1];
    unsigned char b[6];
    for (unsigned v = 0; v < 1u << 24; v += 61) {
        b[0] = (unsigned char)(v >> 16);
        b[1] = (unsigned char)(v >> 8);
        b[2] = (unsigned char)v;
        int n = parse_exact(b, 3, out);
        if (!CHECK(n == -1))
            return;
    }
    for (unsigned v = 0; v < 200000; v++) {
        unsigned x = v * 2654435761u;
        b[0] = 0;
        b[1] = 4;
        b[2] = (unsigned char)(x & 1 ? 0 : x);
        b[3] = 0;
        b[4] = (unsigned char)(x >> 8) & 3;
        b[5] = (unsigned char)(x >> 16);
        int n = parse_exact(b, 6, out);
        if (!CHECK(n == -1 || (n >= 1 && n <= 1)))
            return;
    }
}

TEST(name_matching)
{
    CHECK(tls_sni_name_matches("a.test", "A.TEST"));
    CHECK(!tls_sni_name_matches("a.test", "b.test"));
    CHECK(tls_sni_name_matches("*.test", "x.test"));
    CHECK(!tls_sni_name_matches("*.test", "test"));
    CHECK(!tls_sni_name_matches("*.test", ".test"));
    CHECK(!tls_sni_name_matches("*.test", "a.b.test"));
}

static int valid(const char *n)
{
    return tls_sni_name_valid(n, strlen(n));
}

TEST(names_sni_takes)
{
    CHECK(valid("a.test") && valid("A-1.Test") && valid("*.test") && valid("localhost"));
    CHECK(valid("xn--bcher-kva.example") && valid("1.2.3.4"));
    /* a trailing dot would never match: the client's name loses its own */
    CHECK(!valid("c.test.") && !valid("*") && !valid("**.test") && !valid("*.") && !valid(""));
    CHECK(!valid("a b.test") && !valid("a..test") && !valid(".a.test") && !valid("-a.test"));
    CHECK(!valid("a-.test") && !valid("a_b.test") && !valid("a.*.test") && !valid("a\r\n.test"));
    CHECK(!tls_sni_name_valid("a\0b", 3));
    char label[80];
    memset(label, 'x', 63);
    label[63] = 0;
    CHECK(valid(label));
    memset(label, 'x', 64);
    label[64] = 0;
    CHECK(!valid(label));
    char longname[300];
    size_t n = 0;
    while (n + 10 < sizeof longname) {
        memcpy(longname + n, "abcdefgh.", 9);
        n += 9;
    }
    memcpy(longname + n, "z", 2);
    CHECK(strlen(longname) > 255 && !valid(longname));
}

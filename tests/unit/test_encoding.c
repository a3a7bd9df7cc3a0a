/* Accept-Encoding negotiation (RFC 9110 12.5.3) between a file and its
 * precompressed sidecars: q-values, "*", identity refused, ties. */
#include "unit.h"

#include "http/encoding.h"

#define ALL ((1u << CODING_BR) | (1u << CODING_ZSTD) | (1u << CODING_GZIP))
#define GZ (1u << CODING_GZIP)
#define BR (1u << CODING_BR)
#define ZS (1u << CODING_ZSTD)
#define ID CODING_IDENTITY
#define NONE CODING_NONE

static int nego(const char *ae, unsigned avail)
{
    struct http_str v = {ae, (uint32_t)strlen(ae)};
    return coding_negotiate(&v, 1, avail);
}

static const struct {
    const char *ae;
    unsigned avail;
    int want;
} table[] = {
    /* plain lists: preference br > zstd > gzip at equal q */
    {"gzip", ALL, CODING_GZIP},
    {"br", ALL, CODING_BR},
    {"zstd", ALL, CODING_ZSTD},
    {"gzip, deflate, br, zstd", ALL, CODING_BR},
    {"gzip, zstd", ALL, CODING_ZSTD},
    {"gzip, deflate, br", GZ, CODING_GZIP},
    {"GZIP", ALL, CODING_GZIP},
    {"x-gzip", GZ, CODING_GZIP},
    {"deflate", ALL, ID},
    {"br", GZ, ID},
    {"gzip", 0, ID},
    /* q-values */
    {"br;q=0.5, gzip", ALL, CODING_GZIP},
    {"br;q=0.9, gzip;q=0.8", ALL, CODING_BR},
    {"br; q=0.1, gzip ;q=0.2, zstd;Q=0.15", ALL, CODING_GZIP},
    {"br;q=1.000, gzip;q=1", ALL, CODING_BR},
    {"gzip;q=0", ALL, ID},
    {"gzip;q=0.000, br", GZ, ID},
    {"gzip;q=0.001", GZ, CODING_GZIP},
    {"gzip;q=0.", GZ, ID},
    /* malformed q: the element is ignored */
    {"gzip;q=2", GZ, ID},
    {"gzip;q=1.5", GZ, ID},
    {"gzip;q=0.1234", GZ, ID},
    {"gzip;q=abc, br", ALL, CODING_BR},
    {"gzip;q", GZ, ID},
    {"gzip;level=9", GZ, CODING_GZIP},
    /* identity */
    {"identity", ALL, ID},
    {"identity;q=0.5, gzip", ALL, CODING_GZIP},
    {"identity, gzip;q=0.5", ALL, ID},
    {"gzip, identity", ALL, CODING_GZIP},
    {"identity;q=0", ALL, NONE},
    {"identity;q=0, gzip", ALL, CODING_GZIP},
    {"identity;q=0, br", GZ, NONE},
    {"identity;q=0", 0, NONE},
    /* "*" */
    {"*", ALL, CODING_BR},
    {"*", GZ, CODING_GZIP},
    {"*", 0, ID},
    {"*;q=0", ALL, NONE},
    {"*;q=0, identity", ALL, ID},
    {"*;q=0, gzip", ALL, CODING_GZIP},
    {"br;q=0, *", ALL, CODING_ZSTD},
    {"br;q=0, *;q=0.5, gzip", ALL, CODING_GZIP},
    {"*;q=0.5, identity", GZ, ID},
    /* empty and odd lists */
    {"", ALL, ID},
    {" , ,", ALL, ID},
    {",gzip,", GZ, CODING_GZIP},
    {"gzip;;q=1", GZ, ID},
    {"br gzip", ALL, ID},
};

TEST(negotiation_table)
{
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (!CHECK_EQ_INT(nego(table[i].ae, table[i].avail), table[i].want))
            UNIT_NOTE("Accept-Encoding: %s (available %#x)", table[i].ae, table[i].avail);
}

TEST(no_header_means_identity)
{
    CHECK_EQ_INT(coding_negotiate(NULL, 0, ALL), ID);
}

TEST(several_header_lines_are_one_list)
{
    struct http_str v[2] = {{"identity;q=0", 12}, {"gzip", 4}};
    CHECK_EQ_INT(coding_negotiate(v, 2, ALL), CODING_GZIP);
    struct http_str w[2] = {{"br;q=0.2", 8}, {"gzip;q=0.3", 10}};
    CHECK_EQ_INT(coding_negotiate(w, 2, ALL), CODING_GZIP);
}

TEST(value_is_not_read_past_its_length)
{
    /* "gzip" followed by bytes that are not part of the value */
    struct http_str v = {"gzip;q=0.5br", 4};
    CHECK_EQ_INT(coding_negotiate(&v, 1, ALL), CODING_GZIP);
    struct http_str w = {"gzip;q=0", 7}; /* "gzip;q=": malformed */
    CHECK_EQ_INT(coding_negotiate(&w, 1, ALL), ID);
}

TEST(sidecar_names)
{
    CHECK_EQ_INT(coding_of_name("a.css.gz", 8), CODING_GZIP);
    CHECK_EQ_INT(coding_of_name("a.css.br", 8), CODING_BR);
    CHECK_EQ_INT(coding_of_name("a.zst", 5), CODING_ZSTD);
    CHECK_EQ_INT(coding_of_name("a.css", 5), -1);
    CHECK_EQ_INT(coding_of_name(".gz", 3), -1);
    CHECK_EQ_INT(coding_of_name("agz", 3), -1);
}

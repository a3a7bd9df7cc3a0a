/* pp_parse: v1 and v2 headers, every split point (a header may
 * arrive in pieces), and the malformed ones a listener must refuse. */
#include "unit.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include "http/pp.h"

static void check_v4(const struct pp_info *p, const char *src, int sport, const char *dst,
                     int dport)
{
    const struct sockaddr_in *s = (const void *)&p->src, *d = (const void *)&p->dst;
    char a[INET_ADDRSTRLEN], b[INET_ADDRSTRLEN];
    CHECK_EQ_INT(p->local, 0);
    CHECK_EQ_INT(s->sin_family, AF_INET);
    inet_ntop(AF_INET, &s->sin_addr, a, sizeof a);
    inet_ntop(AF_INET, &d->sin_addr, b, sizeof b);
    CHECK(!strcmp(a, src));
    CHECK(!strcmp(b, dst));
    CHECK_EQ_INT(ntohs(s->sin_port), sport);
    CHECK_EQ_INT(ntohs(d->sin_port), dport);
}

/* Every proper prefix of a valid header asks for more bytes. */
static void check_prefixes(const char *h, size_t n)
{
    struct pp_info p;
    for (size_t i = 0; i < n; i++)
        if (!CHECK_EQ_INT(pp_parse(h, i, &p), -2))
            fprintf(stderr, "  prefix of %zu bytes\n", i);
}

TEST(v1_tcp4)
{
    const char h[] = "PROXY TCP4 192.0.2.1 198.51.100.7 56324 443\r\nGET / HTTP/1.1\r\n";
    struct pp_info p;
    size_t hl = strlen("PROXY TCP4 192.0.2.1 198.51.100.7 56324 443\r\n");
    CHECK_EQ_INT(pp_parse(h, sizeof h - 1, &p), (int)hl);
    check_v4(&p, "192.0.2.1", 56324, "198.51.100.7", 443);
    check_prefixes(h, hl);
}

TEST(v1_tcp6)
{
    const char h[] = "PROXY TCP6 2001:db8::1 ::1 65535 0\r\n";
    struct pp_info p;
    CHECK_EQ_INT(pp_parse(h, sizeof h - 1, &p), (int)sizeof h - 1);
    const struct sockaddr_in6 *s = (const void *)&p.src;
    char a[INET6_ADDRSTRLEN];
    inet_ntop(AF_INET6, &s->sin6_addr, a, sizeof a);
    CHECK_EQ_INT(p.local, 0);
    CHECK_EQ_INT(s->sin6_family, AF_INET6);
    CHECK(!strcmp(a, "2001:db8::1"));
    CHECK_EQ_INT(ntohs(s->sin6_port), 65535);
}

TEST(v1_unknown_keeps_socket_addresses)
{
    struct pp_info p;
    CHECK_EQ_INT(pp_parse("PROXY UNKNOWN\r\n", 15, &p), 15);
    CHECK_EQ_INT(p.local, 1);
    const char h[] = "PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n";
    CHECK_EQ_INT(pp_parse(h, sizeof h - 1, &p), (int)sizeof h - 1);
    CHECK_EQ_INT(p.local, 1);
}

TEST(v1_malformed)
{
    static const char *bad[] = {
        "GET / HTTP/1.1\r\n\r\n",
        "PROXY\r\n",
        "PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n",            /* LF without CR */
        "PROXY TCP4 1.2.3.4 5.6.7.8 1 2\rX",
        "PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n",            /* three fields */
        "PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n",        /* five */
        "PROXY TCP4 1.2.3.4  5.6.7.8 1 2\r\n",         /* double space */
        "PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n",
        "PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n",         /* leading zero */
        "PROXY TCP4 1.2.3.4 5.6.7.8 -1 2\r\n",
        "PROXY TCP4 ::1 ::1 1 2\r\n",                  /* v6 under TCP4 */
        "PROXY TCP6 1.2.3.4 5.6.7.8 1 2\r\n",          /* v4 under TCP6 */
        "PROXY TCP4 1.2.3 5.6.7.8 1 2\r\n",
        "PROXY UDP4 1.2.3.4 5.6.7.8 1 2\r\n",
        "proxy TCP4 1.2.3.4 5.6.7.8 1 2\r\n",
        "PROXY UNKNOWNX\r\n",
    };
    struct pp_info p;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (!CHECK_EQ_INT(pp_parse(bad[i], strlen(bad[i]), &p), -1))
            fprintf(stderr, "  accepted: %s\n", bad[i]);
}

TEST(v1_too_long_without_crlf)
{
    char h[200];
    memcpy(h, "PROXY UNKNOWN ", 14);
    memset(h + 14, 'a', sizeof h - 14);
    struct pp_info p;
    CHECK_EQ_INT(pp_parse(h, 100, &p), -2);
    CHECK_EQ_INT(pp_parse(h, PP_V1_MAX, &p), -1);
    CHECK_EQ_INT(pp_parse(h, sizeof h, &p), -1);
}

/* The longest line is 107 bytes with its CR LF: 105 before the CR. */
TEST(v1_at_and_past_its_length)
{
    char h[200];
    struct pp_info p;
    for (size_t line = 104; line <= 107; line++) {
        memcpy(h, "PROXY UNKNOWN ", 14);
        memset(h + 14, 'a', line - 14);
        memcpy(h + line, "\r\nGET", 5);
        int want = line + 2 <= PP_V1_MAX ? (int)(line + 2) : -1;
        if (!CHECK_EQ_INT(pp_parse(h, line + 5, &p), want))
            fprintf(stderr, "  line of %zu bytes before CR LF\n", line);
        /* only the CR arrived: a line that can no longer fit is refused */
        int part = line + 2 <= PP_V1_MAX ? -2 : -1;
        CHECK_EQ_INT(pp_parse(h, line + 1, &p), part);
    }
}

static size_t v2(unsigned char *b, int cmd, int fam, const void *addr, size_t alen)
{
    memcpy(b, "\r\n\r\n\0\r\nQUIT\n", 12);
    b[12] = (unsigned char)(0x20 | cmd);
    b[13] = (unsigned char)fam;
    b[14] = (unsigned char)(alen >> 8);
    b[15] = (unsigned char)alen;
    memcpy(b + 16, addr, alen);
    return 16 + alen;
}

TEST(v2_tcp4_with_tlvs)
{
    unsigned char a[12 + 7] = {192, 0, 2, 1, 198, 51, 100, 7, 0xdc, 0x04, 0x01, 0xbb,
                               0x04, 0x00, 0x04, 'a', 'b', 'c', 'd'}; /* + a NOOP TLV */
    unsigned char b[64];
    size_t n = v2(b, 1, 0x11, a, sizeof a);
    b[n] = 'G';
    struct pp_info p;
    CHECK_EQ_INT(pp_parse((char *)b, n + 1, &p), (int)n);
    check_v4(&p, "192.0.2.1", 56324, "198.51.100.7", 443);
    check_prefixes((char *)b, n);
}

TEST(v2_tcp6)
{
    unsigned char a[36] = {0x20, 0x01, 0x0d, 0xb8, [15] = 1, [31] = 1, [32] = 0x30, [33] = 0x39,
                           [35] = 80};
    unsigned char b[64];
    size_t n = v2(b, 1, 0x21, a, sizeof a);
    struct pp_info p;
    CHECK_EQ_INT(pp_parse((char *)b, n, &p), (int)n);
    const struct sockaddr_in6 *s = (const void *)&p.src;
    char t[INET6_ADDRSTRLEN];
    inet_ntop(AF_INET6, &s->sin6_addr, t, sizeof t);
    CHECK(!strcmp(t, "2001:db8::1"));
    CHECK_EQ_INT(ntohs(s->sin6_port), 12345);
    CHECK_EQ_INT(p.local, 0);
}

TEST(v2_local_and_unspec)
{
    unsigned char b[64];
    struct pp_info p;
    size_t n = v2(b, 0, 0x00, "", 0);
    CHECK_EQ_INT(pp_parse((char *)b, n, &p), 16);
    CHECK_EQ_INT(p.local, 1);
    n = v2(b, 1, 0x00, "", 0);
    CHECK_EQ_INT(pp_parse((char *)b, n, &p), 16);
    CHECK_EQ_INT(p.local, 1);
}

TEST(v2_malformed)
{
    unsigned char b[PP_V2_MAX + 64], a[36] = {0};
    struct pp_info p;
    size_t n = v2(b, 1, 0x11, a, 11); /* too short for IPv4 */
    CHECK_EQ_INT(pp_parse((char *)b, n, &p), -1);
    n = v2(b, 1, 0x21, a, 35);
    CHECK_EQ_INT(pp_parse((char *)b, n, &p), -1);
    n = v2(b, 2, 0x11, a, 12); /* command 2 */
    CHECK_EQ_INT(pp_parse((char *)b, n, &p), -1);
    n = v2(b, 1, 0x12, a, 12); /* UDP */
    CHECK_EQ_INT(pp_parse((char *)b, n, &p), -1);
    n = v2(b, 1, 0x11, a, 12);
    b[12] = 0x11; /* version 1 in binary form */
    CHECK_EQ_INT(pp_parse((char *)b, n, &p), -1);
    n = v2(b, 1, 0x11, a, 12);
    b[3] = 'x'; /* broken signature */
    CHECK_EQ_INT(pp_parse((char *)b, n, &p), -1);
    n = v2(b, 1, 0x11, a, 12);
    b[14] = 0xff; /* longer than the cap */
    CHECK_EQ_INT(pp_parse((char *)b, n, &p), -1);
}

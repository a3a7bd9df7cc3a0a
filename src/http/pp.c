#include "http/pp.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>

static const char v2_sig[12] = "\r\n\r\n\0\r\nQUIT\n";

/* A port: decimal 0..65535, no sign, no leading zero. */
static int parse_port(const char *s, size_t n, uint16_t *out)
{
    if (n == 0 || n > 5 || (n > 1 && s[0] == '0'))
        return -1;
    uint32_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (uint32_t)(s[i] - '0');
    }
    if (v > 65535)
        return -1;
    *out = (uint16_t)v;
    return 0;
}

/* Splits "A B C D" (single spaces) into exactly four fields. */
static int split4(const char *s, size_t n, const char *f[4], size_t fl[4])
{
    int k = 0;
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != ' ')
            continue;
        if (k == 4 || i == start)
            return -1;
        f[k] = s + start;
        fl[k++] = i - start;
        start = i + 1;
    }
    return k == 4 ? 0 : -1;
}

static int parse_addr(int family, const char *s, size_t n, uint16_t port,
                      struct sockaddr_storage *ss)
{
    char text[INET6_ADDRSTRLEN];
    if (n >= sizeof text)
        return -1;
    memcpy(text, s, n);
    text[n] = '\0';
    memset(ss, 0, sizeof *ss);
    if (family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)ss;
        in->sin_family = AF_INET;
        in->sin_port = htons(port);
        return inet_pton(AF_INET, text, &in->sin_addr) == 1 ? 0 : -1;
    }
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(port);
    return inet_pton(AF_INET6, text, &in6->sin6_addr) == 1 ? 0 : -1;
}

/* "PROXY TCP4 192.0.2.1 192.0.2.2 56324 443\r\n", "PROXY TCP6 ...\r\n" or
 * "PROXY UNKNOWN ...\r\n". */
static int parse_v1(const char *buf, size_t len, struct pp_info *out)
{
    size_t scan = len < PP_V1_MAX ? len : PP_V1_MAX;
    const char *cr = memchr(buf, '\r', scan), *lf = memchr(buf, '\n', scan);
    if (lf && (!cr || lf < cr))
        return PP_INVALID; /* a bare LF: this is not a v1 line */
    if (!cr)
        return len < PP_V1_MAX ? PP_INCOMPLETE : PP_INVALID;
    size_t line = (size_t)(cr - buf);
    if (line + 2 > PP_V1_MAX) /* the CR LF count: 107 bytes with them */
        return PP_INVALID;
    if (line + 1 >= len)
        return PP_INCOMPLETE;
    if (cr[1] != '\n' || line < 11 || memcmp(buf, "PROXY ", 6))
        return PP_INVALID;
    size_t total = line + 2;
    const char *p = buf + 6;
    size_t n = line - 6;
    if (n >= 7 && !memcmp(p, "UNKNOWN", 7) && (n == 7 || p[7] == ' ')) {
        out->local = 1;
        return (int)total;
    }
    int family;
    if (!memcmp(p, "TCP4 ", 5))
        family = AF_INET;
    else if (!memcmp(p, "TCP6 ", 5))
        family = AF_INET6;
    else
        return PP_INVALID;
    const char *f[4];
    size_t fl[4];
    uint16_t sport, dport;
    if (split4(p + 5, n - 5, f, fl) < 0 || parse_port(f[2], fl[2], &sport) < 0 ||
        parse_port(f[3], fl[3], &dport) < 0 ||
        parse_addr(family, f[0], fl[0], sport, &out->src) < 0 ||
        parse_addr(family, f[1], fl[1], dport, &out->dst) < 0)
        return PP_INVALID;
    out->local = 0;
    return (int)total;
}

/* The binary form: signature, version/command, family/transport, length,
 * addresses, then TLVs (skipped). */
static int parse_v2(const unsigned char *b, size_t len, struct pp_info *out)
{
    if (len < 16)
        return PP_INCOMPLETE;
    unsigned ver = b[12] >> 4, cmd = b[12] & 0xf, fam = b[13];
    size_t alen = (size_t)b[14] << 8 | b[15];
    if (ver != 2 || cmd > 1 || 16 + alen > PP_V2_MAX)
        return PP_INVALID;
    if (len < 16 + alen)
        return PP_INCOMPLETE;
    const unsigned char *a = b + 16;
    out->local = 1;
    if (cmd == 0) /* LOCAL: a health check from the balancer itself */
        return (int)(16 + alen);
    if (fam == 0x11) { /* TCP over IPv4 */
        if (alen < 12)
            return PP_INVALID;
        struct sockaddr_in *s = (struct sockaddr_in *)&out->src, *d = (struct sockaddr_in *)&out->dst;
        memset(&out->src, 0, sizeof out->src);
        memset(&out->dst, 0, sizeof out->dst);
        s->sin_family = d->sin_family = AF_INET;
        memcpy(&s->sin_addr, a, 4);
        memcpy(&d->sin_addr, a + 4, 4);
        memcpy(&s->sin_port, a + 8, 2);
        memcpy(&d->sin_port, a + 10, 2);
        out->local = 0;
    } else if (fam == 0x21) { /* TCP over IPv6 */
        if (alen < 36)
            return PP_INVALID;
        struct sockaddr_in6 *s = (struct sockaddr_in6 *)&out->src, *d = (struct sockaddr_in6 *)&out->dst;
        memset(&out->src, 0, sizeof out->src);
        memset(&out->dst, 0, sizeof out->dst);
        s->sin6_family = d->sin6_family = AF_INET6;
        memcpy(&s->sin6_addr, a, 16);
        memcpy(&d->sin6_addr, a + 16, 16);
        memcpy(&s->sin6_port, a + 32, 2);
        memcpy(&d->sin6_port, a + 34, 2);
        out->local = 0;
    } else if (fam != 0x00 && fam != 0x31) {
        /* UNSPEC and unix stream keep the socket's own addresses; datagram
         * transports cannot have carried this stream. */
        return PP_INVALID;
    }
    return (int)(16 + alen);
}

int pp_parse(const char *buf, size_t len, struct pp_info *out)
{
    if (len == 0)
        return PP_INCOMPLETE;
    if (buf[0] == 'P') {
        size_t k = len < 6 ? len : 6;
        if (memcmp(buf, "PROXY ", k))
            return PP_INVALID;
        return len < 6 ? PP_INCOMPLETE : parse_v1(buf, len, out);
    }
    size_t k = len < sizeof v2_sig ? len : sizeof v2_sig;
    if (memcmp(buf, v2_sig, k))
        return PP_INVALID;
    return parse_v2((const unsigned char *)buf, len, out);
}

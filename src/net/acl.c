#include "net/acl.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

static void mask(uint8_t *addr, unsigned bits, unsigned total)
{
    for (unsigned i = 0; i < total / 8; i++) {
        unsigned keep = bits >= 8 * (i + 1) ? 8 : bits > 8 * i ? bits - 8 * i : 0;
        addr[i] &= (uint8_t)(0xff00u >> keep);
    }
}

int acl_add(struct acl *a, const char *text, char *err, size_t errlen)
{
    if (!strcmp(text, "unix")) {
        a->unix_ok = 1;
        return 0;
    }
    if (a->n == ACL_MAX) {
        snprintf(err, errlen, "status-allow: too many entries (at most %d)", ACL_MAX);
        return -1;
    }
    char host[64];
    const char *slash = strchr(text, '/');
    size_t hlen = slash ? (size_t)(slash - text) : strlen(text);
    struct acl_rule r = {0};
    if (hlen && hlen < sizeof host) {
        memcpy(host, text, hlen);
        host[hlen] = '\0';
        if (inet_pton(AF_INET, host, r.addr) == 1)
            r.family = AF_INET;
        else if (inet_pton(AF_INET6, host, r.addr) == 1)
            r.family = AF_INET6;
    }
    if (!r.family) {
        snprintf(err, errlen,
                 "status-allow: '%s' is not an address, ADDR/BITS or unix "
                 "(e.g. 10.0.0.0/8, ::1, unix)", text);
        return -1;
    }
    unsigned total = r.family == AF_INET ? 32 : 128, bits = total;
    if (slash) {
        const char *b = slash + 1;
        size_t blen = strlen(b);
        unsigned v = 0;
        int ok = blen >= 1 && blen <= 3;
        for (size_t i = 0; ok && i < blen; i++) {
            ok = b[i] >= '0' && b[i] <= '9';
            v = v * 10 + (unsigned)(b[i] - '0');
        }
        if (!ok || v > total) {
            snprintf(err, errlen, "status-allow: bad prefix length in '%s' (0..%u for %s)", text,
                     total, r.family == AF_INET ? "IPv4" : "IPv6");
            return -1;
        }
        bits = v;
    }
    r.bits = (uint8_t)bits;
    mask(r.addr, bits, total);
    a->rules[a->n++] = r;
    return 0;
}

void acl_default_if_empty(struct acl *a)
{
    if (a->n || a->unix_ok)
        return;
    static const char *const loopback[] = {"127.0.0.0/8", "::1", "::ffff:127.0.0.0/104", "unix"};
    char err[128];
    for (size_t i = 0; i < sizeof loopback / sizeof loopback[0]; i++)
        acl_add(a, loopback[i], err, sizeof err);
}

static int rule_matches(const struct acl_rule *r, int family, const uint8_t *addr)
{
    if (r->family != family)
        return 0;
    unsigned full = r->bits / 8, rest = r->bits % 8;
    if (memcmp(r->addr, addr, full) != 0)
        return 0;
    return !rest || ((addr[full] ^ r->addr[full]) & (uint8_t)(0xff00u >> rest)) == 0;
}

int acl_allows(const struct acl *a, int unix_client, const struct sockaddr_storage *peer)
{
    if (unix_client || (peer && peer->ss_family == AF_UNIX))
        return a->unix_ok;
    if (!peer)
        return 0;
    const uint8_t *v4 = NULL, *v6 = NULL;
    if (peer->ss_family == AF_INET) {
        v4 = (const uint8_t *)&((const struct sockaddr_in *)peer)->sin_addr;
    } else if (peer->ss_family == AF_INET6) {
        const struct in6_addr *in6 = &((const struct sockaddr_in6 *)peer)->sin6_addr;
        v6 = in6->s6_addr;
        if (IN6_IS_ADDR_V4MAPPED(in6))
            v4 = v6 + 12;
    } else {
        return 0;
    }
    for (unsigned i = 0; i < a->n; i++)
        if ((v4 && rule_matches(&a->rules[i], AF_INET, v4)) ||
            (v6 && rule_matches(&a->rules[i], AF_INET6, v6)))
            return 1;
    return 0;
}

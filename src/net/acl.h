/* Address access lists, as --status-allow uses them: IPv4 and IPv6 CIDRs
 * plus "unix" for clients of unix-socket listeners. Parsing and matching
 * only; a driver asks once per connection (at accept, and again when a
 * PROXY protocol header names the real client). */
#ifndef HERD_NET_ACL_H
#define HERD_NET_ACL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define ACL_MAX 32

struct acl_rule {
    uint8_t family;    /* AF_INET or AF_INET6 */
    uint8_t bits;      /* prefix length */
    uint8_t addr[16];  /* network order, bits past the prefix cleared */
};

struct acl {
    struct acl_rule rules[ACL_MAX];
    uint8_t n;
    uint8_t unix_ok;   /* unix-socket clients pass */
};

/* Adds "unix", "ADDR" (a /32 or /128) or "ADDR/BITS" (IPv4 or IPv6).
 * Returns 0, or -1 with a one-line reason in err. */
int acl_add(struct acl *a, const char *text, char *err, size_t errlen);

/* An empty list (nothing added) becomes the default: loopback
 * (127.0.0.0/8, ::1, ::ffff:127.0.0.0/104) and unix-socket clients. */
void acl_default_if_empty(struct acl *a);

/* 1 when the client may pass. unix_client: it came through a unix-socket
 * listener (peer is ignored); otherwise peer is its address (AF_UNIX: a
 * unix-socket client too), and NULL (not known) never passes. An IPv4-mapped IPv6 address also matches IPv4 rules. */
int acl_allows(const struct acl *a, int unix_client, const struct sockaddr_storage *peer);

#endif

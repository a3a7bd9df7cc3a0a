/* The PROXY protocol (HAProxy's, versions 1 and 2): the header a fronting
 * load balancer (HAProxy, AWS NLB, another herd) puts before the client's
 * bytes so the server learns the client's real address. Parsing only: no
 * I/O. A listener that expects the header takes nothing else: a connection
 * without a valid one is closed, as the specification requires. */
#ifndef HERD_NET_PROXY_PROTOCOL_H
#define HERD_NET_PROXY_PROTOCOL_H

#include <stddef.h>
#include <sys/socket.h>

/* v1 lines are at most 107 bytes; v2 allows 16 + 65535, but the address
 * block plus the TLVs that load balancers send fit in far less, and a
 * header must fit the connection's input buffer. */
#define PROXY_V1_MAX 107
#define PROXY_V2_MAX (16 + 2048)

struct proxy_info {
    int local;                     /* LOCAL / UNKNOWN: keep the socket's own addresses */
    struct sockaddr_storage src;   /* the client, when !local */
    struct sockaddr_storage dst;
};

/* Returns the header's length (bytes to skip), -2 when more bytes are
 * needed to decide, -1 when buf does not start with a valid header. */
int proxy_protocol_parse(const char *buf, size_t len, struct proxy_info *out);

#endif

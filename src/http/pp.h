/* The PROXY protocol (HAProxy's, versions 1 and 2): the header a fronting
 * load balancer (HAProxy, AWS NLB, another herd) puts before the client's
 * bytes so the server learns the client's real address. Parsing only: no
 * I/O. A listener that expects the header takes nothing else: a connection
 * without a valid one is closed, as the specification requires. */
#ifndef HERD_HTTP_PP_H
#define HERD_HTTP_PP_H

#include <stddef.h>
#include <sys/socket.h>

/* v1 lines are at most 107 bytes; v2 allows 16 + 65535, but the address
 * block plus the TLVs that load balancers send fit in far less, and a
 * header must fit the connection's input buffer. */
#define PP_V1_MAX 107
#define PP_V2_MAX (16 + 2048)

struct pp_info {
    int local;                     /* LOCAL / UNKNOWN: keep the socket's own addresses */
    struct sockaddr_storage src;   /* the client, when !local */
    struct sockaddr_storage dst;
};

/* pp_parse's answers besides a length. */
enum { PP_INVALID = -1, PP_INCOMPLETE = -2 };

/* Returns the header's length (bytes to skip), PP_INCOMPLETE when more
 * bytes are needed to decide, PP_INVALID when buf does not start with a
 * valid header. */
int pp_parse(const char *buf, size_t len, struct pp_info *out);

#endif

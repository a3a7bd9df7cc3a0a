/* Where a benchmark connects: "http://HOST[:PORT][/PATH]",
 * "https://HOST[:PORT][/PATH]" and
 * "unix:/SOCKET[:/PATH]" for herd load, "HOST[:PORT]", "[V6]:PORT" and
 * "unix:/SOCKET" for herd lat. Names are resolved once, here, before any
 * timing starts. */
#ifndef HERD_BENCH_TARGET_H
#define HERD_BENCH_TARGET_H

#include <stddef.h>
#include <sys/socket.h>

#define TARGET_PATH_MAX 4096

struct target {
    struct sockaddr_storage ss;
    socklen_t len;
    int family;                     /* AF_INET, AF_INET6, AF_UNIX */
    char host[300];                 /* the Host header: "name[:port]" or "localhost" */
    char path[TARGET_PATH_MAX];     /* request target, starts with '/' */
    char addr[160];                 /* the resolved address, for messages */
    int tls;                        /* https: */
    char name[256];                 /* https: the host without port, for SNI and the certificate check */
};

/* Parse errors return -1 (a usage error: exit 2); a name that does not
 * resolve returns -2 (exit 1). Both leave a one-line reason in err. */
int target_parse_url(const char *url, struct target *t, char *err, size_t errlen);
int target_parse_addr(const char *s, unsigned short default_port, struct target *t,
                      char *err, size_t errlen);

/* A non-blocking, close-on-exec stream socket for t, with TCP_NODELAY on
 * TCP; the connect is started. Returns the fd (connected, or *pending set
 * when the connect is in progress) or -errno. */
int target_connect_start(const struct target *t, int *pending);

/* Connects and waits up to timeout_ms. Returns a non-blocking fd or -errno
 * (-ETIMEDOUT when the time ran out). */
int target_connect_wait(const struct target *t, int timeout_ms);

#endif

#include "net/listen.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static int parse_port(const char *s, unsigned short *port)
{
    if (!*s || strlen(s) > 5)
        return -1;
    unsigned long v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10 + (unsigned long)(*p - '0');
    }
    if (v > 65535)
        return -1;
    *port = (unsigned short)v;
    return 0;
}

int listen_parse(const char *s, struct listen_addr *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    snprintf(out->text, sizeof out->text, "%s", s);
    if (strncmp(s, "unix:", 5) == 0) {
        struct sockaddr_un *un = (struct sockaddr_un *)&out->ss;
        const char *path = s + 5;
        if (!*path || strlen(path) >= sizeof un->sun_path) {
            snprintf(err, errlen, "bad unix socket path in '%s'", s);
            return -1;
        }
        un->sun_family = AF_UNIX;
        strcpy(un->sun_path, path);
        out->len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(path) + 1);
        out->family = AF_UNIX;
        return 0;
    }
    char host[64];
    const char *colon;
    unsigned short port;
    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (!close || close[1] != ':' || (size_t)(close - s - 1) >= sizeof host)
            goto bad;
        memcpy(host, s + 1, (size_t)(close - s - 1));
        host[close - s - 1] = '\0';
        colon = close + 1;
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&out->ss;
        if (inet_pton(AF_INET6, host, &in6->sin6_addr) != 1 || parse_port(colon + 1, &port))
            goto bad;
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(port);
        out->len = sizeof *in6;
        out->family = AF_INET6;
        return 0;
    }
    colon = strrchr(s, ':');
    if (!colon) {
        /* a bare port means all IPv4 addresses, as in nginx */
        if (parse_port(s, &port))
            goto bad;
        strcpy(host, "0.0.0.0");
    } else {
        if ((size_t)(colon - s) >= sizeof host)
            goto bad;
        memcpy(host, s, (size_t)(colon - s));
        host[colon - s] = '\0';
        if (parse_port(colon + 1, &port))
            goto bad;
        if (strcmp(host, "localhost") == 0)
            strcpy(host, "127.0.0.1");
        if (strcmp(host, "*") == 0)
            strcpy(host, "0.0.0.0");
    }
    struct sockaddr_in *in = (struct sockaddr_in *)&out->ss;
    if (inet_pton(AF_INET, host, &in->sin_addr) != 1)
        goto bad;
    in->sin_family = AF_INET;
    in->sin_port = htons(port);
    out->len = sizeof *in;
    out->family = AF_INET;
    return 0;
bad:
    snprintf(err, errlen,
             "bad listen address '%s' (want HOST:PORT, [V6]:PORT or unix:/path)", s);
    return -1;
}

/* A unix socket file left by a server that died: connecting is refused. */
static int unix_path_is_stale(const struct listen_addr *a)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    int rc = connect(fd, (const struct sockaddr *)&a->ss, a->len);
    int err = errno;
    close(fd);
    return rc < 0 && err == ECONNREFUSED;
}

int listen_unix_path_free(const struct listen_addr *a)
{
    const char *path = ((const struct sockaddr_un *)&a->ss)->sun_path;
    struct stat st;
    if (lstat(path, &st) < 0)
        return 0;
    /* Only a dead server's socket is ours to replace: connecting to a
     * regular file or a FIFO is refused too, and unlinking it would
     * delete someone's data (a typo in --listen). */
    if (!S_ISSOCK(st.st_mode))
        return -EEXIST;
    if (!unix_path_is_stale(a))
        return -EADDRINUSE;
    unlink(path);
    return 0;
}

void listen_nodelay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* A socket for a with the options every listener has; -errno on failure. */
static int listen_socket(const struct listen_addr *a, int reuseport)
{
    int fd = socket(a->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    if (a->family != AF_UNIX)
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (reuseport && a->family != AF_UNIX &&
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    if (a->family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (a->family != AF_UNIX)
        listen_nodelay(fd);
    return fd;
}

int listen_probe(struct listen_addr *a)
{
    int fd = listen_socket(a, 0);
    if (fd < 0)
        return fd;
    if (bind(fd, (struct sockaddr *)&a->ss, a->len) < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    a->len = sizeof a->ss;
    getsockname(fd, (struct sockaddr *)&a->ss, &a->len);
    return fd;
}

int listen_open(struct listen_addr *a, int backlog, int reuseport)
{
    int fd = listen_socket(a, reuseport);
    if (fd < 0)
        return fd;
    if (a->family == AF_UNIX) {
        int rc = listen_unix_path_free(a);
        if (rc < 0) {
            close(fd);
            return rc;
        }
    }
    if (bind(fd, (struct sockaddr *)&a->ss, a->len) < 0 || listen(fd, backlog) < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    if (a->family != AF_UNIX) {
        a->len = sizeof a->ss;
        getsockname(fd, (struct sockaddr *)&a->ss, &a->len);
    }
    return fd;
}

void listen_cleanup(const struct listen_addr *a)
{
    if (a->family == AF_UNIX)
        unlink(((const struct sockaddr_un *)&a->ss)->sun_path);
}

void listen_describe(const struct listen_addr *a, char *buf, size_t n)
{
    char host[INET6_ADDRSTRLEN];
    if (a->family == AF_UNIX) {
        snprintf(buf, n, "unix:%s", ((const struct sockaddr_un *)&a->ss)->sun_path);
    } else if (a->family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&a->ss;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
        snprintf(buf, n, "http://[%s]:%u/", host, ntohs(in6->sin6_port));
    } else {
        const struct sockaddr_in *in = (const struct sockaddr_in *)&a->ss;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
        snprintf(buf, n, "http://%s:%u/", host, ntohs(in->sin_port));
    }
}

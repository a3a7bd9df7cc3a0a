#include "bench/target.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/un.h>
#include <unistd.h>

static int set_unix(struct target *t, const char *path, size_t n, char *err, size_t errlen)
{
    struct sockaddr_un *un = (struct sockaddr_un *)&t->ss;
    if (!n || path[0] != '/' || n >= sizeof un->sun_path) {
        snprintf(err, errlen, "bad unix socket path (want unix:/absolute/path, under %zu bytes)",
                 sizeof un->sun_path);
        return -1;
    }
    un->sun_family = AF_UNIX;
    memcpy(un->sun_path, path, n);
    un->sun_path[n] = '\0';
    t->len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
    t->family = AF_UNIX;
    snprintf(t->host, sizeof t->host, "localhost");
    snprintf(t->addr, sizeof t->addr, "unix:%s", un->sun_path);
    return 0;
}

static int parse_port(const char *s, size_t n, unsigned short *port)
{
    if (!n || n > 5)
        return -1;
    unsigned v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    if (!v || v > 65535)
        return -1;
    *port = (unsigned short)v;
    return 0;
}

static int is_localhost(const char *name)
{
    size_t n = strlen(name);
    if (n && name[n - 1] == '.')
        n--; /* the root's dot */
    return (n == 9 && !strncasecmp(name, "localhost", 9)) ||
           (n > 10 && !strncasecmp(name + n - 10, ".localhost", 10));
}

/* host[len] and a port: resolve (numeric addresses need no DNS). */
static int resolve(struct target *t, const char *host, size_t hlen, unsigned short port,
                   char *err, size_t errlen)
{
    char name[256];
    if (!hlen || hlen >= sizeof name) {
        snprintf(err, errlen, "bad host name");
        return -1;
    }
    memcpy(name, host, hlen);
    name[hlen] = '\0';
    char sport[8];
    snprintf(sport, sizeof sport, "%u", port);
    /* "localhost" and names under it are the loopback (RFC 6761 6.3), as
     * curl takes them: no resolver asked, so a machine without an
     * /etc/hosts entry (a minimal chroot) still reaches 127.0.0.1. */
    if (is_localhost(name))
        strcpy(name, "127.0.0.1");
    /* IPv4 first: "localhost" should reach a server on 127.0.0.1 even
     * where the resolver lists ::1 before it. */
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(name, sport, &hints, &res);
    if (rc != 0) {
        hints.ai_family = AF_UNSPEC;
        rc = getaddrinfo(name, sport, &hints, &res);
    }
    if (rc != 0 || !res) {
        snprintf(err, errlen, "cannot resolve '%s': %s", name, gai_strerror(rc));
        return -2;
    }
    memcpy(&t->ss, res->ai_addr, res->ai_addrlen);
    t->len = res->ai_addrlen;
    t->family = res->ai_family;
    freeaddrinfo(res);
    char ip[INET6_ADDRSTRLEN] = "?";
    if (t->family == AF_INET)
        inet_ntop(AF_INET, &((struct sockaddr_in *)&t->ss)->sin_addr, ip, sizeof ip);
    else if (t->family == AF_INET6)
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&t->ss)->sin6_addr, ip, sizeof ip);
    snprintf(t->addr, sizeof t->addr, t->family == AF_INET6 ? "[%s]:%u" : "%s:%u", ip, port);
    return 0;
}

/* "HOST[:PORT]" or "[V6][:PORT]" from s[0..n): sets *host, *hlen, *port. */
static int split_host_port(const char *s, size_t n, const char **host, size_t *hlen,
                           unsigned short *port)
{
    const char *end = s + n, *colon;
    if (n && s[0] == '[') {
        const char *close = memchr(s, ']', n);
        if (!close)
            return -1;
        *host = s + 1;
        *hlen = (size_t)(close - s - 1);
        colon = close + 1 < end ? close + 1 : NULL;
        if (colon && *colon != ':')
            return -1;
    } else {
        colon = memchr(s, ':', n);
        *host = s;
        *hlen = colon ? (size_t)(colon - s) : n;
    }
    if (colon && parse_port(colon + 1, (size_t)(end - colon - 1), port) < 0)
        return -1;
    return 0;
}

int target_parse_url(const char *url, struct target *t, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    const char *path;
    if (!strncmp(url, "unix:", 5)) {
        /* The socket path ends at the first ":/" (the request target). */
        const char *sock = url + 5;
        const char *sep = strstr(sock, ":/");
        size_t n = sep ? (size_t)(sep - sock) : strlen(sock);
        if (set_unix(t, sock, n, err, errlen) < 0)
            return -1;
        path = sep ? sep + 1 : "/";
    } else {
        t->tls = !strncmp(url, "https://", 8);
        if (!t->tls && strncmp(url, "http://", 7)) {
            snprintf(err, errlen, "bad URL '%s' (want http[s]://HOST[:PORT]/PATH or unix:/SOCKET[:/PATH])", url);
            return -1;
        }
        const char *auth = url + (t->tls ? 8 : 7);
        const char *slash = strchr(auth, '/');
        size_t alen = slash ? (size_t)(slash - auth) : strlen(auth);
        const char *host;
        size_t hlen;
        unsigned short port = t->tls ? 443 : 80;
        if (memchr(auth, '@', alen) || split_host_port(auth, alen, &host, &hlen, &port) < 0 || !hlen) {
            snprintf(err, errlen, "bad host or port in URL '%s'", url);
            return -1;
        }
        if (alen >= sizeof t->host) {
            snprintf(err, errlen, "host too long in URL '%s'", url);
            return -1;
        }
        memcpy(t->host, auth, alen);
        t->host[alen] = '\0';
        if (hlen < sizeof t->name) {
            memcpy(t->name, host, hlen);
            t->name[hlen] = '\0';
        }
        int rc = resolve(t, host, hlen, port, err, errlen);
        if (rc < 0)
            return rc;
        path = slash ? slash : "/";
    }
    if (strlen(path) >= sizeof t->path) {
        snprintf(err, errlen, "URL path too long");
        return -1;
    }
    for (const char *p = path; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == 0x7f || *p == '#') {
            snprintf(err, errlen, "URL path has a space, control character or '#'");
            return -1;
        }
    strcpy(t->path, path);
    return 0;
}

int target_parse_addr(const char *s, unsigned short default_port, struct target *t,
                      char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    strcpy(t->path, "/");
    if (!strncmp(s, "unix:", 5))
        return set_unix(t, s + 5, strlen(s + 5), err, errlen);
    const char *host;
    size_t hlen;
    unsigned short port = default_port;
    if (split_host_port(s, strlen(s), &host, &hlen, &port) < 0 || !hlen) {
        snprintf(err, errlen, "bad address '%s' (want HOST[:PORT], [V6]:PORT or unix:/path)", s);
        return -1;
    }
    snprintf(t->host, sizeof t->host, "%s", s);
    return resolve(t, host, hlen, port, err, errlen);
}

int target_connect_start(const struct target *t, int *pending)
{
    int fd = socket(t->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (t->family != AF_UNIX) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    *pending = 0;
    if (connect(fd, (const struct sockaddr *)&t->ss, t->len) == 0)
        return fd;
    if (errno == EINPROGRESS) {
        *pending = 1;
        return fd;
    }
    int e = errno;
    close(fd);
    /* A unix socket whose backlog is full says EAGAIN; to a user it is a refusal. */
    return -(e == EAGAIN ? ECONNREFUSED : e);
}

int target_connect_wait(const struct target *t, int timeout_ms)
{
    int pending;
    int fd = target_connect_start(t, &pending);
    if (fd < 0 || !pending)
        return fd;
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int n;
    do
        n = poll(&p, 1, timeout_ms);
    while (n < 0 && errno == EINTR);
    int e = 0;
    socklen_t el = sizeof e;
    if (n == 0)
        e = ETIMEDOUT;
    else if (n < 0)
        e = errno;
    else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) < 0)
        e = errno;
    if (e) {
        close(fd);
        return -e;
    }
    return fd;
}

/* The lab's own HTTP client, for checks around the runs (is the server
 * up, is it ours, its status counters), never for load. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "bench/json.h"
#include "bench/lab_internal.h"

/* One GET over a fresh connection to 127.0.0.1:port, Connection: close.
 * Returns the status code (body and its length in *body, *blen, inside
 * buf), or -errno. */
int lab_http_get(int port, const char *path, int timeout_ms, char *buf, size_t cap,
                    char **body, size_t *blen)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    char req[512];
    int n = snprintf(req, sizeof req,
                     "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n", path,
                     port);
    if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
        int e = errno ? errno : EIO;
        close(fd);
        return -e;
    }
    size_t got = 0;
    for (;;) {
        if (got + 1 >= cap)
            break;
        ssize_t r = recv(fd, buf + got, cap - 1 - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno == EAGAIN ? ETIMEDOUT : errno;
            close(fd);
            return -e;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    buf[got] = 0;
    int status;
    if (sscanf(buf, "HTTP/1.%*1d %3d", &status) != 1)
        return -EPROTO;
    char *b = strstr(buf, "\r\n\r\n");
    *body = b ? b + 4 : buf + got;
    *blen = (size_t)(buf + got - *body);
    return status;
}

/* herd's status page: empty accept wakeups and requests, summed over the
 * workers. Returns 0, or -1 when it could not be read. */
int lab_herd_status(int port, int64_t *wakeups, int64_t *requests, int64_t *master)
{
    char buf[65536], *body, err[128];
    size_t blen;
    for (int attempt = 0; attempt < 3; attempt++) {
        int st = lab_http_get(port, "/herd-status", 2000, buf, sizeof buf, &body, &blen);
        if (st != 200)
            continue;
        struct json *j = json_parse(body, blen, err, sizeof err);
        if (!j)
            continue;
        uint64_t w, r, m = 0;
        int ok = json_get_u64(j, "empty_accept_wakeups", &w) == 0 &&
                 json_get_u64(j, "requests", &r) == 0;
        json_get_u64(j, "master_pid", &m);
        json_free(j);
        if (ok) {
            *wakeups = (int64_t)w;
            *requests = (int64_t)r;
            if (master)
                *master = (int64_t)m;
            return 0;
        }
    }
    return -1;
}

/* Binds port on 127.0.0.1 (0: the kernel's pick) to see that it is free;
 * returns the port, or -1. */
static int try_port(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sa;
    int got = -1;
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
        got = ntohs(sa.sin_port);
    close(fd);
    if (got <= 0)
        return -1;
    /* A bind succeeds next to a reuseport listener: ask it, too. */
    char buf[256], *b;
    size_t bl;
    return lab_http_get(got, "/", 200, buf, sizeof buf, &b, &bl) == -ECONNREFUSED ? got : -1;
}

int lab_pick_port(int lo, int hi)
{
    if (lo <= 0) {
        for (int attempt = 0; attempt < 20; attempt++) {
            int port = try_port(0);
            if (port > 0)
                return port;
        }
        return -1;
    }
    static int next; /* offset into the range of the next port to try */
    int span = hi - lo + 1;
    for (int k = 0; k < span; k++) {
        int port = try_port(lo + (next + k) % span);
        if (port > 0) {
            next = (port - lo + 1) % span;
            return port;
        }
    }
    return -1;
}

/* herd status's client (status_fetch.h). Sockets are non-blocking and
 * every wait is a poll() for what is left of one deadline, so no single
 * call (connect, send, recv) can outlast it. */
#include "cmd/status_fetch.h"

#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "core/printable.h"
#include "http/handler.h"

/* herd's own page, whatever the number of workers and upstreams, must fit
 * with room to spare: a client that refused it would be no client. */
_Static_assert(STATUS_ANSWER_MAX >= 16 * HTTP_STATUS_MAX, "the cap must exceed herd's page");

/* A request target we can put on the request line as it is: '/' first,
 * then no space, control byte or DEL. */
static int path_ok(const char *p)
{
    if (*p != '/')
        return 0;
    for (; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == 0x7f)
            return 0;
    return 1;
}

/* 1..65535 in decimal digits only: "P+65536" must not wrap to P. */
static int port_ok(const char *p)
{
    long v = 0;
    size_t n = 0;
    for (; p[n] >= '0' && p[n] <= '9' && n < 6; n++)
        v = v * 10 + (p[n] - '0');
    return n && !p[n] && v >= 1 && v <= 65535;
}

static int refuse(char *err, size_t errlen, const char *why)
{
    snprintf(err, errlen, "%s", why);
    return -1;
}

int status_target_parse(const char *url, struct status_target *t, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    if (!strncmp(url, "unix:", 5)) {
        const char *sep = strstr(url + 5, ":/");
        size_t n = sep ? (size_t)(sep - url - 5) : strlen(url + 5);
        if (!n || n >= sizeof t->host)
            return refuse(err, errlen, "no socket path, or a longer one than a unix socket takes");
        t->unix_socket = 1;
        memcpy(t->host, url + 5, n);
        snprintf(t->path, sizeof t->path, "%s", sep ? sep + 1 : "/herd-status");
        if (!path_ok(t->path))
            return refuse(err, errlen, "the path has a space or a control byte");
        return 0;
    }
    if (!strncmp(url, "http://", 7))
        url += 7;
    const char *slash = strchr(url, '/');
    if (strstr(url, "://") && (!slash || strstr(url, "://") < slash))
        return refuse(err, errlen, "herd status speaks plain HTTP: http:// or unix: only");
    size_t hlen = slash ? (size_t)(slash - url) : strlen(url);
    char hostport[256];
    if (!hlen || hlen >= sizeof hostport)
        return refuse(err, errlen, "no host, or a longer one than a host name can be");
    memcpy(hostport, url, hlen);
    hostport[hlen] = '\0';
    if (strlen(slash ? slash : "/herd-status") >= sizeof t->path)
        return refuse(err, errlen, "the path is too long");
    snprintf(t->path, sizeof t->path, "%s", slash ? slash : "/herd-status");
    if (!path_ok(t->path))
        return refuse(err, errlen, "the path has a space or a control byte");
    char *colon = strrchr(hostport, ':');
    if (hostport[0] == '[') {
        char *close = strchr(hostport, ']');
        if (!close || (close[1] && close[1] != ':'))
            return refuse(err, errlen, "an IPv6 address goes in brackets: [::1]:8080");
        *close = '\0';
        snprintf(t->host, sizeof t->host, "%s", hostport + 1);
        colon = close[1] == ':' ? close + 1 : NULL;
    } else {
        if (colon)
            *colon = '\0';
        snprintf(t->host, sizeof t->host, "%s", hostport);
    }
    if (!t->host[0])
        return refuse(err, errlen, "no host");
    if (colon && !port_ok(colon + 1))
        return refuse(err, errlen, "the port must be a number from 1 to 65535");
    snprintf(t->port, sizeof t->port, "%s", colon ? colon + 1 : "80");
    return 0;
}

/* ------------------------------------------------------------ the deadline */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* What is left of the deadline as a poll() timeout: 0 once it has passed. */
static int ms_left(int64_t deadline_ms)
{
    int64_t left = deadline_ms - now_ms();
    return left <= 0 ? 0 : left > INT_MAX ? INT_MAX : (int)left;
}

/* Waits for events on fd until the deadline: 1 ready (or in error, which
 * the next call reports), 0 timed out, -errno when poll itself failed. */
static int wait_ready(int fd, short events, int64_t deadline_ms)
{
    for (;;) {
        struct pollfd p = {.fd = fd, .events = events};
        int r = poll(&p, 1, ms_left(deadline_ms));
        if (r >= 0)
            return r > 0;
        if (errno != EINTR)
            return -errno;
    }
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ------------------------------------------------------------ one fetch */

struct fetch {
    const struct status_target *t;
    int64_t timeout_ms, deadline_ms;
    char name[340];             /* the server as messages name it */
    char *err;
    size_t errlen;
};

__attribute__((format(printf, 2, 3))) static void fail(struct fetch *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->err, f->errlen, fmt, ap);
    va_end(ap);
}

/* "timed out after 5s <doing> <server>", the timeout as it was given. */
static void fail_timed_out(struct fetch *f, const char *doing)
{
    long long ms = (long long)f->timeout_ms;
    if (ms % 1000)
        fail(f, "timed out after %lldms %s %s", ms, doing, f->name);
    else
        fail(f, "timed out after %llds %s %s", ms / 1000, doing, f->name);
}

/* A unix listener whose queue is full refuses a non-blocking connect with
 * EAGAIN and offers nothing to poll for (the connect is not pending), so
 * it is tried again every 10 ms until the deadline. Returns the fd or
 * -errno (-ETIMEDOUT past the deadline). */
static int connect_unix(const char *path, int64_t deadline_ms)
{
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof un.sun_path)
        return -ENAMETOOLONG;
    memcpy(un.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    while (connect(fd, (struct sockaddr *)&un, sizeof un) < 0) {
        int e = errno;
        int left = ms_left(deadline_ms);
        if (e != EAGAIN || !left) {
            close(fd);
            return e == EAGAIN ? -ETIMEDOUT : -e;
        }
        sleep_ms(left < 10 ? left : 10);
    }
    return fd;
}

/* A non-blocking connect to one address, waited for until the deadline.
 * Returns the fd or -errno (-ETIMEDOUT past the deadline). */
static int connect_addr(const struct addrinfo *a, int64_t deadline_ms)
{
    int fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    int rc = 0;
    if (connect(fd, a->ai_addr, a->ai_addrlen) < 0) {
        rc = errno == EINPROGRESS ? wait_ready(fd, POLLOUT, deadline_ms) : -errno;
        if (rc == 0)
            rc = -ETIMEDOUT;
        if (rc > 0) {
            int soerr = 0;
            socklen_t n = sizeof soerr;
            rc = getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &n) < 0 ? -errno : -soerr;
        }
    }
    if (rc < 0) {
        close(fd);
        return rc;
    }
    return fd;
}

/* Each address of the host in turn, all within the one deadline. Returns
 * the fd or the last address's -errno. */
static int connect_first(const struct addrinfo *res, int64_t deadline_ms)
{
    int fd = -ENOENT;
    for (const struct addrinfo *a = res; a && fd < 0 && ms_left(deadline_ms); a = a->ai_next)
        fd = connect_addr(a, deadline_ms);
    return fd;
}

static int connect_target(struct fetch *f)
{
    int fd;
    if (f->t->unix_socket) {
        fd = connect_unix(f->t->host, f->deadline_ms);
    } else {
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res;
        int rc = getaddrinfo(f->t->host, f->t->port, &hints, &res);
        if (rc) {
            fail(f, "%s: %s", f->t->host, gai_strerror(rc));
            return -1;
        }
        fd = connect_first(res, f->deadline_ms);
        freeaddrinfo(res);
    }
    if (fd >= 0)
        return fd;
    if (fd == -ETIMEDOUT || !ms_left(f->deadline_ms))
        fail_timed_out(f, "connecting to");
    else
        fail(f, "cannot connect to %s: %s", f->name, strerror(-fd));
    return -1;
}

/* Returns 0, or -errno (-ETIMEDOUT past the deadline). */
static int send_all(int fd, const char *p, size_t n, int64_t deadline_ms)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno != EAGAIN)
            return -errno;
        int r = wait_ready(fd, POLLOUT, deadline_ms);
        if (r <= 0)
            return r ? r : -ETIMEDOUT;
    }
    return 0;
}

static int send_request(struct fetch *f, int fd, const char *fmt)
{
    char req[1400];
    int n = snprintf(req, sizeof req,
                     "GET %s%sformat=%s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n"
                     "User-Agent: herd-status\r\n\r\n",
                     f->t->path, strchr(f->t->path, '?') ? "&" : "?", fmt,
                     f->t->unix_socket ? "localhost" : f->t->host);
    if (n < 0 || (size_t)n >= sizeof req) {
        fail(f, "the status path is too long: %s", f->t->path);
        return -1;
    }
    int rc = send_all(fd, req, (size_t)n, f->deadline_ms);
    if (rc == -ETIMEDOUT)
        fail_timed_out(f, "sending the request to");
    else if (rc < 0)
        fail(f, "sending the request to %s: %s", f->name, strerror(-rc));
    return rc < 0 ? -1 : 0;
}

/* ------------------------------------------------------------ the answer */

struct answer {
    char *buf;                  /* cap + 1 bytes, for the NUL that ends the body */
    size_t len, cap;
    size_t head_len;            /* through the blank line; 0 until it arrived */
    int ok;                     /* the status line says 200 */
    int64_t body_len;           /* its Content-Length; -1 for none */
};

/* Stands for "more than can be taken" in a Content-Length that overflows. */
#define LENGTH_HUGE ((uint64_t)1 << 62)

/* The body length of a 200 from its head (head_len bytes, through the
 * blank line): one Content-Length of digits only (repeats must agree),
 * and no Transfer-Encoding, which herd's status page never has. Without
 * a declared length a body cut short could not be told from a whole one,
 * so this returns -1 then. */
static int64_t head_content_length(const char *head, size_t head_len)
{
    const char *end = head + head_len - 2;      /* before the blank line's CRLF */
    const char *line = memmem(head, head_len, "\r\n", 2);
    int64_t found = -1;
    while (line && line + 2 < end) {
        line += 2;
        const char *eol = memmem(line, (size_t)(end - line), "\r\n", 2);
        if (!eol)
            return -1;
        const char *colon = memchr(line, ':', (size_t)(eol - line));
        size_t name_len = colon ? (size_t)(colon - line) : 0;
        if (name_len == 17 && !strncasecmp(line, "transfer-encoding", 17))
            return -1;
        if (name_len == 14 && !strncasecmp(line, "content-length", 14)) {
            const char *p = colon + 1;
            while (p < eol && (*p == ' ' || *p == '\t'))
                p++;
            const char *digits = p;
            uint64_t v = 0;
            for (; p < eol && *p >= '0' && *p <= '9'; p++)
                v = v < LENGTH_HUGE / 10 ? v * 10 + (uint64_t)(*p - '0') : LENGTH_HUGE;
            while (p < eol && (*p == ' ' || *p == '\t'))
                p++;
            if (p == digits || p != eol || (found >= 0 && (uint64_t)found != v))
                return -1;
            found = (int64_t)v;
        }
        line = eol;
    }
    return found;
}

/* Looks for the end of the head in what arrived; once found, reads the
 * status line and, for a 200, the length the body must have. Returns 0,
 * or -1 with the reason in f. */
static int take_head(struct fetch *f, struct answer *a, size_t scanned)
{
    size_t from = scanned > 3 ? scanned - 3 : 0;
    const char *blank = memmem(a->buf + from, a->len - from, "\r\n\r\n", 4);
    if (!blank)
        return 0;
    a->head_len = (size_t)(blank - a->buf) + 4;
    a->ok = a->len >= 12 && !memcmp(a->buf, "HTTP/1.1 200", 12);
    if (!a->ok)
        return 0;
    a->body_len = head_content_length(a->buf, a->head_len);
    if (a->body_len < 0) {
        fail(f, "the answer from %s has no usable Content-Length (herd's status page "
                "always has one)", f->name);
        return -1;
    }
    if ((uint64_t)a->body_len > STATUS_ANSWER_MAX - a->head_len) {
        if ((uint64_t)a->body_len == LENGTH_HUGE)
            fail(f, "the status page from %s is larger than %u bytes (its Content-Length "
                 "is past 2^62)", f->name, STATUS_ANSWER_MAX);
        else
            fail(f, "the status page from %s is larger than %u bytes (its Content-Length "
                 "is %lld)", f->name, STATUS_ANSWER_MAX, (long long)a->body_len);
        return -1;
    }
    return 0;
}

/* The whole answer is here: a 200's body to its length, or any other
 * answer's head, which is all that is reported of it. */
static int answer_complete(const struct answer *a)
{
    return a->head_len && (!a->ok || a->len >= a->head_len + (size_t)a->body_len);
}

/* Room for more: the buffer doubles up to STATUS_ANSWER_MAX. */
static int make_room(struct fetch *f, struct answer *a)
{
    if (a->len < a->cap)
        return 0;
    if (a->cap >= STATUS_ANSWER_MAX) {
        fail(f, "the status page from %s is larger than %u bytes", f->name, STATUS_ANSWER_MAX);
        return -1;
    }
    size_t cap = a->cap * 2 < STATUS_ANSWER_MAX ? a->cap * 2 : STATUS_ANSWER_MAX;
    char *buf = realloc(a->buf, cap + 1);
    if (!buf) {
        fail(f, "out of memory reading the status page from %s", f->name);
        return -1;
    }
    a->buf = buf;
    a->cap = cap;
    return 0;
}

/* Reads until the answer is complete or the server closes. Returns 0, or
 * -1 with the reason in f. */
static int read_answer(struct fetch *f, int fd, struct answer *a)
{
    while (!answer_complete(a)) {
        if (make_room(f, a) < 0)
            return -1;
        ssize_t r = recv(fd, a->buf + a->len, a->cap - a->len, 0);
        if (r > 0) {
            size_t scanned = a->len;
            a->len += (size_t)r;
            if (!a->head_len && take_head(f, a, scanned) < 0)
                return -1;
            continue;
        }
        if (r == 0)
            return 0;
        if (errno == EINTR)
            continue;
        int w = errno == EAGAIN ? wait_ready(fd, POLLIN, f->deadline_ms) : -errno;
        if (w == 0) {
            fail_timed_out(f, "reading the status page from");
            return -1;
        }
        if (w < 0) {
            fail(f, "reading the status page from %s: %s", f->name, strerror(-w));
            return -1;
        }
    }
    return 0;
}

/* Each format of proc/status.c starts with its own mark; a site's index
 * page served at the URL does not. A NUL is never in herd's page, and
 * would cut what is printed short. */
static int is_status_body(const char *body, size_t len, const char *fmt)
{
    if (memchr(body, '\0', len))
        return 0;
    if (!strcmp(fmt, "json"))
        return !strncmp(body, "{\"master_pid\":", 14);
    if (!strcmp(fmt, "prometheus"))
        return !strncmp(body, "# HELP herd_", 12);
    return !strncmp(body, "herd: master ", 13);
}

/* Why an answer that is not a 200 is not the page, from its status line. */
static void fail_not_200(struct fetch *f, struct answer *a)
{
    a->buf[a->len] = '\0';
    a->buf[strcspn(a->buf, "\r\n")] = '\0';
    text_printable(a->buf, strlen(a->buf), 0);
    if (!strncmp(a->buf, "HTTP/1.1 403", 12))
        fail(f, "the status page at %s refused this client (%s); the server's "
                "--status-allow does not list its address", f->t->path, a->buf);
    else
        fail(f, "no status page at %s (%s); start the server with --status-path", f->t->path,
             a->len ? a->buf : "empty reply");
}

/* The body of a complete 200, moved to the start of the buffer; NULL with
 * the reason in f when it is short of its length or not herd's page. */
static char *take_body(struct fetch *f, struct answer *a, const char *fmt)
{
    if (!a->head_len && a->len >= 12 && !memcmp(a->buf, "HTTP/1.1 200", 12)) {
        fail(f, "the status page from %s was cut short in its head", f->name);
        return NULL;
    }
    if (!a->head_len || !a->ok) {
        fail_not_200(f, a);
        return NULL;
    }
    size_t got = a->len - a->head_len, want = (size_t)a->body_len;
    if (got < want) {
        fail(f, "the status page from %s was cut short (%zu of %zu bytes)", f->name, got, want);
        return NULL;
    }
    memmove(a->buf, a->buf + a->head_len, want);
    a->buf[want] = '\0';
    if (!is_status_body(a->buf, want, fmt)) {
        fail(f, "%s answered 200 but not with herd's status page (is the URL's path the "
                "server's --status-path? e.g. /herd-status)", f->t->path);
        return NULL;
    }
    /* server bytes go to a terminal; herd's own pages are ASCII (their
     * names escaped), so they pass as they are */
    text_printable(a->buf, want, 1);
    return a->buf;
}

char *status_fetch(const struct status_target *t, const char *fmt, int64_t timeout_ms,
                   char *err, size_t errlen)
{
    struct fetch f = {.t = t, .timeout_ms = timeout_ms, .deadline_ms = now_ms() + timeout_ms,
                      .err = err, .errlen = errlen};
    if (t->unix_socket)
        snprintf(f.name, sizeof f.name, "unix:%s", t->host);
    else if (strchr(t->host, ':'))
        snprintf(f.name, sizeof f.name, "[%s]:%s", t->host, t->port);
    else
        snprintf(f.name, sizeof f.name, "%s:%s", t->host, t->port);
    int fd = connect_target(&f);
    if (fd < 0)
        return NULL;
    struct answer a = {.cap = 16384, .body_len = -1};
    a.buf = malloc(a.cap + 1);
    char *body = NULL;
    if (!a.buf)
        fail(&f, "out of memory reading the status page from %s", f.name);
    else if (send_request(&f, fd, fmt) == 0 && read_answer(&f, fd, &a) == 0)
        body = take_body(&f, &a, fmt);
    close(fd);
    if (!body)
        free(a.buf);
    return body;
}

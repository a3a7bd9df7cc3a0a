/* herd status [URL]: the live counters of a running server, fetched from its
 * status page (--status-path) and printed as a table, once or every second. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "cmd/status_find.h"
#include "cmd/status_rates.h"

static const char status_usage[] =
    "usage: herd status [URL | --config FILE | --pid-file FILE] [--watch] [--json | --prometheus]\n"
    "\n"
    "Prints the counters of a running herd serve started with --status-path.\n"
    "unix:/path.sock:/herd-status reaches a unix-socket listener. Without a URL:\n"
    "  --config FILE    the server's config file: its first listen and status-path\n"
    "                   (and its pid-file, when it sets one)\n"
    "  --pid-file FILE  the TCP port the server with this pid listens on\n"
    "Neither: http://127.0.0.1:8080/herd-status.\n"
    "\n"
    "  --watch        refresh every second with per-second rates (req/s, bytes/s,\n"
    "                 responses/s by class); a plain line per second when stdout\n"
    "                 is not a terminal (Ctrl-C stops)\n"
    "  --json         print the raw JSON\n"
    "  --prometheus   print the Prometheus text format\n";

struct target {
    int unix_socket;
    char host[320];
    char port[8];
    char path[1024];
};

static int parse_url(const char *url, struct target *t)
{
    memset(t, 0, sizeof *t);
    if (!strncmp(url, "unix:", 5)) {
        const char *sep = strstr(url + 5, ":/");
        size_t n = sep ? (size_t)(sep - url - 5) : strlen(url + 5);
        if (!n || n >= sizeof t->host)
            return -1;
        t->unix_socket = 1;
        memcpy(t->host, url + 5, n);
        snprintf(t->path, sizeof t->path, "%s", sep ? sep + 1 : "/herd-status");
        return 0;
    }
    if (!strncmp(url, "http://", 7))
        url += 7;
    const char *slash = strchr(url, '/');
    size_t hlen = slash ? (size_t)(slash - url) : strlen(url);
    char hostport[256];
    if (!hlen || hlen >= sizeof hostport)
        return -1;
    memcpy(hostport, url, hlen);
    hostport[hlen] = '\0';
    snprintf(t->path, sizeof t->path, "%s", slash ? slash : "/herd-status");
    char *colon = strrchr(hostport, ':');
    if (hostport[0] == '[') {
        char *close = strchr(hostport, ']');
        if (!close)
            return -1;
        *close = '\0';
        snprintf(t->host, sizeof t->host, "%s", hostport + 1);
        colon = close[1] == ':' ? close + 1 : NULL;
    } else {
        if (colon)
            *colon = '\0';
        snprintf(t->host, sizeof t->host, "%s", hostport);
    }
    snprintf(t->port, sizeof t->port, "%s", colon ? colon + 1 : "80");
    return 0;
}

static int connect_to(const struct target *t, char *err, size_t errlen)
{
    struct timeval tv = {5, 0};
    int fd = -1;
    if (t->unix_socket) {
        struct sockaddr_un un = {.sun_family = AF_UNIX};
        if (strlen(t->host) >= sizeof un.sun_path) {
            snprintf(err, errlen, "unix socket path too long: %s", t->host);
            return -1;
        }
        memcpy(un.sun_path, t->host, strlen(t->host) + 1);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, (struct sockaddr *)&un, sizeof un) == 0)
            goto ok;
        snprintf(err, errlen, "cannot connect to unix:%s: %s", t->host, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res;
    int rc = getaddrinfo(t->host, t->port, &hints, &res);
    if (rc) {
        snprintf(err, errlen, "%s: %s", t->host, gai_strerror(rc));
        return -1;
    }
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            continue;
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
            break;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) {
        snprintf(err, errlen, "cannot connect to %s:%s: %s", t->host, t->port, strerror(errno));
        return -1;
    }
ok:
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    return fd;
}

/* Each format of proc/status.c starts with its own mark; a site's index
 * page served at the URL does not. */
static int is_status_body(const char *body, const char *fmt)
{
    if (!strcmp(fmt, "json"))
        return !strncmp(body, "{\"master_pid\":", 14);
    if (!strcmp(fmt, "prometheus"))
        return !strncmp(body, "# HELP herd_", 12);
    return !strncmp(body, "herd: master ", 13);
}

/* GET path?format=fmt; returns the body (malloc'd) or NULL with err set. */
static char *fetch(const struct target *t, const char *fmt, char *err, size_t errlen)
{
    int fd = connect_to(t, err, errlen);
    if (fd < 0)
        return NULL;
    char req[1400];
    int n = snprintf(req, sizeof req,
                     "GET %s%sformat=%s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n"
                     "User-Agent: herd-status\r\n\r\n",
                     t->path, strchr(t->path, '?') ? "&" : "?", fmt,
                     t->unix_socket ? "localhost" : t->host);
    if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
        snprintf(err, errlen, "send: %s", strerror(errno));
        close(fd);
        return NULL;
    }
    size_t cap = 65536, len = 0;
    char *buf = malloc(cap + 1);
    for (;;) {
        if (len == cap) {
            cap *= 2;
            buf = realloc(buf, cap + 1);
        }
        ssize_t r = recv(fd, buf + len, cap - len, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            snprintf(err, errlen, "reading the status page: %s", strerror(errno));
            free(buf);
            close(fd);
            return NULL;
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    close(fd);
    buf[len] = '\0';
    char *body = strstr(buf, "\r\n\r\n");
    if (strncmp(buf, "HTTP/1.1 200", 12) != 0 || !body) {
        char *eol = strstr(buf, "\r\n");
        if (eol)
            *eol = '\0';
        if (!strncmp(buf, "HTTP/1.1 403", 12))
            snprintf(err, errlen,
                     "the status page at %s refused this client (%s); the server's "
                     "--status-allow does not list its address", t->path, buf);
        else
            snprintf(err, errlen,
                     "no status page at %s (%s); start the server with --status-path", t->path,
                     len ? buf : "empty reply");
        free(buf);
        return NULL;
    }
    memmove(buf, body + 4, strlen(body + 4) + 1);
    if (!is_status_body(buf, fmt)) {
        snprintf(err, errlen, "%s answered 200 but not with herd's status page (is the "
                 "URL's path the server's --status-path? e.g. /herd-status)", t->path);
        free(buf);
        return NULL;
    }
    return buf;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* --watch: on a terminal, the page redrawn with a rates line under it;
 * piped, one plain line of totals and rates per second (or the raw
 * format, separated by a blank line, with --json or --prometheus). */
static int watch_loop(const struct target *t, const char *fmt)
{
    int tty = isatty(STDOUT_FILENO);
    struct status_sample prev, cur;
    int have_prev = 0;
    for (;;) {
        char err[1200];
        char *json = fetch(t, "json", err, sizeof err);
        char *page = json && (tty || strcmp(fmt, "table")) ? fetch(t, fmt, err, sizeof err) : NULL;
        if (!json || ((tty || strcmp(fmt, "table")) && !page)) {
            fprintf(stderr, "herd: %s\n", err);
            free(json);
            return 1;
        }
        status_sample_parse(json, now_s(), &cur);
        if (tty)
            fputs("\033[H\033[2J", stdout);
        if (page)
            fputs(page, stdout);
        if (!strcmp(fmt, "table"))
            status_rates_print(stdout, have_prev ? &prev : NULL, &cur);
        else
            fputs("\n", stdout);
        fflush(stdout);
        free(json);
        free(page);
        prev = cur;
        have_prev = 1;
        struct timespec ts = {1, 0};
        nanosleep(&ts, NULL);
    }
}

int cmd_status(int argc, char **argv)
{
    const char *url = NULL, *config = NULL, *pid_file = NULL;
    const char *fmt = "table";
    int watch = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--watch") || !strcmp(argv[i], "-w"))
            watch = 1;
        else if (!strcmp(argv[i], "--json"))
            fmt = "json";
        else if (!strcmp(argv[i], "--prometheus"))
            fmt = "prometheus";
        else if (!strcmp(argv[i], "--config") && i + 1 < argc)
            config = argv[++i];
        else if (!strcmp(argv[i], "--pid-file") && i + 1 < argc)
            pid_file = argv[++i];
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(status_usage, stdout);
            return 0;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "herd: unknown option or missing value '%s' (see herd status --help)\n",
                    argv[i]);
            return 2;
        } else {
            url = argv[i];
        }
    }
    char found[1200];
    const char *how = "the URL given";
    if (url && (config || pid_file)) {
        fprintf(stderr, "herd: give a URL or --config/--pid-file, not both\n");
        return 2;
    }
    if (!url) {
        char err[1200];
        if (status_find(config, pid_file, found, sizeof found, err, sizeof err) < 0) {
            fprintf(stderr, "herd: %s\n", err);
            return 1;
        }
        url = found;
        how = config ? "from --config" : pid_file ? "from --pid-file"
                                                  : "the default; no URL, --config or --pid-file given";
    }
    struct target t;
    if (parse_url(url, &t) < 0) {
        fprintf(stderr, "herd: bad URL '%s' (see herd status --help)\n", url);
        return 2;
    }
    if (watch)
        return watch_loop(&t, fmt);
    char err[1200];
    char *body = fetch(&t, fmt, err, sizeof err);
    if (!body) {
        fprintf(stderr, "herd: %s (tried %s, %s)\n", err, url, how);
        return 1;
    }
    fputs(body, stdout);
    free(body);
    return 0;
}

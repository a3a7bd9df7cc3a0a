#include "net/inherit.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* More than any layout needs (16 addresses x 128 workers), few enough that
 * a garbage LISTEN_FDS cannot make us walk the whole fd table. */
#define INHERIT_MAX 4096

static int parse_long(const char *s, long *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < 0)
        return -1;
    *out = v;
    return 0;
}

static int sockopt_int(int fd, int level, int name)
{
    int v = 0;
    socklen_t len = sizeof v;
    return getsockopt(fd, level, name, &v, &len) < 0 ? -1 : v;
}

/* Why fd cannot be a socket passed to us, or NULL when it is what we
 * accept: an open, listening TCP or unix stream socket. */
static const char *not_a_listener(int fd)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return "is not open";
    if (S_ISREG(st.st_mode))
        return "is a regular file, not a socket";
    if (S_ISFIFO(st.st_mode))
        return "is a pipe, not a socket";
    if (!S_ISSOCK(st.st_mode))
        return "is not a socket";
    int domain = sockopt_int(fd, SOL_SOCKET, SO_DOMAIN);
    if (domain != AF_INET && domain != AF_INET6 && domain != AF_UNIX)
        return "is a socket of another family (not TCP or unix)";
    int type = sockopt_int(fd, SOL_SOCKET, SO_TYPE);
    if (type == SOCK_DGRAM)
        return "is a datagram socket (UDP or unix dgram), not a stream socket";
    if (type != SOCK_STREAM)
        return "is not a stream socket";
    if (sockopt_int(fd, SOL_SOCKET, SO_ACCEPTCONN) != 1)
        return "is a stream socket that does not listen (a connection?)";
    if (domain == AF_UNIX) {
        struct sockaddr_un un;
        socklen_t len = sizeof un;
        memset(&un, 0, sizeof un);
        /* herd names a unix listener by its path; one it cannot name would
         * be closed unused, and the default address served instead */
        if (getsockname(fd, (struct sockaddr *)&un, &len) < 0 ||
            len <= offsetof(struct sockaddr_un, sun_path) || !un.sun_path[0])
            return "is an abstract or unnamed unix socket (herd serves unix sockets by path)";
    }
    return NULL;
}

/* LISTEN_PID and LISTEN_FDS as sd_listen_fds(3) reads them: *n = 0 when
 * the variables are absent or meant for another process; -1 with a reason
 * when they are meant for us but malformed. */
static int passed_count(long *n, char *err, size_t errlen)
{
    const char *pid_text = getenv("LISTEN_PID"), *fds_text = getenv("LISTEN_FDS");
    long pid;
    *n = 0;
    if (!pid_text)
        return 0;
    if (parse_long(pid_text, &pid) < 0) {
        snprintf(err, errlen, "LISTEN_PID=%.40s is not a process id", pid_text);
        return -1;
    }
    if (pid != (long)getpid() || !fds_text)
        return 0;
    if (parse_long(fds_text, n) < 0 || *n > INHERIT_MAX) {
        snprintf(err, errlen, "LISTEN_FDS=%.40s is not a count of sockets (0..%d)", fds_text,
                 INHERIT_MAX);
        return -1;
    }
    return 0;
}

int inherit_from_env(struct inherited *in, char *err, size_t errlen)
{
    memset(in, 0, sizeof *in);
    long n;
    int rc = passed_count(&n, err, errlen);
    const char *names = getenv("LISTEN_FDNAMES");
    in->names = rc == 0 && n > 0 && names ? strdup(names) : NULL;
    unsetenv("LISTEN_PID");
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_FDNAMES");
    if (rc < 0 || n <= 0)
        return rc;
    /* Every passed fd is checked before any is used: one that is missing
     * or of the wrong kind means the launcher was set up wrong, and guessing
     * would serve on part of what was meant (or on an fd of ours). */
    for (long i = 0; i < n; i++) {
        int fd = INHERIT_FIRST_FD + (int)i;
        const char *why = not_a_listener(fd);
        if (why) {
            snprintf(err, errlen, "LISTEN_FDS=%ld for pid %ld: fd %d %s (herd takes only "
                     "listening TCP or unix stream sockets)", n, (long)getpid(), fd, why);
            inherit_free(in);
            return -1;
        }
    }
    if (!(in->fds = calloc((size_t)n, sizeof *in->fds))) {
        snprintf(err, errlen, "LISTEN_FDS: out of memory");
        inherit_free(in);
        return -1;
    }
    char *cursor = in->names;
    for (long i = 0; i < n; i++) {
        const char *name = "";
        if (cursor) {
            name = cursor;
            char *colon = strchr(cursor, ':');
            if (colon)
                *colon = '\0';
            cursor = colon ? colon + 1 : NULL;
        }
        int fd = INHERIT_FIRST_FD + (int)i;
        /* systemd passes blocking sockets; our workers accept until EAGAIN. */
        int fl = fcntl(fd, F_GETFL);
        fcntl(fd, F_SETFL, fl | O_NONBLOCK);
        fcntl(fd, F_SETFD, FD_CLOEXEC);
        /* Connections inherit it from the listener (a unix socket refuses
         * it, harmlessly): net_accept sets nothing per connection. */
        listen_nodelay(fd);
        struct inherited_fd *f = &in->fds[in->n++];
        f->fd = fd;
        f->name = name;
        f->reuseport = sockopt_int(fd, SOL_SOCKET, SO_REUSEPORT) == 1;
        const char *hash = strchr(name, '#');
        f->path_ours = hash && !strstr(hash, "#keep");
        f->len = sizeof f->ss;
        if (getsockname(fd, (struct sockaddr *)&f->ss, &f->len) < 0)
            f->len = 0;
    }
    return in->n;
}

static int port_of(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)ss)->sin_port);
    if (ss->ss_family == AF_INET6)
        return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
    return -1;
}

static int same_address(const struct sockaddr_storage *x, const struct sockaddr_storage *y)
{
    if (x->ss_family != y->ss_family)
        return 0;
    if (x->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const void *)x, *b = (const void *)y;
        return a->sin_port == b->sin_port && a->sin_addr.s_addr == b->sin_addr.s_addr;
    }
    if (x->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const void *)x, *b = (const void *)y;
        return a->sin6_port == b->sin6_port &&
               !memcmp(&a->sin6_addr, &b->sin6_addr, sizeof a->sin6_addr);
    }
    if (x->ss_family == AF_UNIX) {
        const struct sockaddr_un *a = (const void *)x, *b = (const void *)y;
        return a->sun_path[0] && !strncmp(a->sun_path, b->sun_path, sizeof a->sun_path);
    }
    return 0;
}

static void escape(const char *s, char *buf, size_t n)
{
    size_t o = 0;
    for (; *s && o + 4 < n; s++) {
        unsigned char c = (unsigned char)*s;
        if (c <= ' ' || c >= 0x7f || c == ':' || c == '%' || c == '#')
            o += (size_t)snprintf(buf + o, n - o, "%%%02X", c);
        else
            buf[o++] = (char)c;
    }
    buf[o] = '\0';
}

void inherit_name(const struct listen_addr *a, int slot, int keep, char *buf, size_t n)
{
    char text[3 * sizeof a->text + 1];
    escape(a->text, text, sizeof text);
    snprintf(buf, n, "%s#%d%s", text, slot, keep ? "#keep" : "");
}

/* The socket's name says it was made for the --listen text of a. */
static int named_for(const struct inherited_fd *f, const struct listen_addr *a)
{
    char text[3 * sizeof a->text + 1];
    escape(a->text, text, sizeof text);
    size_t len = strlen(text);
    return !strncmp(f->name, text, len) && f->name[len] == '#';
}

const struct inherited_fd *inherit_take(struct inherited *in, struct listen_addr *a)
{
    int any_port = port_of(&a->ss) == 0;
    for (int i = 0; i < in->n; i++) {
        struct inherited_fd *f = &in->fds[i];
        if (f->taken || f->ss.ss_family != a->family)
            continue;
        if (any_port ? !named_for(f, a) : !same_address(&f->ss, &a->ss))
            continue;
        f->taken = 1;
        if (a->family != AF_UNIX) {
            a->ss = f->ss;
            a->len = f->len;
        }
        return f;
    }
    return NULL;
}

static int describe_bound(const struct sockaddr_storage *ss, char *buf, size_t n)
{
    char host[INET6_ADDRSTRLEN];
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *in4 = (const void *)ss;
        inet_ntop(AF_INET, &in4->sin_addr, host, sizeof host);
        return snprintf(buf, n, "%s:%d", host, port_of(ss));
    }
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const void *)ss;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
        return snprintf(buf, n, "[%s]:%d", host, port_of(ss));
    }
    const struct sockaddr_un *un = (const void *)ss;
    if (ss->ss_family != AF_UNIX || !un->sun_path[0])
        return -1; /* unnamed or abstract: nothing --listen could say */
    return snprintf(buf, n, "unix:%.*s", (int)sizeof un->sun_path, un->sun_path);
}

int inherit_addresses(const struct inherited *in, struct listen_addr *out, int max)
{
    int count = 0;
    for (int i = 0; i < in->n; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = same_address(&in->fds[j].ss, &in->fds[i].ss);
        char text[sizeof out->text], err[160];
        struct listen_addr spare;
        if (seen || describe_bound(&in->fds[i].ss, text, sizeof text) < 0 ||
            (size_t)strlen(text) >= sizeof text - 1)
            continue;
        if (listen_parse(text, count < max ? &out[count] : &spare, err, sizeof err) == 0)
            count++;
    }
    return count;
}

int inherit_close_unused(struct inherited *in)
{
    int closed = 0;
    for (int i = 0; i < in->n; i++) {
        if (!in->fds[i].taken && in->fds[i].fd >= 0) {
            close(in->fds[i].fd);
            in->fds[i].fd = -1;
            closed++;
        }
    }
    return closed;
}

void inherit_free(struct inherited *in)
{
    free(in->fds);
    free(in->names);
    memset(in, 0, sizeof *in);
}

int inherit_export(const int *fds, char *const *names, int n, const int *extra, int nextra)
{
    int top = INHERIT_FIRST_FD + n + nextra;
    for (int i = 0; i < n; i++)
        if (fds[i] > top)
            top = fds[i];
    for (int i = 0; i < nextra; i++)
        if (extra[i] > top)
            top = extra[i];
    /* Copy everything above both the sources and the targets first, so a
     * dup2 onto 3+i cannot close a source still to be moved. */
    int *tmp = malloc(sizeof *tmp * (size_t)(n + nextra));
    size_t nameslen = 1;
    for (int i = 0; i < n; i++)
        nameslen += strlen(names[i]) + 1;
    char *joined = malloc(nameslen);
    if (!tmp || !joined)
        return -ENOMEM;
    for (int i = 0; i < n + nextra; i++) {
        int src = i < n ? fds[i] : extra[i - n];
        tmp[i] = fcntl(src, F_DUPFD_CLOEXEC, top + 1);
        if (tmp[i] < 0)
            return -errno;
    }
    for (int i = 0; i < n + nextra; i++) /* dup2 clears close-on-exec on the copy */
        if (dup2(tmp[i], INHERIT_FIRST_FD + i) < 0)
            return -errno;
    int last = INHERIT_FIRST_FD + n + nextra;
    close_range((unsigned)last, ~0U, 0);
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        size_t len = strlen(names[i]);
        if (i)
            joined[off++] = ':';
        memcpy(joined + off, names[i], len);
        off += len;
    }
    joined[off] = '\0';
    char num[24];
    snprintf(num, sizeof num, "%d", n);
    setenv("LISTEN_FDS", num, 1);
    snprintf(num, sizeof num, "%ld", (long)getpid());
    setenv("LISTEN_PID", num, 1);
    setenv("LISTEN_FDNAMES", joined, 1);
    return nextra ? INHERIT_FIRST_FD + n : 0;
}

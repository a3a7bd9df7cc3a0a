#include "proc/upgrade.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "net/inherit.h"
#include "proc/handover.h"

int upgrade_binary(const char *path, char *out, size_t n, char *err, size_t errlen)
{
    if (path && *path) {
        snprintf(out, n, "%s", path);
    } else {
        ssize_t len = readlink("/proc/self/exe", out, n - 1);
        if (len < 0) {
            snprintf(err, errlen, "cannot find our own binary: %s", strerror(errno));
            return -1;
        }
        out[len] = '\0';
        /* A binary replaced on disk by a new build (rename over it) reads
         * "PATH (deleted)": the new file at PATH is the one we want. */
        static const char deleted[] = " (deleted)";
        size_t dl = sizeof deleted - 1;
        if ((size_t)len > dl && !strcmp(out + len - dl, deleted))
            out[len - dl] = '\0';
    }
    if (access(out, X_OK) < 0) {
        snprintf(err, errlen, "%s: %s", out, strerror(errno));
        return -1;
    }
    return 0;
}

int upgrade_start(struct upgrade *u, const char *path, char *const argv[], const int *fds,
                  char *const *names, int n, int tickets_fd, int64_t deadline_ms, char *err,
                  size_t errlen)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        return -1;
    }
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    int ho[2] = {-1, -1};
    if (handover_channel(ho) < 0)
        ho[0] = ho[1] = -1; /* the upgrade goes on; idle connections just drain */
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        close(p[0]);
        close(p[1]);
        if (ho[0] >= 0) {
            close(ho[0]);
            close(ho[1]);
        }
        return -1;
    }
    if (pid == 0) {
        /* fork cleared any parent-death signal: the new master outlives us.
         * The signal mask (TERM, HUP, USR2... blocked) survives exec on
         * purpose: a signal sent before the new master opens its signalfd
         * waits there instead of killing it. */
        int extra[3] = {p[1]}, nextra = 1, ho_at = 0, tickets_at = 0;
        if (ho[1] >= 0) {
            ho_at = nextra;
            extra[nextra++] = ho[1];
        }
        if (tickets_fd >= 0) {
            tickets_at = nextra;
            extra[nextra++] = tickets_fd;
        }
        int ready = inherit_export(fds, names, n, extra, nextra);
        if (ready < 0) {
            fprintf(stderr, "herd: upgrade: cannot pass the sockets: %s\n", strerror(-ready));
            _exit(127);
        }
        char num[16];
        snprintf(num, sizeof num, "%d", ready);
        setenv(UPGRADE_READY_ENV, num, 1);
        unsetenv(UPGRADE_HANDOVER_ENV);
        unsetenv(UPGRADE_TICKETS_ENV);
        if (ho_at) {
            snprintf(num, sizeof num, "%d", ready + ho_at);
            setenv(UPGRADE_HANDOVER_ENV, num, 1);
        }
        if (tickets_at) {
            snprintf(num, sizeof num, "%d", ready + tickets_at);
            setenv(UPGRADE_TICKETS_ENV, num, 1);
        }
        execv(path, argv);
        fprintf(stderr, "herd: upgrade: exec %s: %s\n", path, strerror(errno));
        _exit(127);
    }
    close(p[1]);
    if (ho[1] >= 0)
        close(ho[1]);
    u->pid = pid;
    u->fd = p[0];
    u->ho_fd = ho[0];
    u->deadline_ms = deadline_ms;
    return 0;
}

int upgrade_read(struct upgrade *u)
{
    char c;
    ssize_t r = read(u->fd, &c, 1);
    if (r == 1)
        return 1;
    if (r < 0 && (errno == EAGAIN || errno == EINTR))
        return 0;
    return -1;
}

void upgrade_clear(struct upgrade *u)
{
    if (u->fd >= 0)
        close(u->fd);
    if (u->ho_fd >= 0)
        close(u->ho_fd);
    u->fd = u->ho_fd = -1;
    u->pid = 0;
    u->deadline_ms = 0;
}

int upgrade_ready_fd(const struct inherited *in, int *fd, char *err, size_t errlen)
{
    *fd = -1;
    const char *s = getenv(UPGRADE_READY_ENV);
    if (!s)
        return 0;
    char text[24];
    snprintf(text, sizeof text, "%.20s", s);
    unsetenv(UPGRADE_READY_ENV);
    char *end;
    errno = 0;
    long n = strtol(text, &end, 10);
    const char *why = NULL;
    struct stat st;
    if (errno || end == text || *end || n < INHERIT_FIRST_FD || n > INT_MAX)
        why = "is not a file descriptor number (3 or more)";
    else if (n < INHERIT_FIRST_FD + in->n)
        why = "is one of the inherited listen sockets (LISTEN_FDS)";
    else if (fstat((int)n, &st) < 0)
        why = "is not open";
    else if (!S_ISFIFO(st.st_mode))
        why = "is not a pipe";
    else if ((fcntl((int)n, F_GETFL) & O_ACCMODE) == O_RDONLY)
        why = "is the read end of a pipe";
    if (why) {
        snprintf(err, errlen, "%s=%s %s; only an upgrading herd master sets it, to the "
                 "write end of its ready pipe", UPGRADE_READY_ENV, text, why);
        return -1;
    }
    fcntl((int)n, F_SETFD, FD_CLOEXEC);
    *fd = (int)n;
    return 0;
}

/* The fd the variable env names among those the old master passed after
 * the ready pipe (at ready_fd + 1 .. ready_fd + last), if it is of the
 * type (S_IFSOCK, S_IFREG); close-on-exec from here on. Else -1. */
static int passed_fd(const char *env, int ready_fd, int last, mode_t type)
{
    const char *s = getenv(env);
    if (!s || ready_fd < 0)
        return -1;
    char *end;
    long n = strtol(s, &end, 10);
    unsetenv(env);
    struct stat st;
    if (*end || n <= ready_fd || n > ready_fd + last || fstat((int)n, &st) < 0 ||
        (st.st_mode & S_IFMT) != type)
        return -1;
    fcntl((int)n, F_SETFD, FD_CLOEXEC);
    return (int)n;
}

int upgrade_handover_fd(int ready_fd)
{
    /* only right after the ready pipe, and only a socket */
    return passed_fd(UPGRADE_HANDOVER_ENV, ready_fd, 1, S_IFSOCK);
}

int upgrade_tickets_fd(int ready_fd)
{
    /* after the ready pipe (and the handover channel), and only a file */
    return passed_fd(UPGRADE_TICKETS_ENV, ready_fd, 2, S_IFREG);
}

int upgrade_report_ready(int fd)
{
    ssize_t r = write(fd, "R", 1);
    int err = r == 1 ? 0 : -errno;
    close(fd);
    return err;
}

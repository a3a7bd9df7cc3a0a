#include "proc/daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "core/regfile.h"

int pidfile_write(const char *path, char *err, size_t errlen)
{
    if (!path || !*path)
        return 0;
    char pid[24];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (regfile_replace(path, ".tmp", pid, (size_t)n) < 0) {
        snprintf(err, errlen, "pid file %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* Only what pidfile_write writes: digits, then a newline or nothing. A
 * value past INT_MAX would wrap in a pid_t, and kill() with 0, -1 or a
 * negative pid signals a process group or every process. */
pid_t pidfile_read(const char *path, char *err, size_t errlen)
{
    FILE *f = regfile_open(path);
    if (!f) {
        snprintf(err, errlen, "pid file %s: %s", path, regfile_strerror(errno));
        return -1;
    }
    char buf[24];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    if (n && buf[n - 1] == '\n')
        buf[--n] = 0;
    long long pid = 0;
    size_t i = 0;
    while (i < n && buf[i] >= '0' && buf[i] <= '9' && pid <= INT_MAX)
        pid = pid * 10 + (buf[i++] - '0');
    if (!n || i != n || pid <= 0 || pid > INT_MAX) {
        snprintf(err, errlen, "pid file %s holds no pid (a positive number and a newline)",
                 path);
        return -1;
    }
    return (pid_t)pid;
}

void pidfile_remove(const char *path)
{
    if (!path || !*path)
        return;
    /* Only our own: after a binary upgrade the file belongs to the new master. */
    char err[64];
    if (pidfile_read(path, err, sizeof err) == getpid())
        unlink(path);
}

int daemonize(char *err, size_t errlen)
{
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        return -1;
    }
    if (pid > 0)
        _exit(0);
    setsid();
    int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
        dup2(fd, STDIN_FILENO);
        dup2(fd, STDOUT_FILENO);
        if (fd > STDERR_FILENO)
            close(fd);
    }
    log_take_stderr();
    return 0;
}

int user_ids(const char *user, const char *group, uid_t *uid, gid_t *gid, char *err,
             size_t errlen)
{
    *uid = geteuid();
    *gid = getegid();
    if (user && *user) {
        struct passwd *pw = getpwnam(user);
        if (!pw) {
            snprintf(err, errlen, "unknown user '%s'", user);
            return -1;
        }
        *uid = pw->pw_uid;
        *gid = pw->pw_gid;
    }
    if (group && *group) {
        struct group *gr = getgrnam(group);
        if (!gr) {
            snprintf(err, errlen, "unknown group '%s'", group);
            return -1;
        }
        *gid = gr->gr_gid;
    }
    return 0;
}

int privileges_droppable(const char *user, const char *group, char *err, size_t errlen)
{
    if ((!user || !*user) && (!group || !*group))
        return 0;
    if (geteuid() != 0) {
        snprintf(err, errlen, "--user/--group need herd to start as root");
        return -1;
    }
    return 0;
}

int drop_privileges(const char *user, const char *group, uid_t uid, gid_t gid, char *err,
                    size_t errlen)
{
    if ((!user || !*user) && (!group || !*group))
        return 0;
    if (geteuid() != 0) {
        snprintf(err, errlen, "--user/--group need root");
        return -1;
    }
    if (setgroups(1, &gid) < 0 || setgid(gid) < 0 || setuid(uid) < 0) {
        snprintf(err, errlen, "cannot drop privileges: %s", strerror(errno));
        return -1;
    }
    return 0;
}

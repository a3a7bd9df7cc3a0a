#include "proc/daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"

int pidfile_write(const char *path, char *err, size_t errlen)
{
    if (!path || !*path)
        return 0;
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "we");
    if (!f || fprintf(f, "%ld\n", (long)getpid()) < 0 || fclose(f) != 0 ||
        rename(tmp, path) < 0) {
        snprintf(err, errlen, "pid file %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

void pidfile_remove(const char *path)
{
    if (!path || !*path)
        return;
    /* Only our own: after a binary upgrade the file belongs to the new master. */
    FILE *f = fopen(path, "re");
    long pid = 0;
    if (f) {
        if (fscanf(f, "%ld", &pid) != 1)
            pid = 0;
        fclose(f);
    }
    if (pid == (long)getpid())
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

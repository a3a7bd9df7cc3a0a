/* Process chores shared by every mode: the pid file, going to the
 * background, and dropping root after binding. Return 0 or -1 with a
 * one-line reason in err. */
#ifndef HERD_PROC_DAEMON_H
#define HERD_PROC_DAEMON_H

#include <stddef.h>

int pidfile_write(const char *path, char *err, size_t errlen);
void pidfile_remove(const char *path);

/* Forks; the parent exits 0, the child starts a new session with stdin
 * and stdout on /dev/null (stderr, the error log, stays). */
int daemonize(char *err, size_t errlen);

/* setgid/setuid to user (and group, default: the user's group) when root. */
int drop_privileges(const char *user, const char *group, char *err, size_t errlen);

#endif

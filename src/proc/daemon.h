/* Process chores shared by every mode: the pid file, going to the
 * background, and dropping root after binding. Return 0 or -1 with a
 * one-line reason in err. */
#ifndef HERD_PROC_DAEMON_H
#define HERD_PROC_DAEMON_H

#include <stddef.h>
#include <sys/types.h>

int pidfile_write(const char *path, char *err, size_t errlen);
void pidfile_remove(const char *path);
/* The pid in the file at path (as pidfile_write wrote it), or -1 with err. */
pid_t pidfile_read(const char *path, char *err, size_t errlen);

/* Forks; the parent exits 0, the child starts a new session with stdin
 * and stdout on /dev/null; stderr goes to the error log file when there is
 * one (--error-log), else it stays. */
int daemonize(char *err, size_t errlen);

/* The ids --user/--group name (the user's group when no group is given;
 * ours for what is not given). */
int user_ids(const char *user, const char *group, uid_t *uid, gid_t *gid, char *err,
             size_t errlen);

/* Whether drop_privileges can work: --user/--group need a start as root.
 * Checked before anything is bound (and on a reload), so that workers do
 * not die at start over it, one after another. 0, or -1 with err. */
int privileges_droppable(const char *user, const char *group, char *err, size_t errlen);

/* setgid/setuid to uid and gid (user_ids resolved them from --user and
 * --group) when either was named; that needs root. */
int drop_privileges(const char *user, const char *group, uid_t uid, gid_t gid, char *err,
                    size_t errlen);

#endif

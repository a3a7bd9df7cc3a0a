/* Binary upgrade on USR2, as nginx does it. The master forks a child that
 * execs the binary with every listen socket inherited (net/inherit.h) and
 * the write end of a pipe named by HERD_UPGRADE_READY_FD. The new master
 * starts its workers on those sockets and writes one byte to the pipe once
 * they serve; only then does the old master drain its workers and exit.
 * Queued connections wait in the shared sockets meanwhile, so none is lost.
 * EOF on the pipe, the child's death or a deadline before that byte is a
 * failed upgrade, and the old master goes on serving. Calls return 0 or
 * -errno unless they say otherwise. */
#ifndef HERD_PROC_UPGRADE_H
#define HERD_PROC_UPGRADE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "net/inherit.h"

#define UPGRADE_READY_ENV "HERD_UPGRADE_READY_FD"
/* The new master's end of a handover channel from the old one: the old
 * master's idle connections come here once the new one serves. */
#define UPGRADE_HANDOVER_ENV "HERD_UPGRADE_HANDOVER_FD"
/* The new master's copy of the TLS session-ticket keys (proc/tls_setup.h),
 * so tickets issued before the upgrade resume after it. */
#define UPGRADE_TICKETS_ENV "HERD_UPGRADE_TICKETS_FD"

/* The old master's view of one upgrade in flight. */
struct upgrade {
    pid_t pid;          /* the new master, 0 when none is starting */
    int fd;             /* read end of the ready pipe, -1 once closed */
    int ho_fd;          /* our end of the handover channel to it (proc/handover.h), or -1 */
    int64_t deadline_ms;
};

/* The binary to exec: path if set, else this process's own executable
 * (still found when it was replaced on disk). 0, or -1 with a reason. */
int upgrade_binary(const char *path, char *out, size_t n, char *err, size_t errlen);

/* Forks and execs path with argv; fds[0..n-1] become the child's fds 3..
 * named by names; tickets_fd (or -1) is passed too, named by
 * HERD_UPGRADE_TICKETS_FD. On success fills u (pid, fd, deadline) and
 * returns 0; else -1 with a one-line reason in err and nothing left behind
 * (tickets_fd stays the caller's either way). */
int upgrade_start(struct upgrade *u, const char *path, char *const argv[], const int *fds,
                  char *const *names, int n, int tickets_fd, int64_t deadline_ms, char *err,
                  size_t errlen);

/* The ready pipe is readable: 1 when the new master reported ready, 0 when
 * nothing came yet, -1 when it was closed without a word. */
int upgrade_read(struct upgrade *u);

/* Closes the pipe and forgets the child (which the caller reaps). */
void upgrade_clear(struct upgrade *u);

/* In a master started by an upgrade: *fd is the ready pipe named by
 * HERD_UPGRADE_READY_FD (the variable is then unset, the fd made
 * close-on-exec), or -1 when the variable is not set. Call it after
 * inherit_from_env. Returns 0; or -1 with a one-line reason in err when
 * the variable is set but names no pipe open for writing, or names one of
 * the inherited sockets: writing the ready byte there would corrupt
 * someone's file or close a listener, and the "upgrade" would skip
 * --daemon. */
int upgrade_ready_fd(const struct inherited *in, int *fd, char *err, size_t errlen);

/* New master: the handover channel the old master passed with the ready
 * pipe (right after it), or -1 when there is none. */
int upgrade_handover_fd(int ready_fd);

/* New master: the ticket-key file the old master passed after the ready
 * pipe (a regular file, close-on-exec from here on), or -1 when there is
 * none. */
int upgrade_tickets_fd(int ready_fd);

/* Writes the ready byte and closes fd. */
int upgrade_report_ready(int fd);

#endif

/* The master's side of a binary upgrade (proc/upgrade.h has the
 * mechanism): as the old master, USR2 execs the new binary with every
 * listen socket, and the ready pipe, its deadline or the new master's
 * death decide whether we hand over or keep serving; as a new master, we
 * tell the old one once our workers serve. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "proc/daemon.h"
#include "proc/master_internal.h"

/* The new master did not make it: we keep serving, and the pid file names
 * us again (the new master may have written its own). */
void master_upgrade_failed(struct master *m, const char *fmt, ...)
{
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    log_msg(LOG_ERROR, "upgrade failed: %s; the old master (pid %d) keeps serving", why, m->pid);
    if (m->up.fd >= 0)
        loop_del(&m->loop, m->up.fd);
    upgrade_clear(&m->up);
    char err[1200];
    if (pidfile_write(m->cfg->pid_file, err, sizeof err) < 0)
        log_msg(LOG_ERROR, "%s", err);
}

void master_start_upgrade(struct master *m)
{
    if (m->stopping) {
        log_msg(LOG_NOTICE, "USR2 ignored: stopping");
        return;
    }
    if (m->up.pid) {
        log_msg(LOG_NOTICE, "USR2 ignored: an upgrade is in flight (new master pid %d)",
                m->up.pid);
        return;
    }
    if (m->ready_fd >= 0) {
        log_msg(LOG_NOTICE, "USR2 ignored: this master has not taken over from its old "
                            "master yet");
        return;
    }
    char path[4096], err[4200];
    if (upgrade_binary(m->cfg->upgrade_binary, path, sizeof path, err, sizeof err) < 0) {
        log_msg(LOG_ERROR, "upgrade failed: %s; the old master (pid %d) keeps serving", err,
                m->pid);
        return;
    }
    /* Every socket once, in slot order (shared ones appear once). */
    static int fds[CONFIG_MAX_LISTEN * MAX_WORKERS];
    static char namebuf[CONFIG_MAX_LISTEN * MAX_WORKERS][512];
    static char *names[CONFIG_MAX_LISTEN * MAX_WORKERS];
    int n = 0;
    for (int l = 0; l < m->cfg->nlisten; l++) {
        int count = listeners_count(&m->ls, l);
        for (int i = 0; i < count; i++, n++) {
            fds[n] = m->ls.fds[l][i];
            inherit_name(&m->cfg->listen[l], i, !m->ls.path_ours[l], namebuf[n], sizeof namebuf[n]);
            names[n] = namebuf[n];
        }
    }
    char **argv = calloc((size_t)m->argc + 2, sizeof *argv);
    if (!argv) {
        log_msg(LOG_ERROR, "upgrade failed: out of memory");
        return;
    }
    argv[0] = path;
    for (int i = 0; i < m->argc; i++)
        argv[i + 1] = m->argv[i];
    int tickets_fd = tls_setup_export(&m->tls);
    int rc = upgrade_start(&m->up, path, argv, fds, names, n, tickets_fd,
                           clock_now_ms() + m->cfg->upgrade_timeout_ms, err, sizeof err);
    if (tickets_fd >= 0)
        close(tickets_fd);
    free(argv);
    if (rc < 0) {
        log_msg(LOG_ERROR, "upgrade failed: %s; the old master (pid %d) keeps serving", err,
                m->pid);
        return;
    }
    if (loop_add(&m->loop, m->up.fd, LOOP_IN, TAG_UPGRADE) < 0) {
        kill(m->up.pid, SIGKILL);
        master_upgrade_failed(m, "epoll: %s", strerror(errno));
        return;
    }
    log_msg(LOG_NOTICE, "upgrade: started %s as pid %d with %d sockets", path, m->up.pid, n);
}

void master_upgrade_event(struct master *m)
{
    if (m->up.fd < 0)
        return; /* a stale event: the pipe was closed earlier in this batch */
    int r = upgrade_read(&m->up);
    if (r == 0)
        return;
    if (r < 0) {
        /* Closed without a word: it died or is dying. Its exit status,
         * reaped soon, says why; the deadline is the safety net. */
        loop_del(&m->loop, m->up.fd);
        close(m->up.fd);
        m->up.fd = -1;
        m->up.deadline_ms = clock_now_ms() + UPGRADE_EXIT_MS;
        return;
    }
    log_msg(LOG_NOTICE, "upgrade: the new master (pid %d) serves; the old master (pid %d) "
                        "drains its workers and exits", m->up.pid, m->pid);
    loop_del(&m->loop, m->up.fd);
    /* Keep the handover channel: our idle connections go that way. */
    if (m->up.ho_fd >= 0 &&
        loop_add(&m->loop, m->up.ho_fd, EPOLLIN, TAG_HANDOVER_SUCC) == 0) {
        m->succ_fd = m->up.ho_fd;
        m->up.ho_fd = -1;
    }
    upgrade_clear(&m->up);
    m->handed_over = 1;
    master_begin_stop(m, 0);
}

void master_upgrade_deadline(struct master *m)
{
    if (!m->up.pid || clock_now_ms() < m->up.deadline_ms)
        return;
    pid_t pid = m->up.pid;
    int closed = m->up.fd < 0;
    kill(pid, SIGKILL);
    if (closed)
        master_upgrade_failed(m, "the new master (pid %d) closed its ready pipe without being ready "
                          "(killed)", pid);
    else
        master_upgrade_failed(m, "the new master (pid %d) was not ready within %lld ms "
                              "(--upgrade-timeout; killed)", pid,
                              (long long)m->cfg->upgrade_timeout_ms);
}

/* Whether the worker process whose first slot is s serves: each of its
 * slots (threads) said so once its loop was set up. */
static int worker_ready(const struct master *m, int s)
{
    for (int k = 0; k < m->nthreads; k++)
        if (!SB_GET(m->sb->slots[s + k].ready))
            return 0;
    return 1;
}

/* New master: once every worker reported ready (and none is waiting for a
 * respawn), tell the old one. Polled every UPGRADE_SETTLE_MS / 3. */
void master_report_ready(struct master *m)
{
    if (m->ready_fd < 0 || m->stopping || clock_now_ms() < m->settle_at)
        return;
    int serving = 0, pending = 0;
    for (int s = 0; s < nslots(m); s++)
        serving += m->w[s].pid && m->w[s].first && !m->w[s].draining && worker_ready(m, s);
    for (int i = 0; i < m->nworkers; i++)
        pending += m->rs[i].at_ms != 0;
    if (serving < m->nworkers || pending) {
        m->settle_at = clock_now_ms() + UPGRADE_SETTLE_MS / 3;
        return;
    }
    int rc = upgrade_report_ready(m->ready_fd);
    m->ready_fd = -1;
    if (rc < 0)
        log_msg(LOG_WARN, "upgrade: cannot tell the old master we serve: %s", strerror(-rc));
    else
        log_msg(LOG_NOTICE, "upgrade: master %d serves; told the old master", m->pid);
}

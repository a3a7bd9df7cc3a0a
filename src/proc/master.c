#include "proc/master.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/signals.h"
#include "net/inherit.h"
#include "proc/daemon.h"
#include "proc/logger.h"
#include "proc/health.h"
#include "proc/master_internal.h"
#include "proc/upstream_index.h"
#include "proc/listen_change.h"
#include "proc/worker_cpu.h"

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 30000
#define QUICK_DEATH_MS 1000 /* a worker dying sooner counts as failing at start */

/* ---- children ---- */

/* In a new child: die with the master, keep only what this child uses. */
static void child_setup(struct master *m)
{
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != m->pid)
        _exit(0);
    close(m->sfd);
    master_handover_close_in_child(m);
    if (m->up.fd >= 0)
        close(m->up.fd);
    if (m->ready_fd >= 0)
        close(m->ready_fd);
    if (m->log_out >= 0) /* the logger's (spawn_logger takes it first) */
        close(m->log_out);
    health_close_in_child(m->health);
    m->health = NULL;
}

/* The fd a checked access log was opened on goes to the next logger; a
 * new check replaces it (-1: none). */
static void keep_log_out(struct master *m, int fd)
{
    if (m->log_out >= 0)
        close(m->log_out);
    m->log_out = fd;
}

static pid_t spawn_logger(struct master *m)
{
    pid_t pid = fork();
    if (pid < 0) {
        log_msg(LOG_ERROR, "fork logger: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        int out = m->log_out; /* opened by the check: a FIFO's reader saw no close */
        m->log_out = -1;
        child_setup(m);
        loop_close(&m->loop);
        if (m->dispatch)
            dispatch_close_in_child(m->dispatch);
        listeners_close(&m->ls);
        close(m->log_tx);
        /* as for a worker: on the status page before it has its name */
        SB_SET(m->sb->logger_pid, getpid());
        prctl(PR_SET_NAME, "herd-logger");
        _exit(logger_main(m->log_rx, out, m->log_path, &m->sb->log_write_dropped));
    }
    keep_log_out(m, -1); /* the logger has it; a later one opens the path itself */
    /* One logger at a time: a restart still waiting out its backoff (a
     * reload to another log starts one at once) is done now. A second one
     * read the workers' records too, unknown to the master, and no USR1
     * reached it (red-team pass 33). */
    m->logger_respawn_at = 0;
    m->logger = pid;
    m->logger_started_ms = clock_now_ms();
    SB_SET(m->sb->logger_pid, pid);
    return pid;
}

/* The first of n consecutive free slots, or -1. */
static int free_slots(const struct master *m, int n)
{
    for (int s = 0; s + n <= nslots(m); s++) {
        int k = 0;
        while (k < n && m->w[s + k].pid == 0)
            k++;
        if (k == n)
            return s;
    }
    return -1;
}

/* --worker-cpus auto: the worker on its CPU, and its own reuseport
 * sockets steered there (an inherited socket shared by all is not).
 * Without it the sockets are unsteered: a reload or an upgrade that
 * turned it off must not leave the last generation's steering behind. */
static void place_worker(const struct master *m, int index)
{
    int pin = m->cfg->worker_cpus && m->nthreads == 1;
    int cpu = pin ? worker_cpu_of(index) : -1;
    int steer[CONFIG_MAX_LISTEN], n = 0;
    for (int l = 0; l < m->cfg->nlisten; l++)
        if (m->model->layout == LAYOUT_PER_WORKER && !m->ls.shared[l])
            steer[n++] = m->ls.fds[l][index];
    char err[160];
    if (cpu < 0)
        worker_cpu_unsteer(steer, n);
    else if (worker_cpu_pin(cpu, steer, n, err, sizeof err) < 0)
        log_msg(LOG_WARN, "worker %d: worker-cpus: %s", index, err);
}

/* Both sides of the fork store the same pid and state: the child before it
 * takes its name, so whoever sees herd-wN (ps, a test) also finds it on the
 * status page; the parent because it may run first. */
static void mark_running(struct master *m, int slot, pid_t pid)
{
    for (int k = 0; k < m->nthreads; k++) {
        SB_SET(m->sb->slots[slot + k].pid, pid);
        SB_SET(m->sb->slots[slot + k].state, SB_RUNNING);
    }
}

/* In a new worker: keep the sockets its layout gives it, drop privileges
 * and run the model's worker. Never returns. */
static void worker_child(struct master *m, int index, int slot, int channel, int handover)
{
    child_setup(m);
    loop_close(&m->loop);
    static int fds[CONFIG_MAX_LISTEN * MAX_WORKERS];
    int keep[CONFIG_MAX_LISTEN][MAX_WORKERS] = {{0}};
    for (int l = 0; l < m->cfg->nlisten; l++) {
        for (int t = 0; t < m->nthreads; t++) {
            int i = m->ls.shared[l] ? 0
                    : m->model->layout == LAYOUT_PER_THREAD ? t
                    : m->model->layout == LAYOUT_PER_WORKER ? index : 0;
            fds[l * m->nthreads + t] = m->ls.fds[l][i];
            keep[l][i] = 1;
        }
        int count = listeners_count(&m->ls, l);
        for (int i = 0; i < count; i++)
            if (!keep[l][i] || m->model->layout == LAYOUT_DISPATCH)
                close(m->ls.fds[l][i]);
    }
    if (m->dispatch)
        dispatch_close_in_child(m->dispatch);
    if (m->log_rx >= 0)
        close(m->log_rx);
    place_worker(m, index);
    char err[256];
    if (drop_privileges(m->cfg->user, m->cfg->group, m->cfg->uid, m->cfg->gid, err,
                        sizeof err) < 0) {
        log_msg(LOG_CRIT, "worker %d: %s", index, err);
        _exit(1);
    }
    mark_running(m, slot, getpid());
    char name[16];
    snprintf(name, sizeof name, "herd-w%d", index % 1000);
    prctl(PR_SET_NAME, name);
    int sfd = signals_open();
    struct worker_env env = {
        .listen_fds = m->model->layout == LAYOUT_DISPATCH ? NULL : fds,
        .nthreads = m->nthreads,
        .signal_fd = sfd,
        /* harmless on a socket of its own, needed on a shared one */
        .exclusive = !m->cfg->accept_herd,
        .channel_fd = channel,
        .handover_fd = handover,
        .slot = &m->sb->slots[slot],
        .sb = m->sb,
        .log_fd = m->cfg->access_log[0] ? m->log_tx : -1,
        .tls = m->tls.server,
    };
    _exit(m->model->worker_main(m->cfg, &env));
}

static pid_t spawn_worker(struct master *m, int index)
{
    int slot = free_slots(m, m->nthreads);
    if (slot < 0) {
        log_msg(LOG_ERROR, "no free scoreboard slot for worker %d", index);
        return -1;
    }
    int channel = -1;
    if (m->model->layout == LAYOUT_DISPATCH) {
        channel = dispatch_channel(m->dispatch, slot);
        if (channel < 0) {
            log_msg(LOG_ERROR, "worker %d: channel: %s", index, strerror(-channel));
            return -1;
        }
    }
    /* Before the fork: the worker's first access-log record names it. */
    for (int k = 0; k < m->nthreads; k++) {
        SB_SET(m->sb->slots[slot + k].generation, m->gen);
        SB_SET(m->sb->slots[slot + k].ready, 0);
    }
    int handover = -1;
    if (m->model->hands_over) {
        handover = master_handover_open(m, slot);
        if (handover < 0) /* it serves; on a reload it just drains */
            log_msg(LOG_ERROR, "worker %d: handover channel: %s", index, strerror(-handover));
    }
    /* Before the fork: the worker's own counters move once it runs, and a
     * late store of zero from here would undo them. */
    for (int k = 0; k < m->nthreads; k++) {
        struct sb_slot *sl = &m->sb->slots[slot + k];
        SB_SET(sl->index, (uint32_t)(m->nthreads > 1 ? k : index));
        SB_SET(sl->started, (int64_t)time(NULL));
        SB_SET(sl->active, 0);
        SB_SET(sl->idle, 0);
    }
    pid_t pid = fork();
    if (pid < 0) {
        log_msg(LOG_ERROR, "fork worker: %s", strerror(errno));
        if (channel >= 0)
            close(channel);
        if (handover >= 0) {
            close(handover);
            master_handover_close(m, slot);
        }
        return -1;
    }
    if (pid == 0)
        worker_child(m, index, slot, channel, handover);
    if (channel >= 0)
        close(channel);
    if (handover >= 0)
        close(handover);
    mark_running(m, slot, pid);
    for (int k = 0; k < m->nthreads; k++) {
        m->w[slot + k] = (struct wproc){.pid = pid, .first = k == 0, .index = index,
                                        .gen = m->gen, .started_ms = clock_now_ms(),
                                        .shutdown_ms = m->cfg->shutdown_timeout_ms};
    }
    log_debug("worker %d started: pid %d, generation %u, slot %d", index, pid, m->gen, slot);
    return pid;
}

static void signal_generation(struct master *m, int sig, int only_old)
{
    for (int s = 0; s < nslots(m); s++) {
        struct wproc *w = &m->w[s];
        if (!w->pid || (only_old && w->gen == m->gen))
            continue;
        if (w->first)
            kill(w->pid, sig);
        /* An old generation ends itself at its shutdown timeout; one that
         * cannot (stopped, looping) is ended here a second later, as a stop
         * ends the rest: its listen wakeups and dispatch channel pass on. */
        if (only_old && !w->kill_at)
            w->kill_at = clock_now_ms() + w->shutdown_ms + 1000;
        w->draining = 1;
        SB_SET(m->sb->slots[s].state, SB_DRAINING);
        if (m->dispatch)
            dispatch_drop(m->dispatch, s);
    }
}

/* SIGKILLs the old-generation workers past their kill_at (once each);
 * returns the ms until the next kill_at, or -1 when none waits. */
static int kill_overdue(struct master *m)
{
    int64_t now = clock_now_ms(), next = -1;
    for (int s = 0; s < nslots(m); s++) {
        struct wproc *w = &m->w[s];
        if (!w->pid || !w->first || !w->kill_at)
            continue;
        if (now < w->kill_at) {
            next = next < 0 || w->kill_at < next ? w->kill_at : next;
            continue;
        }
        log_msg(LOG_WARN, "worker %d (pid %d, generation %u) still draining a second past its "
                "shutdown timeout: killed", w->index, w->pid, w->gen);
        kill(w->pid, SIGKILL);
        w->kill_at = 0;
    }
    return next < 0 ? -1 : (int)(next - now) + 1;
}

static int live_workers(const struct master *m)
{
    int n = 0;
    for (int s = 0; s < nslots(m); s++)
        n += m->w[s].pid != 0 && m->w[s].first;
    return n;
}

static void describe_exit(int status, char *buf, size_t n)
{
    if (WIFSIGNALED(status))
        snprintf(buf, n, "killed by signal %d", WTERMSIG(status));
    else
        snprintf(buf, n, "exited with status %d", WEXITSTATUS(status));
}

static void reap(struct master *m)
{
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        char how[64];
        describe_exit(status, how, sizeof how);
        if (pid == m->logger) {
            m->logger = 0;
            SB_SET(m->sb->logger_pid, 0);
            if (pid == m->logger_retired) {
                /* stopped by a reload for its new log: the new logger
                 * starts now, and this is no death (no error line, no
                 * restart counted, no backoff) */
                m->logger_retired = 0;
                if (!m->stopping && m->log_path[0])
                    m->logger_respawn_at = clock_now_ms();
                continue;
            }
            if (!m->stopping && m->log_path[0]) {
                /* a logger that keeps failing (its log cannot be written)
                 * is restarted less and less often, as a worker is */
                int64_t now = clock_now_ms(), delay = BACKOFF_MIN_MS;
                if (now - m->logger_started_ms < 10000) {
                    int q = ++m->logger_quick_deaths;
                    delay = BACKOFF_MIN_MS << (q < 9 ? q - 1 : 8);
                    if (delay > BACKOFF_MAX_MS)
                        delay = BACKOFF_MAX_MS;
                } else {
                    m->logger_quick_deaths = 0;
                }
                log_msg(LOG_ERROR, "logger (pid %d) %s; restarting it in %lld ms", pid, how,
                        (long long)delay);
                SB_ADD(m->sb->logger_restarts, 1);
                m->logger_respawn_at = now + delay;
            }
            continue;
        }
        if (pid == m->up.pid) {
            master_upgrade_failed(m, "the new master (pid %d) %s before it was ready", pid, how);
            continue;
        }
        int s = 0;
        while (s < nslots(m) && m->w[s].pid != pid)
            s++;
        if (s == nslots(m))
            continue;
        struct wproc w = m->w[s];
        /* What it handed over before it left is placed first. */
        for (int i = 0; i < 64 && m->ho[s] >= 0; i++)
            master_handover_event(m, s);
        master_handover_close(m, s);
        for (int k = s; k < nslots(m) && m->w[k].pid == pid; k++) {
            m->w[k].pid = 0;
            SB_SET(m->sb->slots[k].pid, 0);
            SB_SET(m->sb->slots[k].active, 0);
            SB_SET(m->sb->slots[k].idle, 0);
            SB_SET(m->sb->slots[k].full, 0);
            SB_SET(m->sb->slots[k].state, SB_FREE);
            if (m->dispatch)
                dispatch_exited(m->dispatch, k, !m->stopping);
        }
        if (w.draining || m->stopping) {
            log_debug("worker %d (pid %d, generation %u) %s", w.index, pid, w.gen, how);
            continue;
        }
        /* An unexpected death: respawn into the same worker index. */
        struct respawn *r = &m->rs[w.index];
        int64_t lived = clock_now_ms() - w.started_ms;
        int64_t delay = 0;
        if (lived < QUICK_DEATH_MS) {
            r->quick_deaths++;
            delay = BACKOFF_MIN_MS << (r->quick_deaths < 9 ? r->quick_deaths - 1 : 8);
            if (delay > BACKOFF_MAX_MS)
                delay = BACKOFF_MAX_MS;
        } else {
            r->quick_deaths = 0;
        }
        log_msg(LOG_ERROR, "worker %d (pid %d) %s; respawning%s", w.index, pid, how,
                delay ? " after a backoff (it keeps dying at start)" : "");
        SB_ADD(m->sb->worker_restarts, 1);
        r->at_ms = clock_now_ms() + delay;
    }
}

static void run_respawns(struct master *m)
{
    int64_t now = clock_now_ms();
    for (int i = 0; i < m->nworkers; i++) {
        struct respawn *r = &m->rs[i];
        if (r->at_ms && r->at_ms <= now) {
            r->at_ms = 0;
            if (spawn_worker(m, i) < 0)
                r->at_ms = now + BACKOFF_MAX_MS / 10;
        }
    }
    if (m->logger_respawn_at && m->logger_respawn_at <= now) {
        m->logger_respawn_at = 0;
        if (!m->logger && spawn_logger(m) < 0)
            m->logger_respawn_at = now + 1000;
    }
}

static int next_timeout(const struct master *m)
{
    int64_t next = -1;
    for (int i = 0; i < m->nworkers; i++)
        if (m->rs[i].at_ms && (next < 0 || m->rs[i].at_ms < next))
            next = m->rs[i].at_ms;
    if (m->logger_respawn_at && (next < 0 || m->logger_respawn_at < next))
        next = m->logger_respawn_at;
    if (m->stopping && (next < 0 || m->stop_deadline < next))
        next = m->stop_deadline;
    if (m->up.pid && (next < 0 || m->up.deadline_ms < next))
        next = m->up.deadline_ms;
    if (m->ready_fd >= 0 && !m->stopping && (next < 0 || m->settle_at < next))
        next = m->settle_at;
    if (m->tls.rotate_at_ms && (next < 0 || m->tls.rotate_at_ms < next))
        next = m->tls.rotate_at_ms;
    int64_t hc = m->stopping ? -1 : health_next(m->health);
    if (hc >= 0 && (next < 0 || hc < next))
        next = hc;
    if (next < 0)
        return -1;
    /* a deadline a config may put weeks away (2^31 ms overflowed an int)
     * is waited for a minute at a time */
    int64_t d = next - clock_now_ms();
    return d <= 0 ? 0 : d > 60000 ? 60000 : (int)d + 5;
}

/* ---- reload ---- */

static int open_log_channel(struct master *m);
static void tree_size(const struct master *m, const struct serve_config *cfg, int *nworkers,
                      int *nthreads);

/* A line about a reload: logged, and kept for its answer. */
static void reload_say(struct master *m, enum log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void reload_say(struct master *m, enum log_level level, const char *fmt, ...)
{
    char line[1400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    log_msg(level, "%s", line);
    size_t room = sizeof m->answer.text - m->answer_len;
    int n = snprintf(m->answer.text + m->answer_len, room, "%s\n", line);
    if (n > 0)
        m->answer_len += (size_t)n < room ? (size_t)n : room - 1;
}

/* Returns 1 when a new generation started, 0 when the reload was refused. */
static int reload(struct master *m)
{
    static struct serve_config next; /* large: keep it off the stack */
    char err[1200];
    if (!m->hooks->reload || m->hooks->reload(m->hooks->arg, &next, err, sizeof err) < 0) {
        reload_say(m, LOG_ERROR, "reload refused, old workers keep serving: %s",
                   m->hooks->reload ? err : "no way to re-read the settings");
        return 0;
    }
    int nworkers, nthreads;
    tree_size(m, &next, &nworkers, &nthreads);
    /* With a socket per worker or thread, the count is the socket set's. */
    int per_socket = m->model->layout == LAYOUT_PER_WORKER ||
                     m->model->layout == LAYOUT_PER_THREAD;
    int free = 0;
    for (int s = 0; s < nslots(m); s++)
        free += m->w[s].pid == 0;
    if (free < nworkers * nthreads) {
        reload_say(m, LOG_ERROR, "reload refused: %s", nworkers * nthreads > m->nworkers *
                   m->nthreads ? "no room in the scoreboard for that many more workers "
                   "while the old ones drain (restart)" : "an earlier generation is still "
                   "draining");
        return 0;
    }
    /* With no listen address given, the passed sockets stay the set. */
    if (next.listen_default && m->ls.passed) {
        memcpy(next.listen, m->cfg->listen, sizeof next.listen);
        memcpy(next.listen_proxy, m->cfg->listen_proxy, sizeof next.listen_proxy);
        memcpy(next.listen_tls, m->cfg->listen_tls, sizeof next.listen_tls);
        next.nlisten = m->cfg->nlisten;
    }
    /* A new access log that cannot be opened refuses the reload, as it
     * refuses a start: taken, it would leave a logger failing for good. */
    /* The check may create the file: a reload refused later removes what
     * it made, as it removes the unix socket files it bound. */
    int log_made = 0, log_fd = -1;
    if (next.access_log[0] && strcmp(next.access_log, m->cfg->access_log) != 0) {
        log_fd = logger_open_file(next.access_log, &log_made);
        if (log_fd < 0) {
            reload_say(m, LOG_ERROR, "reload refused, old workers keep serving: access log %s: %s",
                       next.access_log, strerror(-log_fd));
            return 0;
        }
    }
    /* New addresses are bound before anything changes: one that cannot be
     * refuses the reload, and TLS that does not load keeps the old ones. */
    static struct listen_change ch; /* large too */
    int refused = listen_change_prepare(&ch, &m->ls, m->cfg, &next,
                                        per_socket ? nworkers * nthreads : 1, err, sizeof err) < 0;
    if (!refused && (privileges_droppable(next.user, next.group, err, sizeof err) < 0 ||
                     tls_setup_load(&m->tls, &next, err, sizeof err) < 0)) {
        listen_change_abort(&ch, &next);
        refused = 1;
    }
    if (refused) {
        if (log_fd >= 0)
            close(log_fd);
        if (log_made)
            unlink(next.access_log);
        reload_say(m, LOG_ERROR, "reload refused, old workers keep serving: %s", err);
        return 0;
    }
    if (strcmp(next.model, m->cfg->model))
        reload_say(m, LOG_WARN, "reload: the model changes only on restart");
    if (strcmp(next.error_log, m->cfg->error_log) || strcmp(next.pid_file, m->cfg->pid_file))
        reload_say(m, LOG_WARN, "reload: the error log and pid file change only on restart");
    memcpy(next.error_log, m->cfg->error_log, sizeof next.error_log);
    memcpy(next.pid_file, m->cfg->pid_file, sizeof next.pid_file);
    int listen_changed = listen_change_any(&ch, &m->ls);
    if (m->dispatch && listen_changed) {
        int keep[CONFIG_MAX_LISTEN];
        for (int l = 0; l < ch.next.nlisten; l++)
            keep[l] = ch.next.fds[l][0];
        dispatch_retire_listeners(m->dispatch, keep, ch.next.nlisten);
    }
    listen_change_commit(&ch, &m->ls, m->cfg, &next);
    memcpy(next.model, m->cfg->model, sizeof next.model);
    next.daemon = m->cfg->daemon;
    /* Upstream servers keep their shared entries while any worker that
     * knows them runs (proc/upstream_index.h) */
    uint32_t live = 0;
    for (int s = 0; s < nslots(m); s++)
        if (m->w[s].pid != 0)
            live |= m->up_mask[m->w[s].gen % 16];
    upindex_assign(m->cfg, &next, live, m->sb);
    static uint8_t carry[SB_UPSTREAMS];
    health_carry(m->cfg, &next, m->sb, carry);
    int log_changed = strcmp(next.access_log, m->cfg->access_log) != 0;
    *m->cfg = next;
    if (log_changed) {
        m->logger_quick_deaths = 0; /* a new log, a new start */
        /* a restart still waiting out its backoff is done below, or not
         * at all when the log is off now (it started a logger for no path) */
        m->logger_respawn_at = 0;
        keep_log_out(m, log_fd);
        snprintf(m->log_path, sizeof m->log_path, "%s", m->cfg->access_log);
        if (m->logger) {
            kill(m->logger, SIGTERM); /* reaped and restarted with the new path */
            m->logger_retired = m->logger;
        } else if (m->log_path[0] && open_log_channel(m) == 0) {
            spawn_logger(m);
        }
    }
    /* the checks follow the new groups (server indexes may have moved);
     * the verdicts of servers kept go with them */
    health_destroy(m->health);
    m->health = health_create(m->cfg, m->sb, &m->loop, TAG_HEALTH, carry);
    upindex_publish(m->sb, m->cfg);
    m->gen++;
    m->up_mask[m->gen % 16] = upindex_mask(m->cfg);
    SB_SET(m->sb->generation, m->gen);
    for (int i = 0; i < MAX_WORKERS; i++)
        m->rs[i].at_ms = 0; /* old indexes beyond a smaller count too */
    m->nworkers = nworkers;
    m->nthreads = nthreads;
    for (int i = 0; i < m->nworkers; i++)
        spawn_worker(m, i);
    /* HUP tells old workers to hand their idle connections over to the
     * new ones (proc/handover.h); TERM just drains. */
    signal_generation(m, m->model->hands_over ? SIGHUP : SIGTERM, 1);
    if (m->dispatch && listen_changed) {
        int fds[CONFIG_MAX_LISTEN];
        for (int l = 0; l < m->ls.nlisten; l++)
            fds[l] = m->ls.fds[l][0];
        dispatch_set_listeners(m->dispatch, fds, m->ls.nlisten);
    }
    reload_say(m, LOG_NOTICE, "reloaded: generation %u, %d workers%s", m->gen, m->nworkers,
               listen_changed ? ", a new listen set" : "");
    return 1;
}

/* HUP: reload, then answer in PIDFILE.reload. */
static void answer_reload(struct master *m)
{
    m->answer.started_ns = reload_answer_clock();
    m->answer.pid = m->pid;
    m->answer.text[0] = '\0';
    m->answer_len = 0;
    if (m->stopping) {
        reload_say(m, LOG_NOTICE, "reload refused: the server is stopping");
        m->answer.ok = 0;
    } else {
        m->answer.ok = reload(m);
    }
    char err[1200];
    if (reload_answer_write(m->cfg->pid_file, &m->answer, err, sizeof err) < 0)
        log_msg(LOG_ERROR, "%s", err);
}

/* ---- signals ---- */

void master_begin_stop(struct master *m, int fast)
{
    if (m->stopping >= (fast ? 2 : 1))
        return;
    m->stopping = fast ? 2 : 1;
    m->stop_deadline = clock_now_ms() + (fast ? 2000 : m->cfg->shutdown_timeout_ms + 1000);
    for (int i = 0; i < m->nworkers; i++)
        m->rs[i].at_ms = 0;
    if (m->dispatch)
        dispatch_stop(m->dispatch);
    /* Upgraded: HUP, so the workers hand their idle connections over (to
     * the new master, through us); else TERM, and they close them. */
    int hand_over = m->succ_fd >= 0 && m->model->hands_over;
    signal_generation(m, fast ? SIGQUIT : hand_over ? SIGHUP : SIGTERM, 0);
    /* The workers hold the sockets now; closing ours refuses nothing yet. */
    listeners_close(&m->ls);
    log_msg(LOG_NOTICE, "%s stop: %d workers", fast ? "fast" : "graceful", live_workers(m));
}

/* USR1: the error log's new file belongs to the user the workers run as,
 * so that they can open it too; they do before their next line. */
static void reopen_error_log(struct master *m)
{
    int uid = -1, gid = -1;
    if (geteuid() == 0 && (m->cfg->user[0] || m->cfg->group[0])) {
        uid = (int)m->cfg->uid; /* resolved with the config */
        gid = (int)m->cfg->gid;
    }
    int rc = log_reopen(uid, gid);
    if (rc < 0)
        log_msg(LOG_ERROR, "error log: reopen %s: %s (keeping the old file)",
                m->cfg->error_log, strerror(-rc));
}

static void on_signal(struct master *m, int sig)
{
    switch (sig) {
    case SIGTERM:
    case SIGINT:
        master_begin_stop(m, 0);
        break;
    case SIGQUIT:
        master_begin_stop(m, 1);
        break;
    case SIGHUP:
        answer_reload(m);
        break;
    case SIGUSR2:
        master_start_upgrade(m);
        break;
    case SIGUSR1:
        if (m->logger)
            kill(m->logger, SIGUSR1);
        reopen_error_log(m);
        log_msg(LOG_NOTICE, "reopening log files");
        break;
    case SIGCHLD:
        reap(m);
        break;
    default:
        log_msg(LOG_NOTICE, "signal %d ignored", sig);
    }
}

static int open_log_channel(struct master *m)
{
    if (m->log_rx >= 0)
        return 0;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) < 0) {
        log_msg(LOG_CRIT, "socketpair: %s", strerror(errno));
        return -1;
    }
    /* Room for bursts while the logger writes; past it workers buffer, then drop. */
    int size = 4 << 20;
    setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
    setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
    m->log_rx = sv[0];
    m->log_tx = sv[1];
    return 0;
}

/* How many worker processes and threads per process cfg asks of the model. */
static void tree_size(const struct master *m, const struct serve_config *cfg, int *nworkers,
                      int *nthreads)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int n = cfg->workers ? (int)cfg->workers : (int)(ncpu > 0 ? ncpu : 1);
    if (m->model->one_process && cfg->threads)
        n = (int)cfg->threads;
    /* Only the one-per-CPU default can be above it: the config refuses more. */
    if (n > MAX_WORKERS)
        n = MAX_WORKERS;
    if (m->model->single_worker)
        n = 1;
    *nworkers = m->model->one_process ? 1 : n;
    *nthreads = m->model->one_process ? n : 1;
}

/* How many worker processes, threads per process and sockets per listen
 * address the model asks for. */
static void size_tree(struct master *m)
{
    tree_size(m, m->cfg, &m->nworkers, &m->nthreads);
    int n = m->nworkers * m->nthreads;
    m->ls.nsockets =
        m->model->layout == LAYOUT_PER_WORKER || m->model->layout == LAYOUT_PER_THREAD ? n : 1;
}

/* An access log we cannot open fails the start, before anything binds;
 * the fd is kept for the first logger. */
static int check_access_log(struct master *m)
{
    const struct serve_config *cfg = m->cfg;
    if (!cfg->access_log[0])
        return 0;
    int fd = logger_open_file(cfg->access_log, NULL);
    if (fd < 0) {
        fprintf(stderr, "herd: access log %s: %s\n", cfg->access_log, strerror(-fd));
        return -1;
    }
    keep_log_out(m, fd);
    return 0;
}

/* A start refused once the listeners are open: the unix socket files
 * they made go (no server will be behind them); an upgrade's new master
 * leaves its old master's. Returns -1. */
static int failed_after_bind(struct master *m)
{
    if (m->ready_fd < 0)
        listeners_unlink(&m->ls, m->cfg);
    return -1;
}

/* Takes the passed fds, binds, detaches and writes the pid file: every
 * step that can refuse to start, with a line on stderr. 0 or -1. */
static int open_master(struct master *m)
{
    struct serve_config *cfg = m->cfg;
    char err[1200];
    /* The fds the environment names come first: until they are checked,
     * a signalfd or socketpair of ours could land in a gap at fd 3.. and
     * be taken for a passed socket (or closed as a stranger). */
    struct inherited in;
    if (inherit_from_env(&in, err, sizeof err) < 0 ||
        upgrade_ready_fd(&in, &m->ready_fd, err, sizeof err) < 0) {
        fprintf(stderr, "herd: %s\n", err);
        inherit_free(&in);
        return -1;
    }
    m->pred_fd = upgrade_handover_fd(m->ready_fd);
    int tickets_fd = upgrade_tickets_fd(m->ready_fd);
    size_tree(m);
    clock_update();
    if (check_access_log(m) < 0) {
        inherit_free(&in);
        if (tickets_fd >= 0)
            close(tickets_fd);
        return -1;
    }
    /* Certificates and keys are read now, as the user who started us. */
    if (tls_setup_load(&m->tls, cfg, err, sizeof err) < 0) {
        fprintf(stderr, "herd: %s\n", err);
        inherit_free(&in);
        if (tickets_fd >= 0)
            close(tickets_fd);
        return -1;
    }
    /* an upgrade: the old master's ticket keys, so its tickets resume here */
    if (tickets_fd >= 0)
        tls_setup_import(&m->tls, tickets_fd);
    /* Signals are blocked before anyone can learn our address: a HUP that
     * follows "listening on" at once must find the signalfd, not kill us. */
    m->sfd = signals_open();
    int rc = listeners_open(&m->ls, cfg, &in, m->ready_fd >= 0);
    inherit_free(&in);
    if (rc < 0)
        return -1;
    /* "listening on" goes out once nothing can refuse the start, but for
     * --daemon before the detach: whoever started us reads it there. */
    int detach = cfg->daemon && m->ready_fd < 0;
    if (detach)
        for (int l = 0; l < m->ls.nlisten; l++)
            listeners_announce(&m->ls, cfg, l);
    /* A new master from an upgrade is detached already (its old master was). */
    if (detach && daemonize(err, sizeof err) < 0) {
        fprintf(stderr, "herd: %s\n", err);
        return failed_after_bind(m);
    }
    if (cfg->daemon)
        log_take_stderr(); /* after an upgrade too: USR1 must move fd 2 along */
    m->pid = getpid();
    if (m->sfd < 0) {
        fprintf(stderr, "herd: signalfd: %s\n", strerror(-m->sfd));
        return failed_after_bind(m);
    }
    if (pidfile_write(cfg->pid_file, err, sizeof err) < 0) {
        fprintf(stderr, "herd: %s\n", err);
        return failed_after_bind(m);
    }
    if (!detach)
        for (int l = 0; l < m->ls.nlisten; l++)
            listeners_announce(&m->ls, cfg, l);
    return 0;
}

static void create_scoreboard(struct master *m)
{
    int slots = 4 * m->nworkers * m->nthreads + 4;
    m->sb = sb_create((uint32_t)(slots > SB_MAX_SLOTS ? SB_MAX_SLOTS : slots));
    if (!m->sb)
        log_fatal("cannot map the scoreboard: %s", strerror(errno));
    m->sb->master_pid = m->pid;
    m->sb->started = time(NULL);
    snprintf(m->sb->model, sizeof m->sb->model, "%s", m->cfg->model);
    m->gen = 1;
    m->sb->generation = 1;
}

/* dispatch: the master accepts on the listen sockets and hands over fds. */
static void start_dispatch(struct master *m)
{
    const struct serve_config *cfg = m->cfg;
    int lfds[CONFIG_MAX_LISTEN], tcp[CONFIG_MAX_LISTEN];
    for (int i = 0; i < cfg->nlisten; i++) {
        lfds[i] = m->ls.fds[i][0];
        tcp[i] = cfg->listen[i].family != AF_UNIX;
    }
    /* A connection no worker could take within the header timeout is
     * closed, as its worker would have closed it by then. */
    m->dispatch = dispatch_create(&m->loop, lfds, tcp, cfg->nlisten, m->sb,
                                  cfg->dispatch_least, cfg->header_timeout_ms);
    if (!m->dispatch)
        log_fatal("out of memory");
}

/* The scoreboard, the logger, the master's loop and the first workers. */
static int start_children(struct master *m)
{
    const struct serve_config *cfg = m->cfg;
    create_scoreboard(m);
    if (cfg->access_log[0]) {
        snprintf(m->log_path, sizeof m->log_path, "%s", cfg->access_log);
        if (open_log_channel(m) < 0 || spawn_logger(m) < 0)
            return -1;
    }
    if (loop_init(&m->loop) < 0 || loop_add(&m->loop, m->sfd, LOOP_IN, 0) < 0)
        log_fatal("epoll: %s", strerror(errno));
    if (m->pred_fd >= 0 && loop_add(&m->loop, m->pred_fd, EPOLLIN, TAG_HANDOVER_PRED) < 0) {
        close(m->pred_fd);
        m->pred_fd = -1;
    }
    if (m->model->layout == LAYOUT_DISPATCH)
        start_dispatch(m);
    m->health = health_create(cfg, m->sb, &m->loop, TAG_HEALTH, NULL);
    m->up_mask[m->gen % 16] = upindex_mask(cfg);
    upindex_publish(m->sb, cfg);
    for (int i = 0; i < m->nworkers; i++)
        spawn_worker(m, i);
    m->settle_at = clock_now_ms() + UPGRADE_SETTLE_MS / 3;
    log_msg(LOG_NOTICE, "master %d: %d workers x %d threads, model %s, serving %s", m->pid,
            m->nworkers, m->nthreads, cfg->model, cfg->docroot);
    if (cfg->worker_cpus && m->nthreads > 1)
        log_msg(LOG_NOTICE, "worker-cpus auto: workers of %d threads are not pinned",
                m->nthreads);
    if (m->ready_fd >= 0)
        log_msg(LOG_NOTICE, "upgrade: master %d started by the old master (pid %d)", m->pid,
                (int)getppid());
    return 0;
}

/* Waits for the next signal, ready-pipe or dispatch event, or timer. */
static void wait_events(struct master *m)
{
    struct epoll_event ev[64];
    int timeout = next_timeout(m);
    if (m->dispatch && !m->stopping) {
        int t = dispatch_tick(m->dispatch);
        if (t >= 0 && (timeout < 0 || t < timeout))
            timeout = t;
    }
    int acks = master_handover_retry(m);
    if (acks >= 0 && (timeout < 0 || acks < timeout))
        timeout = acks;
    int overdue = kill_overdue(m);
    if (overdue >= 0 && (timeout < 0 || overdue < timeout))
        timeout = overdue;
    int nev = loop_wait(&m->loop, ev, 64, timeout);
    clock_update();
    for (int i = 0; i < nev; i++) {
        if (ev[i].data.u64 == 0) {
            int sig;
            while ((sig = signals_read(m->sfd)) > 0)
                on_signal(m, sig);
        } else if (ev[i].data.u64 == TAG_UPGRADE) {
            master_upgrade_event(m);
        } else if (ev[i].data.u64 == TAG_HANDOVER_PRED) {
            master_handover_pred_event(m);
        } else if (ev[i].data.u64 == TAG_HANDOVER_SUCC) {
            master_handover_succ_event(m);
        } else if (ev[i].data.u64 & TAG_HEALTH) {
            health_event(m->health, (int)(ev[i].data.u64 & 0xffff), ev[i].events);
        } else if (ev[i].data.u64 & TAG_HANDOVER) {
            master_handover_event(m, (int)(ev[i].data.u64 & 0xffff));
        } else if (m->dispatch && !m->stopping) {
            dispatch_event(m->dispatch, ev[i].data.u64, ev[i].events);
        }
    }
}

/* Past the stop deadline: kill what is left and wait for it. */
static void kill_the_rest(struct master *m)
{
    /* A logger still there (stopped, or stuck) is named: "killing 0
     * workers" blamed no one, and what it had not written is lost. */
    if (m->logger)
        log_msg(LOG_WARN, "stop deadline passed: killing %d workers and the logger (pid %d; "
                "the access-log records it had not written are lost)", live_workers(m),
                (int)m->logger);
    else
        log_msg(LOG_WARN, "stop deadline passed: killing %d workers", live_workers(m));
    signal_generation(m, SIGKILL, 0);
    if (m->logger)
        kill(m->logger, SIGKILL);
    /* Not waitpid(-1): a new master from an upgrade is our child too. */
    for (int s = 0; s < nslots(m); s++)
        if (m->w[s].pid && m->w[s].first)
            waitpid(m->w[s].pid, NULL, 0);
    if (m->logger)
        waitpid(m->logger, NULL, 0);
}

/* While stopping: 1 once every worker and the logger are gone (or were
 * killed at the deadline), else 0. */
static int stopped(struct master *m)
{
    if (live_workers(m) == 0 && m->logger) {
        if (!m->logger_told) {
            kill(m->logger, SIGTERM); /* workers are done: flush and go */
            m->logger_told = 1;
        }
    } else if (live_workers(m) == 0) {
        return 1;
    }
    if (clock_now_ms() < m->stop_deadline)
        return 0;
    kill_the_rest(m);
    return 1;
}

static void finish(struct master *m)
{
    struct serve_config *cfg = m->cfg;
    health_destroy(m->health);
    m->health = NULL;
    loop_close(&m->loop);
    reload_answer_remove(cfg->pid_file, m->pid);
    pidfile_remove(cfg->pid_file);
    if (m->up.pid)
        m->handed_over = 1; /* stopped mid-upgrade: the new master may yet serve */
    /* Unix socket paths stay for whoever holds the sockets now: the new
     * master after an upgrade, the old one when we never took over, or
     * systemd when it made them. */
    if (!m->handed_over && m->ready_fd < 0)
        listeners_unlink(&m->ls, cfg);
    if (m->ready_fd >= 0)
        close(m->ready_fd);
    log_msg(LOG_NOTICE, m->handed_over ? "stopped (upgraded)" : "stopped");
}

int master_run(struct serve_config *cfg, const struct master_hooks *hooks)
{
    static struct master mm;
    struct master *m = &mm;
    m->cfg = cfg;
    m->hooks = hooks;
    m->model = hooks->model;
    m->log_rx = m->log_tx = m->log_out = -1;
    m->loop.epfd = -1;
    m->argv = hooks->argv;
    m->argc = hooks->argc;
    m->up.fd = m->up.ho_fd = -1;
    m->ready_fd = m->pred_fd = m->succ_fd = -1;
    for (int s = 0; s < SB_MAX_SLOTS; s++)
        m->ho[s] = -1;
    if (open_master(m) < 0 || start_children(m) < 0)
        return 1;
    for (;;) {
        wait_events(m);
        tls_setup_tick(&m->tls, clock_now_ms());
        if (!m->stopping)
            health_tick(m->health);
        if (!m->stopping)
            run_respawns(m);
        master_upgrade_deadline(m);
        master_report_ready(m);
        if (m->stopping && stopped(m))
            break;
    }
    master_handover_pred_end(m);
    finish(m);
    return 0;
}

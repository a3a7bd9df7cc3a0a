#include "proc/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "core/signals.h"
#include "net/listen.h"
#include "proc/children.h"

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 30000
/* How long a stop waits for the processes it SIGKILLed before it exits
 * without them (one in uninterruptible sleep cannot die sooner). */
#define KILL_WAIT_MS 5000
/* A process still there after a SIGKILL (in uninterruptible sleep) gets
 * another this much later, while herd spawn runs on. */
#define KILL_AGAIN_MS 60000

/* A slot: its child and the child's process group (setpgid in the child,
 * so the group id is the child's pid). Whatever the child forked stays in
 * the group, may hold the socket, and goes when the child goes (what
 * leaves the group is a stray, below). */
struct child {
    pid_t pid;          /* 0: not running */
    pid_t pgid;         /* 0: no process of the group is left */
    int64_t leftover_kill_at; /* child gone, group not: SIGKILL the rest then */
    int64_t started_ms;
    int64_t respawn_at; /* 0: none pending */
    int quick_deaths;   /* in a row */
};

/* An orphan that is in no slot's process group: a process that left its
 * child's group (setsid, setpgid) and whose parent has exited, so the
 * kernel re-parented it to us, the subreaper. No backend runs it any more
 * and it may hold the socket: it gets TERM when found, KILL at kill_at. */
struct stray {
    pid_t pid;
    int64_t kill_at;
};

struct spawner {
    const struct spawn_config *cfg;
    struct listen_addr addr;
    char path[4096];    /* the command, resolved through PATH */
    int lfd;
    struct child *kids;
    int stopping;       /* a stop signal came: no more respawns */
    int64_t kill_at;    /* when stopping: SIGKILL whoever is left */
    int killed;         /* ...which is done: what is found later is SIGKILLed */
    int64_t give_up_at; /* ...and whoever survives that is left behind then */
    int abandoned;      /* gave up waiting: exit now */
    struct stray *strays;
    int nstrays, strays_cap;
    struct pid_list inherited; /* children from before our exec: not ours to stop */
    struct pid_list found;     /* scratch for each look at our children */
    int failed;         /* exit status 1 once everything has stopped */
    int nonzero_exits;  /* children that exited with a failure status */
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int executable(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* Finds the command as execvp would, so a typo fails before any socket or
 * child exists. Returns 0, or -1 with the reason logged. */
static int resolve_command(const char *cmd, char *out, size_t n)
{
    if (strchr(cmd, '/')) {
        if (!executable(cmd)) {
            log_msg(LOG_ERROR, "herd spawn: cannot run '%s': %s", cmd,
                    access(cmd, F_OK) ? strerror(errno) : "not an executable file");
            return -1;
        }
        snprintf(out, n, "%s", cmd);
        return 0;
    }
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = path; *p;) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > 0 && (size_t)snprintf(out, n, "%.*s/%s", (int)len, p, cmd) < n &&
            executable(out))
            return 0;
        p += len + (end != NULL);
    }
    log_msg(LOG_ERROR, "herd spawn: command not found: '%s' (searched PATH)", cmd);
    return -1;
}

/* In the child, between fork and exec: undo what the supervisor set for
 * itself (blocked signals, ignored SIGPIPE), lead a process group of its
 * own and put the socket where the chosen convention expects it. Never
 * returns. */
static void exec_child(struct spawner *s, int report_fd)
{
    setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    int target = s->cfg->fd_style == SPAWN_FD_STDIN ? 0 : 3;
    int err = 0;
    if (s->lfd == target) {
        if (fcntl(target, F_SETFD, 0) < 0)
            err = errno;
    } else if (dup2(s->lfd, target) < 0) {
        err = errno;
    }
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_PID");
    unsetenv("LISTEN_FDNAMES");
    if (!err && s->cfg->fd_style == SPAWN_FD_SYSTEMD) {
        char pid[24];
        snprintf(pid, sizeof pid, "%ld", (long)getpid());
        setenv("LISTEN_FDS", "1", 1);
        setenv("LISTEN_PID", pid, 1);
    }
    if (!err) {
        execv(s->path, s->cfg->argv);
        err = errno;
    }
    ssize_t w = write(report_fd, &err, sizeof err);
    (void)w;
    _exit(127);
}

/* Starts the child for one slot. A child whose exec fails reports errno
 * through a close-on-exec pipe (EOF means the exec happened), so "cannot
 * run" is told apart from "ran and died". Returns 0 or -1. */
static int start_child(struct spawner *s, int i)
{
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) < 0) {
        log_msg(LOG_ERROR, "herd spawn: pipe: %s", strerror(errno));
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        log_msg(LOG_ERROR, "herd spawn: fork: %s", strerror(errno));
        close(pfd[0]);
        close(pfd[1]);
        return -1;
    }
    if (pid == 0) {
        close(pfd[0]);
        exec_child(s, pfd[1]);
    }
    /* Both sides set the group, so no signal to it can come too early
     * (this one fails harmlessly once the child has exec'd). */
    setpgid(pid, pid);
    close(pfd[1]);
    int err = 0;
    ssize_t r;
    do
        r = read(pfd[0], &err, sizeof err);
    while (r < 0 && errno == EINTR);
    close(pfd[0]);
    struct child *c = &s->kids[i];
    c->respawn_at = 0;
    if (r == (ssize_t)sizeof err) {
        waitpid(pid, NULL, 0);
        log_msg(LOG_ERROR, "herd spawn: cannot run '%s': %s", s->path, strerror(err));
        return -1;
    }
    c->pid = pid;
    c->pgid = pid;
    c->leftover_kill_at = 0;
    c->started_ms = now_ms();
    log_msg(LOG_INFO, "herd spawn: child %d started (pid %ld)", i, (long)pid);
    return 0;
}

/* Signals go to the children themselves (a master among them stops its
 * own workers, as with systemd's KillMode=mixed); the rest of a group
 * gets TERM once its child is gone, and SIGKILL at a deadline. */
static void signal_children(struct spawner *s, int sig)
{
    for (int i = 0; i < s->cfg->children; i++)
        if (s->kids[i].pid > 0)
            kill(s->kids[i].pid, sig);
}

/* Some process of the group is left (a zombie not yet reaped counts). */
static int group_alive(pid_t pgid)
{
    return pgid > 0 && kill(-pgid, 0) == 0;
}

/* Every child and its group (the child too by pid: it may have left the
 * group with setsid). */
static void kill_groups(struct spawner *s, int sig)
{
    for (int i = 0; i < s->cfg->children; i++) {
        if (s->kids[i].pid > 0)
            kill(s->kids[i].pid, sig);
        if (s->kids[i].pgid > 0)
            kill(-s->kids[i].pgid, sig);
    }
}

/* The child of slot i is gone: TERM what it left in its group (a helper
 * still accepting on the socket, with nobody watching it). */
static void stop_leftovers(struct spawner *s, int i)
{
    struct child *c = &s->kids[i];
    if (!group_alive(c->pgid)) {
        c->pgid = 0;
        return;
    }
    log_msg(LOG_WARN, "herd spawn: child %d left processes in its group %ld: stopping them",
            i, (long)c->pgid);
    kill(-c->pgid, SIGTERM);
    kill(-c->pgid, SIGCONT);
    c->leftover_kill_at = now_ms() + s->cfg->stop_timeout_ms;
}

/* Forgets groups that are empty now; SIGKILLs leftovers past their time. */
static void sweep_groups(struct spawner *s)
{
    int64_t now = now_ms();
    for (int i = 0; i < s->cfg->children; i++) {
        struct child *c = &s->kids[i];
        if (c->pid > 0 || !c->pgid)
            continue;
        if (!group_alive(c->pgid)) {
            c->pgid = 0;
        } else if (now >= c->leftover_kill_at) {
            log_msg(LOG_WARN, "herd spawn: processes of group %ld outlived the stop timeout: "
                    "killing them", (long)c->pgid);
            kill(-c->pgid, SIGKILL);
            c->leftover_kill_at = now + 60000;
        }
    }
}

static int leftovers(const struct spawner *s)
{
    for (int i = 0; i < s->cfg->children; i++)
        if (s->kids[i].pid <= 0 && s->kids[i].pgid)
            return 1;
    return 0;
}

static int slot_of(const struct spawner *s, pid_t pid)
{
    for (int i = 0; i < s->cfg->children; i++)
        if (s->kids[i].pid == pid)
            return i;
    return -1;
}

/* The group of a slot, whose child runs or whose leftovers are being
 * stopped: what is in it is stopped with it, not as a stray. */
static int slot_group(const struct spawner *s, pid_t pgid)
{
    for (int i = 0; i < s->cfg->children; i++)
        if (s->kids[i].pgid == pgid)
            return 1;
    return 0;
}

static int pid_listed(const struct pid_list *l, pid_t pid)
{
    for (size_t k = 0; k < l->n; k++)
        if (l->pids[k] == pid)
            return 1;
    return 0;
}

static int stray_index(const struct spawner *s, pid_t pid)
{
    for (int k = 0; k < s->nstrays; k++)
        if (s->strays[k].pid == pid)
            return k;
    return -1;
}

static void add_stray(struct spawner *s, pid_t pid, int64_t kill_at)
{
    if (s->nstrays == s->strays_cap) {
        int cap = s->strays_cap ? s->strays_cap * 2 : 16;
        struct stray *p = realloc(s->strays, (size_t)cap * sizeof *p);
        if (!p)
            log_fatal("herd spawn: out of memory");
        s->strays = p;
        s->strays_cap = cap;
    }
    s->strays[s->nstrays++] = (struct stray){.pid = pid, .kill_at = kill_at};
}

/* A stray was found: TERM it (and CONT, should it be stopped), KILL after
 * the stop timeout; once a stop has SIGKILLed everything, KILL at once.
 * It is our child, so its pid cannot be reused before we reap it. */
static void stop_stray(struct spawner *s, pid_t pid, const struct proc_brief *b)
{
    int64_t now = now_ms();
    log_msg(LOG_WARN, "herd spawn: process %ld (%s) left its child's process group and lost "
            "its parent: %s", (long)pid, b->name, s->killed ? "killing it" : "stopping it");
    if (s->killed) {
        kill(pid, SIGKILL);
        add_stray(s, pid, now + KILL_AGAIN_MS);
        return;
    }
    kill(pid, SIGTERM);
    kill(pid, SIGCONT);
    add_stray(s, pid, now + s->cfg->stop_timeout_ms);
}

/* Looks through our children for strays not seen before. The kernel
 * re-parents an orphan to us without a signal, so this runs after every
 * reap (a dying child's orphans are ours by then) and on a timer (for the
 * orphans of deeper descendants). Our children are the backends, the
 * strays, and what we inherited across exec; anything in a slot's group
 * waits for its slot. */
static void find_strays(struct spawner *s)
{
    if (children_list(&s->found) < 0)
        return;
    for (size_t k = 0; k < s->found.n; k++) {
        pid_t pid = s->found.pids[k];
        struct proc_brief b;
        if (slot_of(s, pid) >= 0 || stray_index(s, pid) >= 0 ||
            pid_listed(&s->inherited, pid) || proc_brief(pid, &b) < 0 || b.state == 'Z' ||
            slot_group(s, b.pgid))
            continue;
        stop_stray(s, pid, &b);
    }
}

/* SIGKILLs the strays past their time. */
static void sweep_strays(struct spawner *s)
{
    int64_t now = now_ms();
    for (int k = 0; k < s->nstrays; k++)
        if (now >= s->strays[k].kill_at) {
            log_msg(LOG_WARN, "herd spawn: orphaned process %ld outlived the stop timeout: "
                    "killing it", (long)s->strays[k].pid);
            kill(s->strays[k].pid, SIGKILL);
            s->strays[k].kill_at = now + KILL_AGAIN_MS;
        }
}

static void kill_strays(struct spawner *s)
{
    int64_t now = now_ms();
    for (int k = 0; k < s->nstrays; k++) {
        kill(s->strays[k].pid, SIGKILL);
        s->strays[k].kill_at = now + KILL_AGAIN_MS;
    }
}

static void pid_list_remove(struct pid_list *l, pid_t pid)
{
    for (size_t k = 0; k < l->n; k++)
        if (l->pids[k] == pid) {
            l->pids[k] = l->pids[--l->n];
            return;
        }
}

/* A reaped process that was no backend: a stray, or one we inherited. */
static void forget_process(struct spawner *s, pid_t pid)
{
    int k = stray_index(s, pid);
    if (k >= 0)
        s->strays[k] = s->strays[--s->nstrays];
    pid_list_remove(&s->inherited, pid);
}

/* Whether a descendant is left. Without inherited children the kernel
 * answers at once and exactly: no child means no descendant (an orphan
 * would have been re-parented to us). Else our children are listed. */
static int descendants_left(struct spawner *s)
{
    if (!s->inherited.n)
        return children_any();
    if (children_list(&s->found) < 0)
        return 0; /* no /proc to look at: the groups are all we know */
    for (size_t k = 0; k < s->found.n; k++)
        if (!pid_listed(&s->inherited, s->found.pids[k]))
            return 1;
    return 0;
}

static void begin_stop(struct spawner *s, int sig)
{
    if (!s->stopping) {
        s->stopping = 1;
        s->kill_at = now_ms() + s->cfg->stop_timeout_ms;
    }
    signal_children(s, sig);
}

/* Slots with a child or what it left still running. */
static int running(const struct spawner *s)
{
    int n = 0;
    for (int i = 0; i < s->cfg->children; i++)
        n += s->kids[i].pid > 0 || s->kids[i].pgid;
    return n;
}

static void describe_status(int status, char *buf, size_t n)
{
    if (WIFEXITED(status))
        snprintf(buf, n, "exited with status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, n, "was killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else
        snprintf(buf, n, "stopped (status 0x%x)", status);
}

/* A child is gone: decide between respawn (with backoff), leaving the
 * slot empty, and giving up. */
static void child_died(struct spawner *s, int i, int status)
{
    struct child *c = &s->kids[i];
    int64_t now = now_ms(), lived = now - c->started_ms;
    char what[96];
    describe_status(status, what, sizeof what);
    c->pid = 0;
    stop_leftovers(s, i);
    if (s->stopping) {
        log_msg(LOG_INFO, "herd spawn: child %d %s", i, what);
        return;
    }
    int clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!clean)
        s->nonzero_exits++;
    int quick = lived < (clean ? SPAWN_RECYCLE_MIN_MS : SPAWN_QUICK_DEATH_MS);
    c->quick_deaths = quick ? c->quick_deaths + 1 : 0;
    if (quick && (!s->cfg->respawn || c->quick_deaths >= SPAWN_GIVE_UP_AFTER)) {
        log_msg(LOG_ERROR, "herd spawn: child %d (%s) %s, %.2f s after it started%s; stopping",
                i, s->path, what, (double)lived / 1000,
                s->cfg->respawn ? ", again and again" : "");
        s->failed = 1;
        begin_stop(s, SIGTERM);
        return;
    }
    if (!s->cfg->respawn) {
        log_msg(LOG_WARN, "herd spawn: child %d %s (no --respawn: not restarted)", i, what);
        return;
    }
    int64_t delay = 0;
    if (quick) {
        delay = BACKOFF_MIN_MS;
        for (int k = 1; k < c->quick_deaths && delay < BACKOFF_MAX_MS; k++)
            delay *= 2;
        if (delay > BACKOFF_MAX_MS)
            delay = BACKOFF_MAX_MS;
    }
    c->respawn_at = now + delay;
    log_msg(LOG_WARN, "herd spawn: child %d %s; restarting it%s", i, what,
            delay ? " after a backoff" : "");
}

/* Reaps every child that has exited: a backend (respawn or not), or a
 * stray or inherited process (just forgotten: nothing runs in its place). */
static void reap(struct spawner *s)
{
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        int i = slot_of(s, pid);
        if (i >= 0)
            child_died(s, i, status);
        else
            forget_process(s, pid);
    }
}

static void handle_signal(struct spawner *s, int sig)
{
    switch (sig) {
    case SIGCHLD:
        reap(s);
        break;
    case SIGTERM: case SIGINT: case SIGQUIT:
        log_msg(LOG_NOTICE, "herd spawn: %s: stopping %d children", strsignal(sig), running(s));
        begin_stop(s, sig == SIGINT ? SIGTERM : sig);
        break;
    default: /* HUP, USR1, USR2: the children's business (reload, reopen logs) */
        signal_children(s, sig);
        break;
    }
}

/* How often leftovers of a group and strays are looked for while
 * something is being stopped: one reaped by a process of its group sends
 * us no SIGCHLD, and an orphan becomes ours without one. */
#define GROUP_POLL_MS 50
/* ...and otherwise, for the orphans of deeper descendants. */
#define STRAY_POLL_MS 1000

/* Milliseconds until the next respawn, stop deadline or look around. */
static int next_timeout(const struct spawner *s)
{
    int64_t now = now_ms();
    int busy = s->stopping || leftovers(s) || s->nstrays;
    int64_t when = now + (busy ? GROUP_POLL_MS : STRAY_POLL_MS);
    if (s->stopping) {
        int64_t deadline = s->killed ? s->give_up_at : s->kill_at;
        if (deadline < when)
            when = deadline;
    } else {
        for (int i = 0; i < s->cfg->children; i++)
            if (s->kids[i].respawn_at && !s->kids[i].pgid && s->kids[i].respawn_at < when)
                when = s->kids[i].respawn_at;
    }
    return when <= now ? 0 : (int)(when - now);
}

/* The stop timeout is over: SIGKILL every group and stray, then wait a
 * little for them before leaving them behind. */
static void kill_everything(struct spawner *s, int64_t now)
{
    if (s->nstrays)
        log_msg(LOG_WARN, "herd spawn: %d children and %d orphaned processes still running "
                "after the stop timeout: killing them", running(s), s->nstrays);
    else if (running(s))
        log_msg(LOG_WARN, "herd spawn: %d children still running after the stop "
                "timeout: killing them", running(s));
    kill_groups(s, SIGKILL);
    kill_strays(s);
    s->killed = 1;
    s->give_up_at = now + KILL_WAIT_MS;
}

static void run_timers(struct spawner *s)
{
    int64_t now = now_ms();
    sweep_groups(s);
    sweep_strays(s);
    if (s->stopping) {
        if (!s->killed && now >= s->kill_at) {
            kill_everything(s, now);
        } else if (s->killed && now >= s->give_up_at) {
            log_msg(LOG_ERROR, "herd spawn: %d children and %d orphaned processes survived "
                    "SIGKILL for %d s: exiting without them", running(s), s->nstrays,
                    KILL_WAIT_MS / 1000);
            s->abandoned = 1;
            s->failed = 1;
        }
        return;
    }
    /* A slot restarts once its old group is gone, and no stray is left
     * (which slot's child it came from is not known): nothing of the last
     * run still accepts beside the new child. */
    for (int i = 0; i < s->cfg->children; i++)
        if (s->kids[i].respawn_at && s->kids[i].respawn_at <= now && !s->kids[i].pgid &&
            !s->nstrays && start_child(s, i) < 0) {
            s->failed = 1;
            begin_stop(s, SIGTERM);
            return;
        }
}

static int pending_respawns(const struct spawner *s)
{
    for (int i = 0; i < s->cfg->children; i++)
        if (s->kids[i].respawn_at)
            return 1;
    return 0;
}

/* Nothing is left to wait for: no slot runs, waits for its group or for
 * a respawn, and no descendant is left. */
static int finished(struct spawner *s)
{
    if (s->abandoned)
        return 1;
    if (running(s) || s->nstrays || (!s->stopping && pending_respawns(s)))
        return 0;
    return !descendants_left(s);
}

int spawn_run(const struct spawn_config *cfg)
{
    struct spawner s = {.cfg = cfg, .lfd = -1};
    char err[160], where[160];
    if (resolve_command(cfg->argv[0], s.path, sizeof s.path) < 0)
        return 1;
    if (listen_parse(cfg->listen, &s.addr, err, sizeof err) < 0) {
        log_msg(LOG_ERROR, "herd spawn: %s", err);
        return 1;
    }
    int sfd = signals_open();
    if (sfd < 0) {
        log_msg(LOG_ERROR, "herd spawn: signalfd: %s", strerror(-sfd));
        return 1;
    }
    /* Whatever a child forks becomes ours when its parent dies, in its
     * group or out of it (setsid): we reap it, stop it, and exit only
     * when no descendant is left. */
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
        log_msg(LOG_WARN, "herd spawn: PR_SET_CHILD_SUBREAPER: %s", strerror(errno));
    /* Children of whoever exec'd us are ours now, but no backend's: they
     * are never stopped, nor waited for. */
    if (children_list(&s.inherited) < 0)
        s.inherited.n = 0;
    s.lfd = listen_open(&s.addr, cfg->backlog, 0);
    if (s.lfd < 0) {
        log_msg(LOG_ERROR, "herd spawn: cannot listen on %s: %s", cfg->listen,
                s.lfd == -EADDRINUSE ? "address already in use" : strerror(-s.lfd));
        close(sfd);
        return 1;
    }
    /* Backends keep the kernel's Nagle default on their connections
     * (listen_open sets TCP_NODELAY for herd's own). */
    if (s.addr.family != AF_UNIX) {
        int zero = 0;
        setsockopt(s.lfd, IPPROTO_TCP, TCP_NODELAY, &zero, sizeof zero);
    }
    /* Backends written for spawn-fcgi or systemd expect a blocking socket. */
    fcntl(s.lfd, F_SETFL, fcntl(s.lfd, F_GETFL) & ~O_NONBLOCK);
    s.kids = calloc((size_t)cfg->children, sizeof *s.kids);
    if (!s.kids)
        log_fatal("herd spawn: out of memory");
    listen_describe(&s.addr, where, sizeof where);
    log_msg(LOG_NOTICE, "herd spawn: listening on %s, %d x %s (socket as %s)", where,
            cfg->children, s.path, cfg->fd_style == SPAWN_FD_STDIN ? "fd 0" : "fd 3, LISTEN_FDS=1");
    for (int i = 0; i < cfg->children && !s.stopping; i++)
        if (start_child(&s, i) < 0) {
            s.failed = 1;
            begin_stop(&s, SIGTERM);
        }
    while (!finished(&s)) {
        struct pollfd p = {.fd = sfd, .events = POLLIN};
        int n = poll(&p, 1, next_timeout(&s));
        if (n < 0 && errno != EINTR)
            log_fatal("herd spawn: poll: %s", strerror(errno));
        int sig;
        while (n > 0 && (sig = signals_read(sfd)) > 0)
            handle_signal(&s, sig);
        reap(&s); /* a CHLD merged with another signal still gets reaped */
        find_strays(&s);
        run_timers(&s);
    }
    close(s.lfd);
    listen_cleanup(&s.addr);
    close(sfd);
    free(s.kids);
    free(s.strays);
    pid_list_free(&s.inherited);
    pid_list_free(&s.found);
    if (s.failed)
        return 1;
    if (s.stopping)
        return 0;
    log_msg(LOG_NOTICE, "herd spawn: every child has exited");
    return s.nonzero_exits ? 1 : 0;
}

#include "bench/lab_proc.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/readfile.h"

static int sig_fd = -1;
static int stop_signals;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sigset_lab(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGHUP);
    sigaddset(set, SIGQUIT);
    sigaddset(set, SIGCHLD);
}

int lproc_signals_init(void)
{
    signal(SIGPIPE, SIG_IGN);
    sigset_t set;
    sigset_lab(&set);
    if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
        return -errno;
    sig_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (sig_fd < 0)
        return -errno;
    /* Servers whose master dies first leave their workers to us, not to
     * init, so the lab can still reap and account for them. */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    return 0;
}

/* Reads every pending signal; SIGCHLD only wakes the caller up. */
static void drain(void)
{
    struct signalfd_siginfo si;
    while (sig_fd >= 0 && read(sig_fd, &si, sizeof si) == (ssize_t)sizeof si)
        if (si.ssi_signo != SIGCHLD)
            stop_signals++;
}

int lproc_stop_requested(void)
{
    drain();
    return stop_signals;
}

/* Waits for a signal or up to ms. */
static void wait_signal(int64_t ms)
{
    if (ms < 0)
        ms = 0;
    struct pollfd p = {.fd = sig_fd, .events = POLLIN};
    if (sig_fd < 0) {
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
        nanosleep(&ts, NULL);
        return;
    }
    poll(&p, 1, (int)ms);
    drain();
}

int lproc_sleep_ms(int64_t ms)
{
    int64_t end = now_ms() + ms;
    for (;;) {
        if (lproc_stop_requested())
            return 1;
        int64_t left = end - now_ms();
        if (left <= 0)
            return 0;
        wait_signal(left);
    }
}

pid_t lproc_spawn(char *const argv[], int cpu, const char *log_path, char *err, size_t errlen)
{
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) < 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        return -1;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        close(pfd[0]);
        close(pfd[1]);
        return -1;
    }
    if (pid == 0) {
        int fail[2] = {0, 0};
        close(pfd[0]);
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(1);
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        if (sched_setaffinity(0, sizeof set, &set) < 0) {
            fail[0] = 1, fail[1] = errno;
            goto fail;
        }
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL);
        int in = open("/dev/null", O_RDONLY);
        int out = open(log_path ? log_path : "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (in < 0 || out < 0) {
            fail[0] = 2, fail[1] = errno;
            goto fail;
        }
        dup2(in, 0);
        dup2(out, 1);
        dup2(out, 2);
        if (in > 2)
            close(in);
        if (out > 2)
            close(out);
        execv(argv[0], argv);
        fail[0] = 3, fail[1] = errno;
    fail:
        if (write(pfd[1], fail, sizeof fail) < 0) {
            /* nothing left to tell */
        }
        _exit(127);
    }
    setpgid(pid, pid); /* also here: no window in which it is still in ours */
    close(pfd[1]);
    int fail[2];
    ssize_t n;
    do
        n = read(pfd[0], fail, sizeof fail);
    while (n < 0 && errno == EINTR);
    close(pfd[0]);
    if (n == (ssize_t)sizeof fail) {
        waitpid(pid, NULL, 0);
        const char *what = fail[0] == 1 ? "cannot pin to CPU" : fail[0] == 2 ? "cannot open log for"
                                                                             : "cannot run";
        if (fail[0] == 1)
            snprintf(err, errlen, "%s %d: %s", what, cpu, strerror(fail[1]));
        else
            snprintf(err, errlen, "%s %s: %s", what, fail[0] == 2 ? log_path : argv[0],
                     strerror(fail[1]));
        return -1;
    }
    return pid;
}

int lproc_exited(pid_t pid, int *status)
{
    int st = 0;
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) {
        if (status)
            *status = r == pid ? st : 0;
        return 1;
    }
    return 0;
}

int lproc_wait(pid_t pid, int64_t timeout_ms, int *status, struct rusage *ru)
{
    int64_t end = now_ms() + timeout_ms;
    for (;;) {
        int st = 0;
        pid_t r = wait4(pid, &st, WNOHANG, ru);
        if (r == pid || (r < 0 && errno == ECHILD)) {
            if (status)
                *status = st;
            return 0;
        }
        if (lproc_stop_requested())
            return 2;
        int64_t left = end - now_ms();
        if (left <= 0)
            return 1;
        wait_signal(left < 100 ? left : 100);
    }
}

/* ---------------------------------------------------------------- /proc */

/* Fields of /proc/PID/stat after the command name: [0] is field 3 (state). */
static int read_stat(pid_t pid, char *state, long long *f, int nf)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ')
        return -1;
    p += 2;
    *state = *p++;
    for (int i = 1; i < nf; i++) {
        while (*p == ' ')
            p++;
        if (!*p)
            return -1;
        f[i] = strtoll(p, &p, 10);
    }
    return 0;
}

/* Alive (not a zombie) and the same process as id. */
static int same_process(const struct lproc_id *id)
{
    char st;
    long long f[20];
    if (read_stat(id->pid, &st, f, 20) < 0)
        return 0;
    return st != 'Z' && st != 'X' && (uint64_t)f[19] == id->start;
}

struct pentry {
    pid_t pid, ppid;
    uint64_t start;
};

int lproc_tree(pid_t root, struct lproc_id *out, int max)
{
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    size_t cap = 1024, n = 0;
    struct pentry *all = malloc(cap * sizeof *all);
    struct dirent *e;
    while (all && (e = readdir(d))) {
        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        pid_t pid = atoi(e->d_name);
        char st;
        long long f[20];
        if (read_stat(pid, &st, f, 20) < 0 || st == 'Z' || st == 'X')
            continue;
        if (n == cap) {
            struct pentry *t = realloc(all, cap * 2 * sizeof *all);
            if (!t)
                break;
            all = t;
            cap *= 2;
        }
        all[n++] = (struct pentry){pid, (pid_t)f[1], (uint64_t)f[19]};
    }
    closedir(d);
    if (!all)
        return 0;
    int count = 0;
    for (size_t i = 0; i < n && count < max; i++)
        if (all[i].pid == root)
            out[count++] = (struct lproc_id){root, all[i].start};
    /* Breadth first: out[] itself is the queue. */
    for (int q = 0; q < count; q++)
        for (size_t i = 0; i < n && count < max; i++)
            if (all[i].ppid == out[q].pid && all[i].pid != root)
                out[count++] = (struct lproc_id){all[i].pid, all[i].start};
    free(all);
    return count;
}

#define STOP_MAX LPROC_TREE_MAX

int lproc_stop(pid_t root, int64_t grace_ms)
{
    struct lproc_id ids[STOP_MAX];
    int n = lproc_tree(root, ids, STOP_MAX);
    if (n == 0) {
        waitpid(root, NULL, 0); /* gone or a zombie: reap it */
        return 0;
    }
    int stops0 = lproc_stop_requested();
    kill(root, SIGTERM);
    int64_t end = now_ms() + grace_ms;
    for (;;) {
        lproc_exited(root, NULL);
        int alive = 0;
        for (int i = 0; i < n; i++)
            alive += same_process(&ids[i]);
        if (!alive)
            break;
        if (now_ms() >= end || lproc_stop_requested() > stops0)
            break;
        wait_signal(20);
    }
    /* Children the master started during the grace period count too. */
    struct lproc_id more[STOP_MAX];
    int m = lproc_tree(root, more, STOP_MAX);
    for (int j = 0; j < m && n < STOP_MAX; j++) {
        int known = 0;
        for (int i = 0; i < n; i++)
            known |= ids[i].pid == more[j].pid && ids[i].start == more[j].start;
        if (!known)
            ids[n++] = more[j];
    }
    int killed = 0;
    for (int i = 0; i < n; i++)
        if (same_process(&ids[i]) && kill(ids[i].pid, SIGKILL) == 0)
            killed++;
    waitpid(root, NULL, 0);
    /* Orphans came to us (we are their subreaper): reap what died. */
    for (int k = 0; k < 50; k++) {
        int alive = 0;
        for (int i = 1; i < n; i++) {
            waitpid(ids[i].pid, NULL, WNOHANG);
            alive += same_process(&ids[i]);
        }
        if (!alive)
            break;
        wait_signal(20);
    }
    return killed;
}

long lproc_hz(void)
{
    static long hz;
    if (!hz)
        hz = sysconf(_SC_CLK_TCK);
    return hz > 0 ? hz : 100;
}

static uint64_t status_field(const char *buf, const char *name)
{
    const char *p = strstr(buf, name);
    return p ? strtoull(p + strlen(name), NULL, 10) : 0;
}

int lproc_usage_tree(pid_t root, struct lproc_usage *u)
{
    memset(u, 0, sizeof *u);
    struct lproc_id ids[STOP_MAX];
    int n = lproc_tree(root, ids, STOP_MAX);
    if (n == 0)
        return -ESRCH;
    for (int i = 0; i < n; i++) {
        char st;
        long long f[20];
        if (read_stat(ids[i].pid, &st, f, 20) < 0)
            continue;
        u->utime += (uint64_t)f[11];
        u->stime += (uint64_t)f[12];
        u->procs[u->nproc++] = ids[i];
        /* Context switches in /proc/PID/status are the main thread's only:
         * sum the threads. */
        char path[96];
        snprintf(path, sizeof path, "/proc/%d/task", (int)ids[i].pid);
        DIR *d = opendir(path);
        if (!d)
            continue;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!isdigit((unsigned char)e->d_name[0]))
                continue;
            char sp[512], buf[4096];
            snprintf(sp, sizeof sp, "%s/%s/status", path, e->d_name);
            int fd = open(sp, O_RDONLY | O_CLOEXEC);
            if (fd < 0)
                continue;
            ssize_t r = read(fd, buf, sizeof buf - 1);
            close(fd);
            if (r <= 0)
                continue;
            buf[r] = 0;
            u->vcsw += status_field(buf, "\nvoluntary_ctxt_switches:");
            u->ivcsw += status_field(buf, "\nnonvoluntary_ctxt_switches:");
            u->nthreads++;
        }
        closedir(d);
    }
    return 0;
}

static int has_process(const struct lproc_usage *u, const struct lproc_id *id)
{
    for (int i = 0; i < u->nproc; i++)
        if (u->procs[i].pid == id->pid && u->procs[i].start == id->start)
            return 1;
    return 0;
}

int lproc_usage_lost(const struct lproc_usage *a, const struct lproc_usage *b,
                     struct lproc_id *gone)
{
    for (int i = 0; i < a->nproc; i++)
        if (!has_process(b, &a->procs[i])) {
            *gone = a->procs[i];
            return 1;
        }
    return 0;
}

int lproc_netstat(uint64_t *overflows, uint64_t *drops)
{
    char *buf = read_file_whole("/proc/net/netstat", NULL);
    if (!buf)
        return -errno;
    int rc = -ENOENT;
    char *head = strstr(buf, "TcpExt:");
    char *vals = head ? strstr(head + 1, "\nTcpExt:") : NULL;
    if (head && vals) {
        char *he = strchr(head, '\n'), *ve = strchr(vals + 1, '\n');
        if (he)
            *he = 0;
        if (ve)
            *ve = 0;
        char *hs, *vs;
        char *h = strtok_r(head, " ", &hs), *v = strtok_r(vals + 1, " ", &vs);
        *overflows = *drops = 0;
        int found = 0;
        while (h && v) {
            if (!strcmp(h, "ListenOverflows"))
                *overflows = strtoull(v, NULL, 10), found++;
            else if (!strcmp(h, "ListenDrops"))
                *drops = strtoull(v, NULL, 10), found++;
            h = strtok_r(NULL, " ", &hs);
            v = strtok_r(NULL, " ", &vs);
        }
        rc = found == 2 ? 0 : -ENOENT;
    }
    free(buf);
    return rc;
}

int lproc_core_ticks(int cpu, uint64_t *task, uint64_t *total)
{
    char *buf = read_file_whole("/proc/stat", NULL);
    if (!buf)
        return -errno;
    char key[32];
    snprintf(key, sizeof key, "\ncpu%d ", cpu);
    char *p = strstr(buf, key);
    int rc = -ENOENT;
    if (p) {
        p += strlen(key);
        uint64_t f[10] = {0};
        for (int i = 0; i < 10; i++)
            f[i] = strtoull(p, &p, 10);
        /* user nice system idle iowait irq softirq steal guest guest_nice;
         * guest time is already inside user. */
        *task = f[0] + f[1] + f[2];
        *total = f[0] + f[1] + f[2] + f[3] + f[4] + f[5] + f[6] + f[7];
        rc = 0;
    }
    free(buf);
    return rc;
}

static int add_inode(unsigned long **v, size_t *n, size_t *cap, unsigned long ino)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 64;
        unsigned long *t = realloc(*v, c * sizeof *t);
        if (!t)
            return -1;
        *v = t;
        *cap = c;
    }
    (*v)[(*n)++] = ino;
    return 0;
}

static int scan_tcp(const char *path, int v6, const unsigned long *inodes, size_t ninodes,
                    struct lproc_listener *out, int count, int max)
{
    char *buf = read_file_whole(path, NULL);
    if (!buf)
        return count;
    char *save, *line = strtok_r(buf, "\n", &save);
    for (line = strtok_r(NULL, "\n", &save); line && count < max;
         line = strtok_r(NULL, "\n", &save)) {
        char local[64], rem[64], st[8];
        unsigned long ino;
        /* sl local rem st tx:rx tr:when retrnsmt uid timeout inode */
        if (sscanf(line, " %*s %63s %63s %7s %*s %*s %*s %*s %*s %lu", local, rem, st, &ino) != 4)
            continue;
        if (strcmp(st, "0A"))
            continue;
        size_t k = 0;
        while (k < ninodes && inodes[k] != ino)
            k++;
        if (k == ninodes)
            continue;
        char *colon = strchr(local, ':');
        if (!colon)
            continue;
        *colon = 0;
        struct lproc_listener *l = &out[count];
        l->port = (int)strtol(colon + 1, NULL, 16);
        if (!v6) {
            uint32_t a = (uint32_t)strtoul(local, NULL, 16);
            inet_ntop(AF_INET, &a, l->addr, sizeof l->addr);
            l->loopback4 = !strcmp(l->addr, "127.0.0.1");
        } else {
            struct in6_addr a;
            for (int w = 0; w < 4; w++) {
                char hex[9];
                memcpy(hex, local + 8 * w, 8);
                hex[8] = 0;
                uint32_t word = (uint32_t)strtoul(hex, NULL, 16);
                memcpy(&a.s6_addr[4 * w], &word, 4);
            }
            inet_ntop(AF_INET6, &a, l->addr, sizeof l->addr);
            l->loopback4 = !strcmp(l->addr, "::ffff:127.0.0.1");
        }
        count++;
    }
    free(buf);
    return count;
}

int lproc_listeners(const struct lproc_id *tree, int n, struct lproc_listener *out, int max)
{
    unsigned long *inodes = NULL;
    size_t ninodes = 0, cap = 0;
    for (int i = 0; i < n; i++) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/fd", (int)tree[i].pid);
        DIR *d = opendir(path);
        if (!d)
            continue;
        struct dirent *e;
        while ((e = readdir(d))) {
            char lp[384], target[64];
            if (e->d_name[0] == '.')
                continue;
            snprintf(lp, sizeof lp, "%s/%s", path, e->d_name);
            ssize_t r = readlink(lp, target, sizeof target - 1);
            if (r <= 0)
                continue;
            target[r] = 0;
            unsigned long ino;
            if (sscanf(target, "socket:[%lu]", &ino) == 1)
                add_inode(&inodes, &ninodes, &cap, ino);
        }
        closedir(d);
    }
    int count = 0;
    if (ninodes) {
        count = scan_tcp("/proc/net/tcp", 0, inodes, ninodes, out, count, max);
        count = scan_tcp("/proc/net/tcp6", 1, inodes, ninodes, out, count, max);
    }
    free(inodes);
    return count;
}

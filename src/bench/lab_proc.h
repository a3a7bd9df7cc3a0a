/* The processes herd lab starts, and what /proc says about them: spawning
 * a command pinned to one CPU, waiting for it with a deadline, stopping a
 * whole process tree (TERM, then KILL) by PID, and the counters the lab
 * samples before and after each run (CPU time, context switches, listen
 * queue drops, per-core busy time, listening sockets).
 *
 * The one signal path: lproc_signals_init blocks INT, TERM, HUP, QUIT and
 * CHLD and reads them from a signalfd; every wait in the lab goes through
 * this file and notices a stop signal there. Children get the default
 * mask and dispositions back before exec.
 *
 * Errors: functions returning int give 0 or -errno unless said otherwise. */
#ifndef HERD_BENCH_LAB_PROC_H
#define HERD_BENCH_LAB_PROC_H

#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

/* Blocks the signals above (SIGPIPE is ignored). Call once, first. */
int lproc_signals_init(void);

/* How many stop signals (INT, TERM, HUP, QUIT) have arrived so far. */
int lproc_stop_requested(void);

/* Sleeps ms milliseconds; returns 1 at once when a stop signal arrives
 * (or had arrived), else 0. */
int lproc_sleep_ms(int64_t ms);

/* Starts argv[0] (a path) with stdin from /dev/null and stdout and stderr
 * appended to log_path, pinned with sched_setaffinity to cpu (children it
 * forks inherit that), in its own process group (so a terminal's Ctrl-C
 * reaches only the lab, which stops it in order) and with
 * PR_SET_PDEATHSIG, so it gets SIGTERM if the lab dies without cleaning
 * up. Returns the pid, or -1 with a reason in err (exec failures are
 * reported here, not as an exit status). */
pid_t lproc_spawn(char *const argv[], int cpu, const char *log_path, char *err, size_t errlen);

/* Waits up to timeout_ms for our child pid to exit. Returns 0 when it
 * exited (status and usage filled when not NULL), 1 when the time ran
 * out, 2 when a stop signal arrived first (the child still runs). */
int lproc_wait(pid_t pid, int64_t timeout_ms, int *status, struct rusage *ru);

/* 1 when our child pid has exited (reaped; status filled), else 0. */
int lproc_exited(pid_t pid, int *status);

/* A process, identified so a reused pid is never mistaken for it. */
struct lproc_id {
    pid_t pid;
    uint64_t start;     /* start time in clock ticks since boot */
};

/* root and its descendants that are alive (not zombies), root first.
 * Returns how many (0 when root is gone), at most max. */
int lproc_tree(pid_t root, struct lproc_id *out, int max);

/* Stops root's process tree: SIGTERM to root (a master stops its own
 * children), up to grace_ms for every process of the tree to go, then
 * SIGKILL to each one still there (checked by pid and start time). A
 * second stop signal during the grace period cuts it short. Reaps root.
 * Returns how many processes needed SIGKILL. */
int lproc_stop(pid_t root, int64_t grace_ms);

/* Counters summed over a process tree and all its threads, and the
 * processes they were summed over. A process that exits takes its counts
 * with it, so the sums of two samples compare only when the second still
 * has every process of the first (lproc_usage_lost). */
#define LPROC_TREE_MAX 512
struct lproc_usage {
    uint64_t utime, stime;      /* clock ticks */
    uint64_t vcsw, ivcsw;       /* voluntary and involuntary context switches */
    int nproc, nthreads;
    struct lproc_id procs[LPROC_TREE_MAX]; /* the nproc processes summed */
};
int lproc_usage_tree(pid_t root, struct lproc_usage *u);

/* 1 with *gone set to the first process summed in sample a that sample b
 * lacks (it exited, or left the tree, in between: b's sums are missing
 * its time), else 0. A process new in b takes nothing from the sums. */
int lproc_usage_lost(const struct lproc_usage *a, const struct lproc_usage *b,
                     struct lproc_id *gone);

/* Clock ticks per second (for utime and stime). */
long lproc_hz(void);

/* TcpExt ListenOverflows and ListenDrops from /proc/net/netstat. */
int lproc_netstat(uint64_t *overflows, uint64_t *drops);

/* Time of one core from /proc/stat, in ticks: task = user + nice + system
 * (softirq and irq left out: our own loopback traffic is processed there),
 * total = every field. */
int lproc_core_ticks(int cpu, uint64_t *task, uint64_t *total);

/* TCP sockets in LISTEN state that belong to the processes of tree. */
struct lproc_listener {
    char addr[64];      /* "127.0.0.1", "::", ... */
    int port;
    int loopback4;      /* exactly 127.0.0.1 (or ::ffff:127.0.0.1) */
};
int lproc_listeners(const struct lproc_id *tree, int n, struct lproc_listener *out, int max);

#endif

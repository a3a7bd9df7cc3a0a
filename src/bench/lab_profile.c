/* herd lab --profile: after a herd model's runs, one more run (keep-alive
 * on, the highest concurrency, --duration) under `perf record -e cpu-clock
 * -g` attached to the server's processes (the VM has no hardware counters:
 * cpu-clock is the software event that works everywhere), then `perf
 * script` and a flame graph, flame-SERVER.svg next to the report. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/flame.h"
#include "bench/lab_internal.h"
#include "bench/lab_proc.h"

/* perf on PATH, as a path for lproc_spawn; 0, or -1. */
static int find_perf(char *out, size_t n)
{
    const char *path = getenv("PATH");
    char dirs[4096];
    snprintf(dirs, sizeof dirs, "%s:/usr/bin:/usr/sbin", path ? path : "");
    for (char *save, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(out, n, "%s/perf", d);
        if (access(out, X_OK) == 0)
            return 0;
    }
    return -1;
}

/* Runs prog with args, stdout and stderr to log, up to limit_ms. 0 when it
 * exited 0, else -1 with a reason. */
static int run_tool(char *const argv[], int cpu, const char *log, int64_t limit_ms, char *err,
                    size_t errlen)
{
    pid_t pid = lproc_spawn(argv, cpu, log, err, errlen);
    if (pid < 0)
        return -1;
    int status = 0, rc = lproc_wait(pid, limit_ms, &status, NULL);
    if (rc != 0) {
        lproc_stop(pid, 2000);
        snprintf(err, errlen, "%s %s", argv[1], rc == 2 ? "interrupted" : "did not finish");
        return -1;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        snprintf(err, errlen, "perf %s failed (see %s)", argv[1], strrchr(log, '/') + 1);
        return -1;
    }
    return 0;
}

void lab_profile(struct lab *lab, struct lab_server *s, pid_t pid, const char *dir)
{
    const struct lab_config *cfg = lab->cfg;
    char perf[600], pids[256] = "", data[1000], rlog[1000], script[1000], svg[1000];
    char secs[32], title[128], err[256];
    if (find_perf(perf, sizeof perf) < 0) {
        snprintf(s->flame, sizeof s->flame, "no profile: perf is not installed "
                                            "(apt-get install linux-perf)");
        return;
    }
    struct lproc_id tree[64];
    int n = lproc_tree(pid, tree, 64);
    for (int i = 0, o = 0; i < n && o < (int)sizeof pids - 12; i++)
        o += snprintf(pids + o, sizeof pids - (size_t)o, "%s%d", i ? "," : "", (int)tree[i].pid);
    snprintf(data, sizeof data, "%s/perf.data", dir);
    snprintf(rlog, sizeof rlog, "%s/perf-record.log", dir);
    snprintf(script, sizeof script, "%s/perf-script.txt", dir);
    snprintf(secs, sizeof secs, "%.3f", (double)cfg->duration_ms / 1000);
    unlink(rlog);
    unlink(script);
    char *rec[] = {perf, "record", "-e", "cpu-clock", "-g", "-p", pids, "-o", data, "--",
                   "sleep", secs, NULL};
    pid_t rp = lproc_spawn(rec, cfg->load_cpu, rlog, err, sizeof err);
    if (rp < 0) {
        snprintf(s->flame, sizeof s->flame, "no profile: %s", err);
        return;
    }
    char loadlog[1000];
    snprintf(loadlog, sizeof loadlog, "%s/profile-load.log", dir);
    int status;
    lab_run_load(lab, s, 1, cfg->conc[cfg->nconc - 1], cfg->duration_ms, NULL, loadlog,
                 &status, NULL, err, sizeof err);
    int rc = lproc_wait(rp, cfg->duration_ms + 15000, &status, NULL);
    if (rc != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        if (rc != 0)
            lproc_stop(rp, 2000);
        snprintf(s->flame, sizeof s->flame, "no profile: perf record failed (not permitted? "
                 "see kernel.perf_event_paranoid and %s)", strrchr(rlog, '/') + 1);
        return;
    }
    char *scr[] = {perf, "script", "-i", data, NULL};
    if (run_tool(scr, cfg->load_cpu, script, 120000, err, sizeof err) < 0) {
        snprintf(s->flame, sizeof s->flame, "no profile: %s", err);
        return;
    }
    char name[160];
    snprintf(name, sizeof name, "%s", s->label);
    for (char *p = name; *p; p++)
        if (*p == '/')
            *p = '-';
    snprintf(svg, sizeof svg, "%s/flame-%s.svg", cfg->out_dir, name);
    snprintf(title, sizeof title, "%s, keep-alive, c=%d", s->label, cfg->conc[cfg->nconc - 1]);
    long samples = flame_svg(script, svg, title, err, sizeof err);
    if (samples < 0)
        snprintf(s->flame, sizeof s->flame, "no profile: %s", err);
    else
        snprintf(s->flame, sizeof s->flame, "flame-%s.svg (%ld samples)", name, samples);
    unlink(data);
    fprintf(stderr, "lab: %s: %s\n", s->label, s->flame);
}

/* herd lab --scenario reload: for each server that can reload, each signal
 * (HUP: reload; USR2: binary upgrade) and each concurrency, a fresh server
 * under herd load (keep-alive, closed loop, never retrying) for (reloads +
 * 1) x reload_every, signalled at each multiple of reload_every from the
 * start of its measured run, which herd load writes to a file. herd load
 * keeps a timeline (100 ms slices of responses, errors and latency), so the
 * errors and latency of each reload are read from the slices around the
 * moment the lab sent the signal, both on CLOCK_MONOTONIC. Before each
 * signal, and at the end, the lab checks from /proc that the previous
 * generation has gone (the server's process count is back to what it was
 * at the start, and after USR2 the old master is gone too). */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/hdr.h"
#include "bench/json.h"
#include "bench/lab_internal.h"
#include "bench/lab_proc.h"

#define SLICE_MS 100
#define STOP_GRACE_MS 5000

const char *const lab_signal_names[LAB_NSIG] = {"hup", "usr2"};
static const int signal_numbers[LAB_NSIG] = {SIGHUP, SIGUSR2};

enum { RUN_DONE, RUN_INTERRUPTED };

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int lab_reload_supported(const char *kind, const char *model, int sig)
{
    if (!strcmp(kind, "herd")) {
        for (int i = 0; i < lab_nherd_reload_models; i++)
            if (!strcmp(model, lab_herd_reload_models[i]))
                return 1;
        return 0;
    }
    /* nginx ignores USR2 while the process that started it lives ("the
     * changing binary signal is ignored": it takes that parent for an old
     * binary still running), and the lab is that parent: HUP only. */
    return !strcmp(kind, "nginx") && sig == LAB_SIG_HUP;
}

static int procs(pid_t root)
{
    struct lproc_id ids[64];
    return lproc_tree(root, ids, 64);
}

static int alive(pid_t pid)
{
    struct lproc_id id;
    return pid > 0 && lproc_tree(pid, &id, 1) > 0;
}

static pid_t read_pid(const char *path)
{
    FILE *f = fopen(path, "r");
    long pid = 0;
    if (f) {
        if (fscanf(f, "%ld", &pid) != 1)
            pid = 0;
        fclose(f);
    }
    return (pid_t)pid;
}

/* The master to signal now: after USR2 the one the pid file names. */
static pid_t current_master(const struct lab_server *s, pid_t master)
{
    if (!s->pid_file[0])
        return master;
    pid_t p = read_pid(s->pid_file);
    return p > 0 && alive(p) ? p : master;
}

/* Whether mark k's old generation has gone: the master now in charge runs
 * as many processes as the server had at the start, and after an upgrade
 * the signalled master is gone. */
static void check_generation(const struct lab_server *s, struct lab_reload_run *r, int k,
                             int at_end, int sig, int base, pid_t *master)
{
    struct lab_reload_mark *m = &r->marks[k];
    pid_t now = current_master(s, *master);
    m->procs_left = procs(m->master) + (now != m->master ? procs(now) : 0);
    if (sig == LAB_SIG_USR2)
        m->old_gone = now != m->master && !alive(m->master) && procs(now) <= base;
    else
        m->old_gone = procs(now) <= base;
    if (!m->old_gone && !r->note[0])
        snprintf(r->note, sizeof r->note,
                 "%s %d: the old generation had not gone %s (%d processes, %d at the start)",
                 sig == LAB_SIG_USR2 ? "upgrade" : "reload", k + 1,
                 at_end ? "by the end of the run" : "by the next signal",
                 m->procs_left, base);
    *master = now;
}

/* Adds the latency of each slice that overlaps [from, to) s to h (when
 * not NULL), and returns the errors of the slices whose middle lies in it:
 * adjacent ranges then split the errors without counting any twice. */
static uint64_t add_slices(const struct json *slices, double slice_s, double from, double to,
                           struct hdr *h)
{
    uint64_t errors = 0;
    for (const struct json *sl = slices ? slices->child : NULL; sl; sl = sl->next) {
        double t;
        if (json_get_double(sl, "t_ms", &t) < 0)
            continue;
        t /= 1000;
        char err[128];
        if (h && t + slice_s > from && t < to)
            hdr_add_json(h, json_get(sl, "latency"), "ns", err, sizeof err);
        if (t + slice_s / 2 < from || t + slice_s / 2 >= to)
            continue;
        const struct json *e = json_get(sl, "errors");
        for (const struct json *k = e ? e->child : NULL; k; k = k->next)
            if (k->is_u64)
                errors += k->u64;
    }
    return errors;
}

static double p99_us(const struct hdr *h)
{
    return hdr_count(h) ? (double)hdr_percentile(h, 99) / 1000.0 : NAN;
}

/* The figures of each reload from herd load's timeline. 0, or -1 with err. */
static int read_timeline(const struct json *j, struct lab_reload_run *r, double dur_s, char *err,
                         size_t n)
{
    const struct json *tl = json_get(j, "timeline");
    uint64_t origin, slice_ms;
    const struct json *slices = tl ? json_get(tl, "slices") : NULL;
    if (!slices || json_get_u64(tl, "origin_monotonic_ns", &origin) < 0 ||
        json_get_u64(tl, "slice_ms", &slice_ms) < 0 || !slice_ms) {
        snprintf(err, n, "herd load's JSON has no timeline");
        return -1;
    }
    double sl = (double)slice_ms / 1000, w = LAB_RELOAD_WINDOW_MS / 1000.0, end = 0;
    r->slice_s = sl;
    for (int k = 0; k < r->nmarks; k++)
        r->marks[k].t_s = (double)(r->marks[k].sent_ns - (int64_t)origin) / 1e9;
    int count = 0;
    for (const struct json *s = slices->child; s; s = s->next)
        count++;
    r->rps = calloc((size_t)count + 1, sizeof *r->rps);
    struct hdr *near = hdr_new(), *away = hdr_new(), *one = hdr_new();
    if (!r->rps || !near || !away || !one) {
        hdr_free(near), hdr_free(away), hdr_free(one);
        snprintf(err, n, "out of memory");
        return -1;
    }
    for (const struct json *s = slices->child; s; s = s->next) {
        double t, resp;
        if (json_get_double(s, "t_ms", &t) < 0 || json_get_double(s, "responses", &resp) < 0)
            continue;
        int i = (int)(t / (double)slice_ms + 0.5);
        /* the slices after the run hold only its last responses: not a rate */
        if (i >= 0 && i < count && (i + 1) * sl <= dur_s + 1e-6) {
            r->rps[i] = resp / sl;
            if (i + 1 > r->nslices)
                r->nslices = i + 1;
        }
        end = t / 1000 + sl;
        int is_near = 0;
        for (int k = 0; k < r->nmarks; k++)
            is_near |= t / 1000 < r->marks[k].t_s + w && t / 1000 + sl > r->marks[k].t_s - w;
        char jerr[128];
        hdr_add_json(is_near ? near : away, json_get(s, "latency"), "ns", jerr, sizeof jerr);
    }
    r->errors_before = add_slices(slices, sl, -1, r->nmarks ? r->marks[0].t_s - w : end, NULL);
    for (int k = 0; k < r->nmarks; k++) {
        struct lab_reload_mark *m = &r->marks[k];
        double next = k + 1 < r->nmarks ? r->marks[k + 1].t_s - w : end + 1;
        m->errors = add_slices(slices, sl, m->t_s - w, next, NULL);
        hdr_reset(one);
        add_slices(slices, sl, m->t_s - w, m->t_s + w, one);
        m->p99_us = p99_us(one);
    }
    r->p99_near_us = p99_us(near);
    r->p99_away_us = p99_us(away);
    hdr_free(near), hdr_free(away), hdr_free(one);
    return 0;
}

/* Sleeps until the monotonic time at_ns, or until herd load (lpid) ends.
 * Returns 1 when a stop signal came, 2 when herd load ended, else 0. */
static int sleep_until(int64_t at_ns, pid_t lpid, int *status)
{
    for (;;) {
        int64_t left = (at_ns - mono_ns()) / 1000000;
        if (left <= 0)
            return 0;
        if (lproc_wait(lpid, left < 50 ? left : 50, status, NULL) == 0)
            return 2;
        if (lproc_stop_requested())
            return 1;
    }
}

/* Waits for herd load's --start-file (path) and reads the monotonic time
 * its measured run starts at into *origin. The signals are timed from
 * that: from the lab's own clock they came early by however long herd
 * load took to start (0.44 s on a loaded machine). Returns 0, 1 when a
 * stop signal came, 2 when herd load ended first, 3 when the file did not
 * come within limit_ms. */
static int wait_start(const char *path, pid_t lpid, int64_t limit_ms, int64_t *origin,
                      int *status)
{
    int64_t end = mono_ns() + limit_ms * 1000000;
    for (;;) {
        FILE *f = fopen(path, "re");
        if (f) {
            long long v = 0;
            int got = fscanf(f, "%lld", &v) == 1 && v > 0;
            fclose(f);
            if (got) {
                *origin = v;
                return 0;
            }
        }
        if (mono_ns() >= end)
            return 3;
        if (lproc_wait(lpid, 10, status, NULL) == 0)
            return 2;
        if (lproc_stop_requested())
            return 1;
    }
}

/* The whole run's verdict once herd load has ended (status). */
static void judge(struct lab *lab, const struct lab_server *s, struct lab_reload_run *r,
                  int status, const char *json, const char *log, pid_t master)
{
    struct lab_point *p = &r->p;
    char err[256];
    p->done = 1;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char how[64], tail[200];
        lab_describe_exit(status, how, sizeof how);
        lab_last_line(log, tail, sizeof tail);
        snprintf(p->reason, sizeof p->reason, "herd load: %.60s%s%.180s", how,
                 *tail ? ": " : "", tail);
        return;
    }
    struct json *j = lab_load_json(json, err, sizeof err);
    if (!j) {
        snprintf(p->reason, sizeof p->reason, "%s", err);
        return;
    }
    if (lab_point_from_json(j, p) < 0)
        snprintf(p->reason, sizeof p->reason, "herd load's JSON lacks the run's figures");
    else if (read_timeline(j, r, (double)(lab->cfg->reloads + 1) * lab->cfg->reload_every_ms / 1000,
                           err, sizeof err) < 0)
        snprintf(p->reason, sizeof p->reason, "%s", err);
    else if (!alive(master))
        snprintf(p->reason, sizeof p->reason, "the server's master (pid %d) had gone by the end",
                 (int)master);
    else
        p->ok = 1;
    json_free(j);
    (void)s;
}

/* Runs herd load against the started server and signals its master at
 * each multiple of reload_every. *master ends as the master in charge. */
static int signal_under_load(struct lab *lab, struct lab_server *s, int sig, int ci,
                             struct lab_reload_run *r, pid_t *master)
{
    const struct lab_config *cfg = lab->cfg;
    int conc = cfg->conc[ci];
    char name[160], json[900], log[900], start[900], err[256], warm[32], slice[16];
    lab_slug(name, sizeof name, s->label);
    snprintf(r->p.raw, sizeof r->p.raw, "raw/%.100s-%s-c%d.json", name, lab_signal_names[sig],
             conc);
    snprintf(json, sizeof json, "%s/%s", cfg->out_dir, r->p.raw);
    snprintf(log, sizeof log, "%s/raw/%.100s-%s-c%d.txt", cfg->out_dir, name,
             lab_signal_names[sig], conc);
    snprintf(start, sizeof start, "%s/raw/%.100s-%s-c%d.start", cfg->out_dir, name,
             lab_signal_names[sig], conc);
    snprintf(warm, sizeof warm, "%lldms", (long long)cfg->warmup_ms);
    snprintf(slice, sizeof slice, "%dms", SLICE_MS);
    const char *extra[] = {"--warmup", warm, "--timeline", slice, "--start-file", start, NULL};
    unlink(json);
    unlink(start);
    int base = procs(*master);
    int64_t dur = (cfg->reloads + 1) * cfg->reload_every_ms;
    pid_t lpid = lab_spawn_load(lab, s, 1, conc, dur, json, log, extra, err, sizeof err);
    if (lpid < 0) {
        r->p.done = 1;
        snprintf(r->p.reason, sizeof r->p.reason, "%s", err);
        return RUN_DONE;
    }
    int status = 0, ended = 0;
    int64_t t0 = 0;
    /* herd load fixes its start after its first connect (--timeout at most) */
    int began = wait_start(start, lpid, cfg->timeout_ms + 10000, &t0, &status);
    unlink(start);
    if (began == 1) {
        lproc_stop(lpid, 2000);
        return RUN_INTERRUPTED;
    }
    if (began == 2)
        ended = 1;
    if (began == 3) {
        lproc_stop(lpid, 2000);
        r->p.done = 1;
        snprintf(r->p.reason, sizeof r->p.reason, "herd load did not start its run in time");
        return RUN_DONE;
    }
    for (int k = 0; k < cfg->reloads && !ended; k++) {
        int w = sleep_until(t0 + (k + 1) * cfg->reload_every_ms * 1000000, lpid, &status);
        if (w == 1) {
            lproc_stop(lpid, 2000);
            return RUN_INTERRUPTED;
        }
        if (w == 2) {
            ended = 1;
            break;
        }
        if (k > 0)
            check_generation(s, r, k - 1, 0, sig, base, master);
        struct lab_reload_mark *m = &r->marks[r->nmarks++];
        m->master = *master;
        kill(*master, signal_numbers[sig]);
        m->sent_ns = mono_ns();
    }
    if (!ended) {
        int64_t limit = dur + 2 * cfg->timeout_ms + cfg->warmup_ms + 10000;
        int rc = lproc_wait(lpid, limit, &status, NULL);
        if (rc != 0) {
            lproc_stop(lpid, 2000);
            if (rc == 2)
                return RUN_INTERRUPTED;
            r->p.done = 1;
            snprintf(r->p.reason, sizeof r->p.reason, "herd load did not finish in time; stopped");
            return RUN_DONE;
        }
    }
    if (r->nmarks)
        check_generation(s, r, r->nmarks - 1, 1, sig, base, master);
    judge(lab, s, r, status, json, log, *master);
    return RUN_DONE;
}

static void print_run(const struct lab_server *s, int sig, int conc, const struct lab_reload_run *r)
{
    if (!r->p.ok) {
        fprintf(stderr, "lab: %-15s %-4s c=%-5d FAILED: %s\n", s->label, lab_signal_names[sig],
                conc, r->p.reason);
        return;
    }
    char rps[32], near[32], away[32];
    lab_fmt_num(rps, sizeof rps, r->p.rps);
    lab_fmt_us(near, sizeof near, r->p99_near_us);
    lab_fmt_us(away, sizeof away, r->p99_away_us);
    fprintf(stderr, "lab: %-15s %-4s c=%-5d %10s req/s  %d signals  errors %llu  p99 near %s, "
                    "away %s%s%s\n",
            s->label, lab_signal_names[sig], conc, rps, r->nmarks,
            (unsigned long long)r->p.errors_total, near, away, r->note[0] ? "; " : "", r->note);
}

/* Stops every generation of the server: the master in charge now (the pid
 * file may name one newer than the lab knows), each one signalled, and the
 * first; newest first, and the pid file once more in case a new master
 * wrote it meanwhile. Reaps the old masters that came to the lab as
 * orphans. */
static void stop_generations(const struct lab_server *s, pid_t first, pid_t master,
                             const struct lab_reload_run *r)
{
    pid_t all[LAB_RELOADS_MAX + 4];
    int n = 0;
    all[n++] = current_master(s, master);
    all[n++] = master;
    for (int k = r->nmarks - 1; k >= 0; k--)
        all[n++] = r->marks[k].master;
    all[n++] = first;
    for (int i = 0; i < n; i++)
        if (alive(all[i]))
            lproc_stop(all[i], STOP_GRACE_MS);
    pid_t late = current_master(s, master);
    if (alive(late))
        lproc_stop(late, STOP_GRACE_MS);
    for (int i = 0; i < n; i++)
        waitpid(all[i], NULL, WNOHANG);
}

/* One run: a fresh server, the load and the signals, the server stopped. */
static int reload_one(struct lab *lab, struct lab_server *s, int sig, int ci)
{
    const struct lab_config *cfg = lab->cfg;
    struct lab_reload_run *r = &s->reload[sig * cfg->nconc + ci];
    char name[160], dir[900];
    lab_slug(name, sizeof name, s->label);
    snprintf(dir, sizeof dir, "%s/servers/%s", cfg->out_dir, name);
    if (!strcmp(s->kind, "herd")) {
        /* herd serve may not share the lab's idea of a relative path */
        size_t root = strlen(lab->docroot) - strlen("/www");
        snprintf(s->pid_file, sizeof s->pid_file, "%.*s/servers/%.100s/herd.pid", (int)root,
                 lab->docroot, name);
        unlink(s->pid_file);
    }
    if (lab_wait_quiet(lab))
        return RUN_INTERRUPTED;
    pid_t pid = -1;
    int started = lab_start_server(lab, s, dir, &pid);
    int result = RUN_DONE;
    if (started != 0) {
        r->p.done = 1;
        snprintf(r->p.reason, sizeof r->p.reason, "%.250s", s->reason);
        if (pid > 0)
            lproc_stop(pid, STOP_GRACE_MS);
    } else {
        pid_t master = pid;
        result = signal_under_load(lab, s, sig, ci, r, &master);
        if (result == RUN_DONE)
            print_run(s, sig, cfg->conc[ci], r);
        stop_generations(s, pid, master, r);
    }
    if (started > 0 && lproc_stop_requested())
        result = RUN_INTERRUPTED;
    return result;
}

/* Every run of one server; its state says whether any succeeded. */
static int reload_server(struct lab *lab, struct lab_server *s)
{
    const struct lab_config *cfg = lab->cfg;
    int any = 0, ok = 0;
    for (int sig = 0; sig < LAB_NSIG; sig++) {
        if (!cfg->signals[sig])
            continue;
        for (int ci = 0; ci < cfg->nconc; ci++) {
            struct lab_reload_run *r = &s->reload[sig * cfg->nconc + ci];
            if (!lab_reload_supported(s->kind, s->model, sig)) {
                snprintf(r->p.reason, sizeof r->p.reason, "not run: %s does not support %s here",
                         s->label, sig == LAB_SIG_USR2 ? "a binary upgrade (USR2)" : "HUP");
                continue;
            }
            any = 1;
            if (lproc_stop_requested() || reload_one(lab, s, sig, ci) == RUN_INTERRUPTED)
                return RUN_INTERRUPTED;
            ok |= r->p.ok;
        }
    }
    if (!any) {
        s->state = SRV_SKIPPED;
        snprintf(s->reason, sizeof s->reason, "cannot reload: %s",
                 !strcmp(s->kind, "herd") ? "this model has no reload (no master)"
                                          : "the lab drives reloads of herd and nginx only");
    } else if (ok) {
        s->state = SRV_OK;
    }
    return RUN_DONE;
}

void lab_reload_run_all(struct lab *lab)
{
    const struct lab_config *cfg = lab->cfg;
    int runs = 0;
    for (int i = 0; i < lab->nservers; i++)
        for (int sig = 0; sig < LAB_NSIG; sig++)
            runs += cfg->signals[sig] &&
                    lab_reload_supported(lab->servers[i].kind, lab->servers[i].model, sig);
    runs *= cfg->nconc;
    int64_t est = runs * ((cfg->reloads + 1) * cfg->reload_every_ms + cfg->warmup_ms + 1000) / 1000;
    fprintf(stderr, "lab: reload scenario: %d runs of %lld ms (%d signals, one every %lld ms) "
                    "after %lld ms warm-up; estimated at least %lldm%02llds; writing %s\n",
            runs, (long long)((cfg->reloads + 1) * cfg->reload_every_ms), cfg->reloads,
            (long long)cfg->reload_every_ms, (long long)cfg->warmup_ms, (long long)(est / 60),
            (long long)(est % 60), cfg->out_dir);
    for (int i = 0; i < lab->nservers && !lab->interrupted; i++) {
        struct lab_server *s = &lab->servers[i];
        if (s->state != SRV_PENDING)
            continue;
        if (reload_server(lab, s) == RUN_INTERRUPTED)
            lab->interrupted = 1;
        lab_write_reports(lab);
    }
}

void lab_reload_free(struct lab *lab)
{
    for (int i = 0; i < lab->nservers; i++) {
        struct lab_server *s = &lab->servers[i];
        for (int k = 0; s->reload && k < LAB_NSIG * lab->cfg->nconc; k++)
            free(s->reload[k].rps);
        free(s->reload);
        s->reload = NULL;
    }
}

/* herd lab: the orchestration. For each server: start it pinned to the
 * server CPU, wait until it answers (and check it is ours and listens on
 * 127.0.0.1 only), then for each keep-alive mode and concurrency run
 * `herd load` as a child pinned to the load CPU, sampling /proc before and
 * after; stop the server by PID. herd load runs as a child process so the
 * lab measures exactly what users run, and a crash in one run cannot take
 * the lab down. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/json.h"
#include "bench/lab_internal.h"
#include "bench/lab_proc.h"
#include "core/printable.h"

const char *const lab_lat_keys[LAT_N] = {"p50", "p90", "p99", "p999", "max", "mean"};

#define READY_MS 10000
#define PORT_ATTEMPTS 3 /* starts on a port taken between its pick and the bind */
#define STOP_GRACE_MS 5000
/* Starting one server, waiting until it answers, and stopping it, for the
 * run-time estimate: a herd server was ready in 0.37 s and stopped at once
 * (a short lab, on this two-core machine). */
#define SERVER_START_STOP_MS 400
#define QUIET_STEP_MS 250    /* the pause between runs doubles as the quiet check */
#define QUIET_WAIT_MS 5000
#define QUIET_MAX_PCT 10.0
#define FOREIGN_MAX_PCT 10.0

enum { RUN_DONE, RUN_INTERRUPTED };

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

void lab_slug(char *out, size_t n, const char *label)
{
    snprintf(out, n, "%s", label);
    for (char *p = out; *p; p++)
        if (*p == '/')
            *p = '-';
}

void lab_last_line(const char *path, char *out, size_t n)
{
    out[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        /* skip herd load's carriage-return progress and blank lines */
        char *p = strrchr(line, '\r');
        p = p ? p + 1 : line;
        if (*p)
            snprintf(out, n, "%.*s", (int)(n - 1), p);
    }
    fclose(f);
    text_printable(out, strlen(out), 0);
}

void lab_describe_exit(int status, char *out, size_t n)
{
    if (WIFEXITED(status))
        snprintf(out, n, "exit status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(out, n, "killed by signal %d", WTERMSIG(status));
    else
        snprintf(out, n, "status 0x%x", status);
}

/* ---------------------------------------------------------------- servers */

/* Waits until the server answers GET path with 200 on a socket it owns.
 * Returns 0, or -1 with the reason in s->reason. */
static int wait_ready(struct lab *lab, struct lab_server *s, pid_t pid, const char *log)
{
    int64_t end = now_ms() + READY_MS;
    char buf[4096], *body, tail[256];
    size_t blen;
    for (;;) {
        int status;
        if (lproc_exited(pid, &status)) {
            char how[64];
            lab_describe_exit(status, how, sizeof how);
            lab_last_line(log, tail, sizeof tail);
            snprintf(s->reason, sizeof s->reason, "exited at start (%s)%s%.200s", how,
                     *tail ? ": " : "", tail);
            return -2;
        }
        int st = lab_http_get(s->port, lab->cfg->path, 1000, buf, sizeof buf, &body, &blen);
        if (st == 200)
            break;
        if (st >= 400) {
            snprintf(s->reason, sizeof s->reason, "answered %d to GET %s%s", st, lab->cfg->path,
                     st == 403 ? " (can its worker user read the docroot?)" : "");
            return -1;
        }
        if (now_ms() >= end) {
            snprintf(s->reason, sizeof s->reason, "did not answer on 127.0.0.1:%d within %d s",
                     s->port, READY_MS / 1000);
            return -1;
        }
        if (lproc_sleep_ms(50)) {
            snprintf(s->reason, sizeof s->reason, "interrupted while starting");
            return -1;
        }
    }
    /* It answers: is it ours, and does it listen on 127.0.0.1 only? */
    struct lproc_id tree[64];
    int n = lproc_tree(pid, tree, 64);
    struct lproc_listener ls[32];
    int nl = lproc_listeners(tree, n, ls, 32);
    int ours = 0;
    for (int i = 0; i < nl; i++) {
        if (!ls[i].loopback4) {
            snprintf(s->reason, sizeof s->reason, "listens on %s port %d, not only on 127.0.0.1",
                     ls[i].addr, ls[i].port);
            return -1;
        }
        ours |= ls[i].port == s->port;
    }
    if (!ours) {
        snprintf(s->reason, sizeof s->reason,
                 "port %d answers, but not from a socket of the server's processes", s->port);
        return -1;
    }
    if (!strcmp(s->kind, "herd")) {
        int64_t w, r, master = 0;
        if (lab_herd_status(s->port, &w, &r, &master) < 0 || master != pid) {
            snprintf(s->reason, sizeof s->reason, "its status page (/herd-status) %s",
                     master ? "names another master" : "cannot be read");
            return -1;
        }
    }
    s->npids = 0;
    for (int i = 0; i < n && s->npids < (int)(sizeof s->pids / sizeof s->pids[0]); i++)
        s->pids[s->npids++] = tree[i].pid;
    return 0;
}

/* ---------------------------------------------------------------- runs */

struct sample {
    struct lproc_usage u;
    int have_u;
    uint64_t overflows, drops;
    int have_net;
    uint64_t srv_task, srv_total, load_task, load_total;
    int have_cores;
    int64_t wakeups, requests;
    int have_status;
    double t;
};

static void take_sample(const struct lab *lab, const struct lab_server *s, pid_t pid,
                        struct sample *x, int with_status)
{
    memset(x, 0, sizeof *x);
    x->have_u = lproc_usage_tree(pid, &x->u) == 0;
    x->have_net = lproc_netstat(&x->overflows, &x->drops) == 0;
    x->have_cores = lproc_core_ticks(lab->cfg->server_cpu, &x->srv_task, &x->srv_total) == 0 &&
                    lproc_core_ticks(lab->cfg->load_cpu, &x->load_task, &x->load_total) == 0;
    if (with_status && !strcmp(s->kind, "herd"))
        x->have_status = lab_herd_status(s->port, &x->wakeups, &x->requests, NULL) == 0;
    x->t = now_s();
}

/* Runs herd load once. Returns 0 when it finished (exit status in
 * *status, usage in ru), 1 when it overran its deadline (and was
 * stopped), 2 when a stop signal came (and it was stopped). */
pid_t lab_spawn_load(const struct lab *lab, const struct lab_server *s, int ka, int conc,
                     int64_t dur_ms, const char *json, const char *log,
                     const char *const *extra, char *err, size_t errlen)
{
    const struct lab_config *cfg = lab->cfg;
    char url[700], c[16], d[32], t[32], cpu[16];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", s->port, cfg->path);
    snprintf(c, sizeof c, "%d", conc);
    snprintf(d, sizeof d, "%lldms", (long long)dur_ms);
    snprintf(t, sizeof t, "%lldms", (long long)cfg->timeout_ms);
    snprintf(cpu, sizeof cpu, "%d", cfg->load_cpu);
    char *argv[32];
    int a = 0;
    argv[a++] = (char *)lab->man.herd_bin;
    argv[a++] = "load";
    argv[a++] = url;
    argv[a++] = "-c";
    argv[a++] = c;
    argv[a++] = "-t";
    argv[a++] = "1";
    argv[a++] = "-d";
    argv[a++] = d;
    argv[a++] = "--timeout";
    argv[a++] = t;
    argv[a++] = "--cpus";
    argv[a++] = cpu;
    if (!ka)
        argv[a++] = "--no-keepalive";
    if (json) {
        argv[a++] = "--json";
        argv[a++] = (char *)json;
    }
    for (; extra && *extra && a < 31; extra++)
        argv[a++] = (char *)*extra;
    argv[a] = NULL;
    unlink(log);
    return lproc_spawn(argv, cfg->load_cpu, log, err, errlen);
}

int lab_run_load(const struct lab *lab, const struct lab_server *s, int ka, int conc,
                 int64_t dur_ms, const char *json, const char *log, int *status,
                 struct rusage *ru, char *err, size_t errlen)
{
    const struct lab_config *cfg = lab->cfg;
    pid_t pid = lab_spawn_load(lab, s, ka, conc, dur_ms, json, log, NULL, err, errlen);
    if (pid < 0)
        return 1;
    /* herd load stops itself after -d; connecting and the last timeouts
     * take at most --timeout more. */
    int64_t limit = dur_ms + 2 * cfg->timeout_ms + 10000;
    int rc = lproc_wait(pid, limit, status, ru);
    if (rc == 1) {
        snprintf(err, errlen, "herd load did not finish within %lld s; stopped",
                 (long long)(limit / 1000));
        lproc_stop(pid, 2000);
    } else if (rc == 2) {
        snprintf(err, errlen, "interrupted");
        lproc_stop(pid, 2000);
    }
    return rc;
}

struct json *lab_load_json(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "herd load wrote no JSON (%s)", strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n == cap) {
            char *t = realloc(buf, cap ? cap * 2 : 65536);
            if (!t)
                break;
            buf = t;
            cap = cap ? cap * 2 : 65536;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        if (!r)
            break;
        n += r;
    }
    fclose(f);
    char jerr[160];
    struct json *j = buf ? json_parse(buf, n, jerr, sizeof jerr) : NULL;
    free(buf);
    if (!j)
        snprintf(err, errlen, "herd load's JSON does not parse: %s", buf ? jerr : "no memory");
    return j;
}

int lab_point_from_json(const struct json *j, struct lab_point *p)
{
    int ok = json_get_double(j, "requests_per_sec", &p->rps) == 0 &&
             json_get_u64(j, "requests", &p->requests) == 0 &&
             json_get_double(j, "duration_s", &p->duration_s) == 0;
    json_get_u64(j, "connects", &p->connects);
    const struct json *lat = json_get(j, "latency_us");
    for (int i = 0; i < LAT_N && ok; i++)
        ok = lat && json_get_double(lat, lab_lat_keys[i], &p->lat_us[i]) == 0;
    const struct json *e = json_get(j, "errors");
    p->errors_total = 0;
    for (int i = 0; i < LOAD_NERR && ok; i++) {
        p->errors[i] = 0;
        if (e)
            json_get_u64(e, load_err_names[i], &p->errors[i]);
        p->errors_total += p->errors[i];
    }
    return ok ? 0 : -1;
}

static int read_load_json(const char *path, struct lab_point *p, char *err, size_t errlen)
{
    struct json *j = lab_load_json(path, err, errlen);
    if (!j)
        return -1;
    int rc = lab_point_from_json(j, p);
    json_free(j);
    if (rc < 0)
        snprintf(err, errlen, "herd load's JSON lacks requests_per_sec, requests or latency_us");
    return rc;
}

static void print_point(const struct lab_server *s, int ka, int conc, const struct lab_point *p)
{
    if (!p->ok) {
        fprintf(stderr, "lab: %-15s %-10s c=%-5d FAILED: %s\n", s->label,
                ka ? "keep-alive" : "close", conc, p->reason);
        return;
    }
    char rps[32], p99[32];
    lab_fmt_num(rps, sizeof rps, p->rps);
    lab_fmt_us(p99, sizeof p99, p->lat_us[LAT_P99]);
    double cpu = p->user_s + p->sys_s;
    fprintf(stderr,
            "lab: %-15s %-10s c=%-5d %10s req/s  p99 %9s  server CPU %3.0f%% (%.1f us/req)  "
            "errors %llu\n",
            s->label, ka ? "keep-alive" : "close", conc, rps, p99,
            p->wall_s > 0 ? 100 * cpu / p->wall_s : 0,
            p->requests ? 1e6 * cpu / (double)p->requests : 0,
            (unsigned long long)p->errors_total);
}

/* Waits (up to QUIET_WAIT_MS) until neither measured core is busier than
 * QUIET_MAX_PCT over a QUIET_STEP_MS window; this also lets the last run's
 * connections settle. Returns 1 when a stop signal came. */
int lab_wait_quiet(const struct lab *lab)
{
    int64_t end = now_ms() + QUIET_WAIT_MS;
    for (;;) {
        uint64_t st0, sa0, lt0, la0, st1, sa1, lt1, la1;
        int ok = lproc_core_ticks(lab->cfg->server_cpu, &st0, &sa0) == 0 &&
                 lproc_core_ticks(lab->cfg->load_cpu, &lt0, &la0) == 0;
        if (lproc_sleep_ms(QUIET_STEP_MS))
            return 1;
        ok = ok && lproc_core_ticks(lab->cfg->server_cpu, &st1, &sa1) == 0 &&
             lproc_core_ticks(lab->cfg->load_cpu, &lt1, &la1) == 0;
        if (!ok || sa1 <= sa0 || la1 <= la0)
            return 0;
        double bs = 100.0 * (double)(st1 - st0) / (double)(sa1 - sa0);
        double bl = 100.0 * (double)(lt1 - lt0) / (double)(la1 - la0);
        if ((bs <= QUIET_MAX_PCT && bl <= QUIET_MAX_PCT) || now_ms() >= end)
            return 0;
    }
}

/* How much a counter grew from one sample to the next; 0, never a
 * wrapped difference, where it went down. A sum over a process tree goes
 * down when a process exits, and such a run is failed before its figures
 * are taken (measure_once); this is the guard behind that. */
static uint64_t grown(uint64_t before, uint64_t after)
{
    return after > before ? after - before : 0;
}

/* A good run's server and load figures: the differences of the samples
 * around it, and herd load's own CPU time. */
static void fill_point(struct lab_point *p, const struct sample *a, const struct sample *b,
                       const struct rusage *ru)
{
    double hz = (double)lproc_hz();
    p->wall_s = b->t - a->t;
    p->user_s = (double)grown(a->u.utime, b->u.utime) / hz;
    p->sys_s = (double)grown(a->u.stime, b->u.stime) / hz;
    p->vcsw = grown(a->u.vcsw, b->u.vcsw);
    p->ivcsw = grown(a->u.ivcsw, b->u.ivcsw);
    p->nproc = b->u.nproc;
    p->nthreads = b->u.nthreads;
    if (a->have_net && b->have_net) {
        p->overflows = grown(a->overflows, b->overflows);
        p->drops = grown(a->drops, b->drops);
    }
    p->empty_wakeups = a->have_status && b->have_status ? b->wakeups - a->wakeups : -1;
    p->srv_requests = a->have_status && b->have_status ? b->requests - a->requests : -1;
    p->load_user_s = (double)ru->ru_utime.tv_sec + ru->ru_utime.tv_usec / 1e6;
    p->load_sys_s = (double)ru->ru_stime.tv_sec + ru->ru_stime.tv_usec / 1e6;
    p->foreign_pct = -1;
    if (a->have_cores && b->have_cores && b->srv_total > a->srv_total &&
        b->load_total > a->load_total) {
        double srv = (double)(b->srv_task - a->srv_task) - (p->user_s + p->sys_s) * hz;
        double load =
            (double)(b->load_task - a->load_task) - (p->load_user_s + p->load_sys_s) * hz;
        double fs = 100 * srv / (double)(b->srv_total - a->srv_total);
        double fl = 100 * load / (double)(b->load_total - a->load_total);
        p->foreign_pct = fs > fl ? fs : fl;
        if (p->foreign_pct < 0)
            p->foreign_pct = 0;
    }
}

/* One measured run of herd load into p (attempt counts from 1). */
static int measure_once(struct lab *lab, struct lab_server *s, pid_t pid, int ka, int conc,
                        int attempt, struct lab_point *p)
{
    const struct lab_config *cfg = lab->cfg;
    char name[160], json[900], log[900], err[256], try[16] = "";
    lab_slug(name, sizeof name, s->label);
    if (attempt > 1)
        snprintf(try, sizeof try, ".try%d", attempt);
    snprintf(p->raw, sizeof p->raw, "raw/%.100s-%s-c%d%s.json", name,
             ka ? "keepalive" : "close", conc, try);
    snprintf(json, sizeof json, "%s/%s", cfg->out_dir, p->raw);
    snprintf(log, sizeof log, "%s/raw/%.100s-%s-c%d%s.txt", cfg->out_dir, name,
             ka ? "keepalive" : "close", conc, try);
    unlink(json);
    int status;
    struct rusage ru;
    struct sample a, b;
    take_sample(lab, s, pid, &a, 1);
    memset(&ru, 0, sizeof ru);
    int rc = lab_run_load(lab, s, ka, conc, cfg->duration_ms, json, log, &status, &ru, err,
                      sizeof err);
    take_sample(lab, s, pid, &b, 0);
    if (rc == 2)
        return RUN_INTERRUPTED;
    /* The status page last: its own request must not land in the window. */
    if (!strcmp(s->kind, "herd"))
        b.have_status = lab_herd_status(s->port, &b.wakeups, &b.requests, NULL) == 0;

    p->done = 1;
    p->ok = 0;
    int exited;
    struct lproc_id gone;
    if (rc != 0) {
        snprintf(p->reason, sizeof p->reason, "%s", err);
    } else if (lproc_exited(pid, &exited)) {
        char how[64];
        lab_describe_exit(exited, how, sizeof how);
        snprintf(p->reason, sizeof p->reason, "the server exited during the run (%s)", how);
    } else if (a.have_u && b.have_u && lproc_usage_lost(&a.u, &b.u, &gone)) {
        /* a worker that died (and was respawned): the server's CPU time
         * went with it, and its figures would be too low or wrap */
        snprintf(p->reason, sizeof p->reason,
                 "a server process (pid %d) exited during the run, taking its CPU time with it",
                 (int)gone.pid);
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char how[64], tail[200];
        lab_describe_exit(status, how, sizeof how);
        lab_last_line(log, tail, sizeof tail);
        snprintf(p->reason, sizeof p->reason, "herd load: %.60s%s%.180s", how, *tail ? ": " : "",
                 *tail ? tail : "");
    } else if (read_load_json(json, p, err, sizeof err) < 0) {
        snprintf(p->reason, sizeof p->reason, "%s", err);
    } else if (p->requests <= p->errors[LERR_STATUS] || !(p->rps > 0)) {
        snprintf(p->reason, sizeof p->reason, "no successful response (%llu requests, %llu errors)",
                 (unsigned long long)p->requests, (unsigned long long)p->errors_total);
    } else if (!a.have_u || !b.have_u) {
        snprintf(p->reason, sizeof p->reason, "cannot read the server's /proc counters");
    } else {
        p->ok = 1;
    }
    if (!p->ok)
        return RUN_DONE;

    fill_point(p, &a, &b, &ru);
    return RUN_DONE;
}

/* Measures one point: a warm-up, then runs until one is undisturbed
 * (foreign CPU at most FOREIGN_MAX_PCT) or --retries more attempts are
 * used up; the least disturbed attempt is kept. A failed run is not
 * repeated: failing is a result. */
static int measure(struct lab *lab, struct lab_server *s, pid_t pid, int ki, int ci)
{
    const struct lab_config *cfg = lab->cfg;
    struct lab_point *p = lab_point(lab, s, ki, ci);
    int ka = cfg->ka[ki], conc = cfg->conc[ci];
    char name[160], err[256];
    lab_slug(name, sizeof name, s->label);
    if (lab_wait_quiet(lab))
        return RUN_INTERRUPTED;
    if (cfg->warmup_ms > 0) {
        char wlog[900];
        int status;
        struct rusage ru;
        snprintf(wlog, sizeof wlog, "%s/raw/%.100s-%s-c%d.warmup.txt", cfg->out_dir, name,
                 ka ? "keepalive" : "close", conc);
        if (lab_run_load(lab, s, ka, conc, cfg->warmup_ms, NULL, wlog, &status, &ru, err,
                     sizeof err) == 2)
            return RUN_INTERRUPTED;
    }
    struct lab_point *try = malloc(sizeof *try);
    if (!try) {
        p->done = 1;
        snprintf(p->reason, sizeof p->reason, "out of memory");
        return RUN_DONE;
    }
    int attempts = 0, result = RUN_DONE;
    for (int attempt = 1; attempt <= 1 + cfg->retries; attempt++) {
        if (attempt > 1) {
            fprintf(stderr, "lab: %-15s %-10s c=%-5d disturbed (foreign CPU %.0f%%): again\n",
                    s->label, ka ? "keep-alive" : "close", conc, try->foreign_pct);
            if (lab_wait_quiet(lab)) {
                result = RUN_INTERRUPTED;
                break;
            }
        }
        memset(try, 0, sizeof *try);
        if (measure_once(lab, s, pid, ka, conc, attempt, try) == RUN_INTERRUPTED) {
            result = RUN_INTERRUPTED;
            break;
        }
        attempts = attempt;
        int better = !p->done || (try->ok && (!p->ok || try->foreign_pct < p->foreign_pct));
        if (better)
            *p = *try;
        if (!try->ok || try->foreign_pct <= FOREIGN_MAX_PCT)
            break;
    }
    free(try);
    p->attempts = attempts;
    if (p->done)
        print_point(s, ka, conc, p);
    return result;
}

/* Whether the server's log says its port was taken: every server the lab
 * runs words a bind failure with strerror(EADDRINUSE). */
static int port_was_taken(const char *log)
{
    FILE *f = fopen(log, "re");
    if (!f)
        return 0;
    char line[1024];
    const char *taken = strerror(EADDRINUSE);
    int found = 0;
    for (int n = 0; !found && n < 200 && fgets(line, sizeof line, f); n++)
        found = strstr(line, taken) != NULL;
    fclose(f);
    return found;
}

/* lab_start_server's one attempt, on a port picked now: 0 ready; -1
 * failed before a process ran; 1 failed with the server running (*out);
 * 2 the server exited at start. */
static int start_on_a_free_port(struct lab *lab, struct lab_server *s, const char *dir,
                                const char *log, pid_t *out)
{
    const struct lab_config *cfg = lab->cfg;
    char err[256];
    s->port = lab_pick_port(cfg->port_lo, cfg->port_hi);
    if (s->port < 0) {
        if (cfg->port_lo)
            snprintf(s->reason, sizeof s->reason, "no free port on 127.0.0.1 in %d-%d",
                     cfg->port_lo, cfg->port_hi);
        else
            snprintf(s->reason, sizeof s->reason, "no free port on 127.0.0.1");
        return -1;
    }
    char store[4096], *argv[32];
    if (lab_server_command(s, lab->man.herd_bin, lab->docroot, dir, s->port,
                           lab->man.nofile_soft, store, sizeof store, argv, 32, err,
                           sizeof err) < 0) {
        snprintf(s->reason, sizeof s->reason, "%s", err);
        return -1;
    }
    unlink(log);
    pid_t pid = lproc_spawn(argv, cfg->server_cpu, log, err, sizeof err);
    if (pid < 0) {
        snprintf(s->reason, sizeof s->reason, "%s", err);
        fprintf(stderr, "lab: %s: %s\n", s->label, s->reason);
        return -1;
    }
    fprintf(stderr, "lab: %s: started pid %d on 127.0.0.1:%d (CPU %d)\n", s->label, (int)pid,
            s->port, cfg->server_cpu);
    s->pids[0] = pid;
    s->npids = 1;
    *out = pid;
    int ready = wait_ready(lab, s, pid, log);
    return ready == -2 ? 2 : ready < 0 ? 1 : 0;
}

int lab_start_server(struct lab *lab, struct lab_server *s, const char *reldir, pid_t *out)
{
    const struct lab_config *cfg = lab->cfg;
    char log[PATH_MAX + 32], dir[PATH_MAX];
    int rc = lab_mkdir_p(reldir);
    if (rc < 0 || !realpath(reldir, dir)) {
        s->state = SRV_FAILED;
        snprintf(s->reason, sizeof s->reason, "cannot create %.200s: %s", reldir,
                 strerror(rc < 0 ? -rc : errno));
        return -1;
    }
    lab_server_version(s, dir, cfg->server_cpu);
    s->workers_as_root = lab->docroot_private;
    snprintf(log, sizeof log, "%s/server.log", dir);
    /* The lab finds a free port and the server binds it a moment later:
     * a port taken in between (an outgoing connection may take one of the
     * ephemeral range) costs a start on another port, not the server. */
    for (int attempt = 1;; attempt++) {
        rc = start_on_a_free_port(lab, s, dir, log, out);
        if (rc != 2 || attempt == PORT_ATTEMPTS || !port_was_taken(log))
            break;
        fprintf(stderr, "lab: %s: port %d was taken before the server bound it: another port\n",
                s->label, s->port);
    }
    if (rc != 0) {
        s->state = SRV_FAILED;
        if (rc > 0)
            fprintf(stderr, "lab: %s: failed: %s\n", s->label, s->reason);
        return rc > 0 ? 1 : -1;
    }
    s->state = SRV_OK;
    char pids[200] = "";
    for (int i = 0, used = 0; i < s->npids; i++)
        used += snprintf(pids + used, sizeof pids - (size_t)used, "%s%d", i ? " " : "",
                         (int)s->pids[i]);
    fprintf(stderr, "lab: %s: ready, pids %s\n", s->label, pids);
    return 0;
}

/* Starts s, runs every point, stops it. Returns RUN_INTERRUPTED when a
 * stop signal came. */
static int run_server(struct lab *lab, struct lab_server *s)
{
    const struct lab_config *cfg = lab->cfg;
    char name[160], dir[900];
    lab_slug(name, sizeof name, s->label);
    snprintf(dir, sizeof dir, "%s/servers/%s", cfg->out_dir, name);
    pid_t pid = -1;
    int started = lab_start_server(lab, s, dir, &pid);
    if (started < 0)
        return RUN_DONE;
    int result = RUN_DONE;
    if (started > 0) {
        if (lproc_stop_requested())
            result = RUN_INTERRUPTED;
    } else {
        for (int ki = 0; ki < cfg->nka && result == RUN_DONE; ki++)
            for (int ci = 0; ci < cfg->nconc && result == RUN_DONE; ci++) {
                int status;
                if (lproc_exited(pid, &status)) {
                    char how[64];
                    lab_describe_exit(status, how, sizeof how);
                    struct lab_point *p = lab_point(lab, s, ki, ci);
                    p->done = 1;
                    snprintf(p->reason, sizeof p->reason, "the server had exited (%s)", how);
                    continue;
                }
                result = measure(lab, s, pid, ki, ci);
            }
    }
    if (cfg->profile && s->state == SRV_OK && !strcmp(s->kind, "herd") && result == RUN_DONE &&
        !lproc_exited(pid, &(int){0}))
        lab_profile(lab, s, pid, dir);
    int killed = lproc_stop(pid, STOP_GRACE_MS);
    fprintf(stderr, "lab: %s: stopped pid %d%s\n", s->label, (int)pid,
            killed ? " (some processes needed SIGKILL)" : "");
    return result;
}

/* ---------------------------------------------------------------- lab */

int lab_write_reports(struct lab *lab)
{
    const char *out = lab->cfg->out_dir;
    char path[900];
    int rc = 0;
    snprintf(path, sizeof path, "%s/report.json", out);
    rc |= lab_write_json(lab, path);
    snprintf(path, sizeof path, "%s/report.md", out);
    rc |= lab_write_md(lab, path);
    if (lab->cfg->scenario == LAB_RELOAD)
        return rc | lab_reload_svgs(lab) ? -1 : 0;
    snprintf(path, sizeof path, "%s/reqs.svg", out);
    rc |= lab_write_svg(lab, CHART_RPS, path);
    snprintf(path, sizeof path, "%s/p99.svg", out);
    rc |= lab_write_svg(lab, CHART_P99, path);
    snprintf(path, sizeof path, "%s/errors.svg", out);
    rc |= lab_write_svg(lab, CHART_ERRORS, path);
    snprintf(path, sizeof path, "%s/cpu.svg", out);
    rc |= lab_write_svg(lab, CHART_CPU, path);
    if (lab_balance_count(lab->cfg)) {
        snprintf(path, sizeof path, "%s/balance.svg", out);
        rc |= lab_write_balance_svg(lab, path);
    }
    return rc ? -1 : 0;
}

static void stamp(char *buf, size_t n)
{
    time_t t = time(NULL);
    struct tm tm;
    localtime_r(&t, &tm);
    strftime(buf, n, "%Y-%m-%d %H:%M:%S %Z", &tm);
}

static void add_server(struct lab *lab, const char *kind, const char *model)
{
    struct lab_server *s = &lab->servers[lab->nservers++];
    s->kind = kind;
    s->model = model;
    s->state = SRV_PENDING;
    if (model)
        snprintf(s->label, sizeof s->label, "herd/%s", model);
    else
        snprintf(s->label, sizeof s->label, "%s", kind);
    if (!model && lab_server_find(kind, s->bin, sizeof s->bin) < 0) {
        s->state = SRV_NOT_INSTALLED;
        snprintf(s->reason, sizeof s->reason, "not installed");
        if (lab->nnotes < 8)
            snprintf(lab->notes[lab->nnotes++], sizeof lab->notes[0],
                     "%s is not installed (looked in PATH and the sbin directories; "
                     "set %s_BIN to point at it): skipped", kind,
                     !strcmp(kind, "nginx") ? "NGINX" : !strcmp(kind, "h2o") ? "H2O" : "LIGHTTPD");
        fprintf(stderr, "lab: %s is not installed; skipped\n", kind);
    }
}

/* Signals, the file limit and our own binary: what the lab needs of the
 * process. 0, or -1 after a line on stderr. */
static int prepare_process(struct lab *lab, char *herd_bin, size_t n)
{
    int rc = lproc_signals_init();
    if (rc < 0) {
        fprintf(stderr, "herd lab: cannot set up signals: %s\n", strerror(-rc));
        return -1;
    }
    /* Servers and herd load inherit the limit: use the whole hard limit. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    ssize_t len = readlink("/proc/self/exe", herd_bin, n - 1);
    if (len <= 0) {
        fprintf(stderr, "herd lab: cannot find my own binary: %s\n", strerror(errno));
        return -1;
    }
    herd_bin[len] = 0;
    lab_manifest_fill(&lab->man, herd_bin);
    stamp(lab->man.started, sizeof lab->man.started);
    return 0;
}

/* The output directory with raw/, servers/ and the docroot www/. 0, or -1
 * after a line on stderr. */
static int make_out_dir(struct lab *lab)
{
    const struct lab_config *cfg = lab->cfg;
    char err[320], sub[900];
    int rc = lab_mkdir_p(cfg->out_dir);
    for (int i = 0; rc == 0 && i < 2; i++) {
        snprintf(sub, sizeof sub, "%s/%s", cfg->out_dir, i ? "servers" : "raw");
        rc = lab_mkdir_p(sub);
    }
    if (rc < 0) {
        fprintf(stderr, "herd lab: cannot create %s: %s\n", cfg->out_dir, strerror(-rc));
        return -1;
    }
    chmod(cfg->out_dir, 0755);
    char abs[600];
    if (!realpath(cfg->out_dir, abs)) {
        fprintf(stderr, "herd lab: %s: %s\n", cfg->out_dir, strerror(errno));
        return -1;
    }
    snprintf(lab->docroot, sizeof lab->docroot, "%.590s/www", abs);
    if (lab_make_docroot(lab, err, sizeof err) < 0) {
        fprintf(stderr, "herd lab: %s\n", err);
        return -1;
    }
    lab_check_docroot_reach(lab);
    if (lab->body_bytes < 0 && lab->nnotes < 8)
        snprintf(lab->notes[lab->nnotes++], sizeof lab->notes[0],
                 "%s is not one of the lab's files (index.html, 4k.bin, 1m.bin): expect 404s",
                 cfg->path);
    return 0;
}

/* Every server in report order, each with room for its points. */
static int add_servers(struct lab *lab)
{
    const struct lab_config *cfg = lab->cfg;
    for (int i = 0; i < cfg->nmodels; i++)
        add_server(lab, "herd", cfg->models[i]);
    for (int i = 0; i < cfg->ncompare; i++)
        add_server(lab, cfg->compare[i], NULL);
    for (int i = 0; i < lab->nservers; i++) {
        struct lab_server *s = &lab->servers[i];
        s->points = calloc((size_t)(cfg->nka * cfg->nconc), sizeof(struct lab_point));
        if (cfg->scenario == LAB_RELOAD) {
            s->workers = cfg->reload_workers;
            s->reload = calloc((size_t)(LAB_NSIG * cfg->nconc), sizeof *s->reload);
        }
        if (!s->points || (cfg->scenario == LAB_RELOAD && !s->reload)) {
            fprintf(stderr, "herd lab: out of memory\n");
            return -1;
        }
    }
    return 0;
}

int64_t lab_estimate_ms(const struct lab_config *cfg, int nservers)
{
    int64_t per_run = cfg->warmup_ms + cfg->duration_ms + QUIET_STEP_MS;
    int64_t balance = lab_balance_count(cfg) * (cfg->duration_ms + SERVER_START_STOP_MS);
    return nservers * (cfg->nka * cfg->nconc * per_run + SERVER_START_STOP_MS) + balance;
}

/* Runs each pending server in turn, rewriting the report after each. */
static void run_servers(struct lab *lab)
{
    const struct lab_config *cfg = lab->cfg;
    if (cfg->scenario == LAB_RELOAD) {
        lab_reload_run_all(lab);
        return;
    }
    int pending = 0;
    for (int i = 0; i < lab->nservers; i++)
        pending += lab->servers[i].state == SRV_PENDING;
    int64_t est = lab_estimate_ms(cfg, pending) / 1000;
    fprintf(stderr, "lab: estimated run time: at least %lldm%02llds (%d server%s x %d run%s of "
                    "%lld ms warm-up + %lld ms, plus starts and stops; busy cores add up to "
                    "5 s of waiting per run, and a disturbed run is repeated)\n",
            (long long)(est / 60), (long long)(est % 60), pending, pending == 1 ? "" : "s",
            cfg->nka * cfg->nconc, cfg->nka * cfg->nconc == 1 ? "" : "s",
            (long long)cfg->warmup_ms, (long long)cfg->duration_ms);
    int64_t began = now_ms();
    fprintf(stderr, "lab: %d server%s x %d concurrency level%s x %d keep-alive mode%s, %lld ms "
                    "each; server on CPU %d, load on CPU %d; writing %s\n",
            lab->nservers, lab->nservers == 1 ? "" : "s", cfg->nconc, cfg->nconc == 1 ? "" : "s",
            cfg->nka, cfg->nka == 1 ? "" : "s", (long long)cfg->duration_ms, cfg->server_cpu,
            cfg->load_cpu, cfg->out_dir);
    for (int i = 0; i < lab->nservers && !lab->interrupted; i++) {
        struct lab_server *s = &lab->servers[i];
        if (s->state != SRV_PENDING)
            continue;
        if (lproc_stop_requested() || run_server(lab, s) == RUN_INTERRUPTED)
            lab->interrupted = 1;
        stamp(lab->man.finished, sizeof lab->man.finished);
        lab_write_reports(lab);
    }
    if (!lab->interrupted && !lproc_stop_requested()) {
        lab_balance_run(lab);
        lab_write_reports(lab);
    }
    int64_t took = (now_ms() - began) / 1000;
    fprintf(stderr, "lab: the runs took %lldm%02llds (estimated at least %lldm%02llds)\n",
            (long long)(took / 60), (long long)(took % 60), (long long)(est / 60),
            (long long)(est % 60));
}

/* The final report; returns lab_run's exit status. */
static int finish_lab(struct lab *lab)
{
    const struct lab_config *cfg = lab->cfg;
    int runs = 0;
    for (int i = 0; i < lab->nservers; i++) {
        struct lab_server *s = &lab->servers[i];
        if (s->state == SRV_PENDING) {
            s->state = SRV_SKIPPED;
            snprintf(s->reason, sizeof s->reason, "not run: the lab was interrupted");
        }
        for (int k = 0; k < cfg->nka * cfg->nconc; k++)
            runs += s->points[k].ok;
        for (int k = 0; s->reload && k < LAB_NSIG * cfg->nconc; k++)
            runs += s->reload[k].p.ok;
    }
    stamp(lab->man.finished, sizeof lab->man.finished);
    int wrc = lab_write_reports(lab);
    if (runs)
        lab_print_summary(lab, stderr);
    if (wrc < 0)
        fprintf(stderr, "herd lab: cannot write the report in %s\n", cfg->out_dir);
    else
        fprintf(stderr, "lab: report in %s/report.md (also report.json, %s%s)\n", cfg->out_dir,
                cfg->scenario == LAB_RELOAD ? "reload-cN-SIGNAL.svg"
                                            : "reqs.svg, p99.svg, errors.svg, cpu.svg",
                lab->nbalance ? ", balance.svg" : "");
    if (lab->interrupted)
        fprintf(stderr, "lab: interrupted; every server the lab started is stopped\n");
    else if (!runs)
        fprintf(stderr, "herd lab: no run succeeded (see the report for the reasons)\n");
    return lab->interrupted ? 130 : wrc < 0 ? 1 : runs ? 0 : 1;
}

static void free_lab(struct lab *lab)
{
    lab_reload_free(lab);
    for (int i = 0; i < lab->nservers; i++)
        free(lab->servers[i].points);
    free(lab);
}

int lab_run(const struct lab_config *cfg)
{
    struct lab *lab = calloc(1, sizeof *lab);
    if (!lab) {
        fprintf(stderr, "herd lab: out of memory\n");
        return 1;
    }
    lab->cfg = cfg;
    char herd_bin[512];
    if (prepare_process(lab, herd_bin, sizeof herd_bin) < 0 || make_out_dir(lab) < 0 ||
        add_servers(lab) < 0) {
        free_lab(lab);
        return 1;
    }
    run_servers(lab);
    int status = finish_lab(lab);
    free_lab(lab);
    return status;
}

/* herd lab's notebook: the machine manifest, report.md (one table per
 * metric, rows = server/model, columns = concurrency, per keep-alive mode)
 * and report.json (every raw number). */
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "bench/json.h"
#include "bench/lab_internal.h"
#include "core/version.h"

#define FOREIGN_FLAG_PCT 10.0

/* ---------------------------------------------------------------- formats */

void lab_fmt_num(char *buf, size_t n, double v)
{
    if (!isfinite(v)) {
        snprintf(buf, n, "n/a");
        return;
    }
    if (fabs(v) < 100) {
        snprintf(buf, n, "%.1f", v);
        return;
    }
    char digits[64];
    snprintf(digits, sizeof digits, "%.0f", fabs(v));
    size_t len = strlen(digits), o = 0;
    if (v < 0 && o + 1 < n)
        buf[o++] = '-';
    for (size_t i = 0; i < len && o + 2 < n; i++) {
        if (i && (len - i) % 3 == 0)
            buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = 0;
}

void lab_fmt_us(char *buf, size_t n, double us)
{
    if (!isfinite(us))
        snprintf(buf, n, "n/a");
    else if (us < 10)
        snprintf(buf, n, "%.1f µs", us);
    else if (us < 1000)
        snprintf(buf, n, "%.0f µs", us);
    else if (us < 1e6)
        snprintf(buf, n, "%.2f ms", us / 1e3);
    else
        snprintf(buf, n, "%.2f s", us / 1e6);
}

/* ---------------------------------------------------------------- manifest */

static void read_line(const char *path, char *out, size_t n)
{
    out[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    if (fgets(out, (int)n, f))
        out[strcspn(out, "\n")] = 0;
    fclose(f);
}

static void cpu_list(const cpu_set_t *set, char *out, size_t n)
{
    size_t o = 0;
    out[0] = 0;
    for (int c = 0; c < CPU_SETSIZE && o + 16 < n; c++) {
        if (!CPU_ISSET(c, set))
            continue;
        int e = c;
        while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, set))
            e++;
        o += (size_t)snprintf(out + o, n - o, e > c ? "%s%d-%d" : "%s%d", o ? "," : "", c, e);
        c = e;
    }
}

void lab_manifest_fill(struct lab_manifest *m, const char *herd_bin)
{
    memset(m, 0, sizeof *m);
    snprintf(m->herd_bin, sizeof m->herd_bin, "%s", herd_bin);
    snprintf(m->herd_version, sizeof m->herd_version, "%s", HERD_VERSION);
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "model name", 10))
                continue;
            char *colon = strchr(line, ':');
            if (colon) {
                colon += 1 + (colon[1] == ' ');
                colon[strcspn(colon, "\n")] = 0;
                snprintf(m->cpu_model, sizeof m->cpu_model, "%s", colon);
            }
            break;
        }
        fclose(f);
    }
    if (!m->cpu_model[0])
        snprintf(m->cpu_model, sizeof m->cpu_model, "unknown");
    m->cpus_online = (int)sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        cpu_list(&set, m->affinity, sizeof m->affinity);
    struct utsname u;
    if (uname(&u) == 0) {
        snprintf(m->kernel, sizeof m->kernel, "%s %s %s %s", u.sysname, u.release, u.version,
                 u.machine);
        snprintf(m->hostname, sizeof m->hostname, "%s", u.nodename);
    }
    char la[128];
    read_line("/proc/loadavg", la, sizeof la);
    int spaces = 0;
    for (char *p = la; *p; p++)
        if (*p == ' ' && ++spaces == 3) {
            *p = 0;
            break;
        }
    snprintf(m->loadavg, sizeof m->loadavg, "%.63s", la);
    read_line("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", m->governor,
              sizeof m->governor);
    if (!m->governor[0])
        snprintf(m->governor, sizeof m->governor, "n/a (no cpufreq)");
    static const char *const names[] = {
        "net.core.somaxconn",        "net.ipv4.tcp_max_syn_backlog", "fs.file-max",
        "fs.nr_open",                "net.core.netdev_max_backlog",  "net.ipv4.ip_local_port_range",
        "net.ipv4.tcp_tw_reuse",     "net.ipv4.tcp_fin_timeout",     "net.ipv4.tcp_syncookies",
        "net.ipv4.tcp_congestion_control", "kernel.sched_autogroup_enabled",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0] && m->nsysctl < 12; i++) {
        char path[160];
        snprintf(path, sizeof path, "/proc/sys/%s", names[i]);
        for (char *p = path + 10; *p; p++)
            if (*p == '.')
                *p = '/';
        m->sysctl[m->nsysctl].name = names[i];
        read_line(path, m->sysctl[m->nsysctl].value, sizeof m->sysctl[0].value);
        for (char *p = m->sysctl[m->nsysctl].value; *p; p++)
            if (*p == '\t')
                *p = ' ';
        if (!m->sysctl[m->nsysctl].value[0])
            snprintf(m->sysctl[m->nsysctl].value, sizeof m->sysctl[0].value, "n/a");
        m->nsysctl++;
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        m->nofile_soft = (long)rl.rlim_cur;
        m->nofile_hard = (long)rl.rlim_max;
    }
}

/* ---------------------------------------------------------------- markdown */

/* Text from outside herd (a server's version, a reason quoting its log, a
 * command line) in a markdown table cell or list item: '|' would end the
 * cell, and '<' '&' would start HTML in most renderers. In a code span
 * (code) only '|' and '`' matter: the span shows the rest as it is. */
static void md_text_in(FILE *f, const char *s, int code)
{
    for (; *s; s++) {
        if (*s == '|')
            fputs("\\|", f);
        else if (*s == '`')
            fputc('\'', f);
        else if (code)
            fputc(*s, f);
        else if (*s == '<')
            fputs("&lt;", f);
        else if (*s == '>')
            fputs("&gt;", f);
        else if (*s == '&')
            fputs("&amp;", f);
        else if (*s == '\\' || *s == '*' || *s == '_' || *s == '[' || *s == ']')
            fprintf(f, "\\%c", *s);
        else
            fputc(*s, f);
    }
}

static void md_text(FILE *f, const char *s)
{
    md_text_in(f, s, 0);
}

static const char *ka_title(int ka)
{
    return ka ? "Keep-alive on" : "Keep-alive off (a new connection per request)";
}

/* In the tables: servers that ran or were meant to. */
static int in_tables(const struct lab_server *s)
{
    return s->state == SRV_OK || s->state == SRV_FAILED || s->state == SRV_SKIPPED;
}

enum metric {
    M_RPS, M_P50, M_P90, M_P99, M_P999, M_MAX, M_ERRORS, M_CPU, M_CPU_REQ, M_VCSW, M_IVCSW,
    M_LISTEN, M_WAKEUPS, M_LITTLE, M_QUALITY, M_N
};

static const struct {
    const char *title, *note;
} metrics[M_N] = {
    [M_RPS] = {"Requests per second", "An asterisk marks a run where other work took more than "
                                      "10% of a measured core in every attempt (see the last "
                                      "table)."},
    [M_P50] = {"Latency p50", NULL},
    [M_P90] = {"Latency p90", NULL},
    [M_P99] = {"Latency p99", NULL},
    [M_P999] = {"Latency p99.9", NULL},
    [M_MAX] = {"Latency max", NULL},
    [M_ERRORS] = {"Errors (herd load's count, by kind)", NULL},
    [M_CPU] = {"Server CPU, % of one core (user + sys)", "Summed over the server's process tree "
                                                         "from /proc/PID/stat."},
    [M_CPU_REQ] = {"Server CPU per request (µs)", "(user + sys) / requests: the figure that "
                                                  "ranks servers when the load generator is "
                                                  "the limit."},
    [M_VCSW] = {"Voluntary context switches per 1,000 requests", "Every thread of every "
                                                                 "server process "
                                                                 "(/proc/PID/task/*/status)."},
    [M_IVCSW] = {"Involuntary context switches per 1,000 requests", NULL},
    [M_LISTEN] = {"ListenOverflows / ListenDrops during the run", "TcpExt counters from "
                                                                  "/proc/net/netstat "
                                                                  "(machine-wide deltas)."},
    [M_WAKEUPS] = {"Empty accept wakeups (herd's scoreboard)", "A worker woke for a connection "
                                                               "and found none (the thundering "
                                                               "herd); herd only."},
    [M_LITTLE] = {"Little's law: req/s × mean latency / connections",
                  "Should be 1.00: in a closed loop every connection has one request out. "
                  "Runs more than 10% off are marked \"off\": the load generator could not "
                  "keep its connections busy, or the latency it timed misses part of each "
                  "request's time."},
    [M_QUALITY] = {"Load generator CPU % / foreign CPU %", "Load: herd load's CPU on its core "
                                                           "(near 100% = the load generator is "
                                                           "the limit). Foreign: CPU used by "
                                                           "anything else on either measured "
                                                           "core. A disturbed run is repeated (--retries) and the least disturbed kept."},
};

static void cell(const struct lab_server *s, const struct lab_point *p, enum metric m, int conc,
                 char *buf, size_t n)
{
    if (!p->ok) {
        snprintf(buf, n, "%s", p->done || s->state == SRV_FAILED ? "failed" : "–");
        return;
    }
    double req = (double)p->requests, cpu = p->user_s + p->sys_s;
    switch (m) {
    case M_RPS:
        lab_fmt_num(buf, n, p->rps);
        if (p->foreign_pct > FOREIGN_FLAG_PCT)
            strncat(buf, "*", n - strlen(buf) - 1);
        break;
    case M_P50: case M_P90: case M_P99: case M_P999: case M_MAX: {
        static const int idx[] = {[M_P50] = LAT_P50, [M_P90] = LAT_P90, [M_P99] = LAT_P99,
                                  [M_P999] = LAT_P999, [M_MAX] = LAT_MAX};
        lab_fmt_us(buf, n, p->lat_us[idx[m]]);
        break;
    }
    case M_ERRORS: {
        size_t o = (size_t)snprintf(buf, n, "%llu", (unsigned long long)p->errors_total);
        int first = 1;
        for (int k = 0; k < LOAD_NERR && o < n; k++)
            if (p->errors[k]) {
                o += (size_t)snprintf(buf + o, n - o, "%s%s %llu", first ? " (" : ", ",
                                      load_err_names[k], (unsigned long long)p->errors[k]);
                first = 0;
            }
        if (!first && o < n)
            snprintf(buf + o, n - o, ")");
        break;
    }
    case M_CPU:
        snprintf(buf, n, "%.0f%% (%.0f + %.0f)", 100 * cpu / p->wall_s, 100 * p->user_s / p->wall_s,
                 100 * p->sys_s / p->wall_s);
        break;
    case M_CPU_REQ:
        snprintf(buf, n, "%.2f", 1e6 * cpu / req);
        break;
    case M_VCSW:
        snprintf(buf, n, "%.1f", 1000.0 * (double)p->vcsw / req);
        break;
    case M_IVCSW:
        snprintf(buf, n, "%.1f", 1000.0 * (double)p->ivcsw / req);
        break;
    case M_LISTEN:
        snprintf(buf, n, "%llu / %llu", (unsigned long long)p->overflows,
                 (unsigned long long)p->drops);
        break;
    case M_WAKEUPS:
        if (p->empty_wakeups < 0)
            snprintf(buf, n, "–");
        else
            snprintf(buf, n, "%lld", (long long)p->empty_wakeups);
        break;
    case M_LITTLE: {
        double r = lab_little_ratio(p, conc);
        snprintf(buf, n, fabs(r - 1) > LAB_LITTLE_FLAG ? "%.2f off" : "%.2f", r);
        break;
    }
    case M_QUALITY: {
        double load = 100 * (p->load_user_s + p->load_sys_s) / p->wall_s;
        char runs[24] = "";
        if (p->attempts > 1)
            snprintf(runs, sizeof runs, " (%d runs)", p->attempts);
        if (p->foreign_pct < 0)
            snprintf(buf, n, "%.0f / n/a%s", load, runs);
        else
            snprintf(buf, n, "%.0f / %.0f%s", load, p->foreign_pct, runs);
        break;
    }
    case M_N:
        buf[0] = 0;
        break;
    }
}

/* ---------------------------------------------------------------- summary */

/* The summary's two figures for one run. Keep-alive on: req/s and server
 * CPU µs per request. Off, each request is a connection of its own:
 * connections per second (CPS: completed connections / duration) and CPU
 * µs per connection. The rate gets the req/s table's asterisk. */
static void summary_cells(const struct lab_server *s, const struct lab_point *p, char *rate,
                          size_t rn, char *cost, size_t cn)
{
    if (!p->ok) {
        snprintf(rate, rn, "%s", p->done || s->state == SRV_FAILED ? "failed" : "–");
        snprintf(cost, cn, "%s", rate);
        return;
    }
    double n = (double)p->requests, cpu = p->user_s + p->sys_s;
    lab_fmt_num(rate, rn, p->duration_s > 0 ? n / p->duration_s : NAN);
    if (p->foreign_pct > FOREIGN_FLAG_PCT)
        strncat(rate, "*", rn - strlen(rate) - 1);
    if (n > 0)
        snprintf(cost, cn, "%.2f", 1e6 * cpu / n);
    else
        snprintf(cost, cn, "n/a");
}

static const char *summary_head(int ka, int cost)
{
    return ka ? (cost ? "keep-alive on: CPU µs/request" : "keep-alive on: req/s")
              : (cost ? "keep-alive off: CPU µs/connection" : "keep-alive off: conn/s (CPS)");
}

/* One table: a row per server/model and concurrency, for every keep-alive
 * mode measured its rate and its CPU cost. */
static void summary_md(FILE *f, const struct lab *lab)
{
    const struct lab_config *cfg = lab->cfg;
    fprintf(f, "## Summary: rate and server CPU per request or connection\n\n"
               "Keep-alive on: requests per second and the server's CPU µs per request. "
               "Keep-alive off (a new connection per request): connections per second (CPS, "
               "completed connections / duration) and the server's CPU µs per connection. "
               "CPU is user + sys of the server's process tree over the run, divided by the "
               "requests (connections) completed; compare servers by it where the load "
               "generator is the limit. An asterisk marks a disturbed run (see the last "
               "table of each mode).\n\n| server/model | c |");
    for (int ki = 0; ki < cfg->nka; ki++)
        fprintf(f, " %s | %s |", summary_head(cfg->ka[ki], 0), summary_head(cfg->ka[ki], 1));
    fprintf(f, "\n| --- | ---: |");
    for (int ki = 0; ki < cfg->nka; ki++)
        fprintf(f, " ---: | ---: |");
    fprintf(f, "\n");
    for (int i = 0; i < lab->nservers; i++) {
        const struct lab_server *s = &lab->servers[i];
        if (!in_tables(s))
            continue;
        for (int c = 0; c < cfg->nconc; c++) {
            fprintf(f, "| %s | %d |", s->label, cfg->conc[c]);
            for (int ki = 0; ki < cfg->nka; ki++) {
                char rate[48], cost[48];
                summary_cells(s, lab_point(lab, s, ki, c), rate, sizeof rate, cost, sizeof cost);
                fprintf(f, " %s | %s |", rate, cost);
            }
            fprintf(f, "\n");
        }
    }
    fprintf(f, "\n");
}

void lab_print_summary(const struct lab *lab, FILE *f)
{
    const struct lab_config *cfg = lab->cfg;
    if (cfg->scenario == LAB_RELOAD)
        return;
    fprintf(f, "lab: summary (keep-alive on: req/s, server CPU us/request; "
               "off: connections/s, server CPU us/connection)\n");
    for (int i = 0; i < lab->nservers; i++) {
        const struct lab_server *s = &lab->servers[i];
        if (!in_tables(s))
            continue;
        for (int c = 0; c < cfg->nconc; c++) {
            fprintf(f, "lab: summary %-15s c=%-5d", s->label, cfg->conc[c]);
            for (int ki = 0; ki < cfg->nka; ki++) {
                char rate[48], cost[48];
                summary_cells(s, lab_point(lab, s, ki, c), rate, sizeof rate, cost, sizeof cost);
                fprintf(f, "  %s %10s %s %8s us/%s", cfg->ka[ki] ? "on " : "off", rate,
                        cfg->ka[ki] ? "req/s " : "conn/s", cost, cfg->ka[ki] ? "req " : "conn");
            }
            fprintf(f, "\n");
        }
    }
}

static void table(FILE *f, const struct lab *lab, int ki, enum metric m)
{
    const struct lab_config *cfg = lab->cfg;
    if (m == M_WAKEUPS) {
        int any = 0;
        for (int i = 0; i < lab->nservers; i++)
            any |= !strcmp(lab->servers[i].kind, "herd") && in_tables(&lab->servers[i]);
        if (!any)
            return;
    }
    fprintf(f, "#### %s\n\n", metrics[m].title);
    if (metrics[m].note)
        fprintf(f, "%s\n\n", metrics[m].note);
    fprintf(f, "| server/model |");
    for (int c = 0; c < cfg->nconc; c++)
        fprintf(f, " c=%d |", cfg->conc[c]);
    fprintf(f, "\n| --- |");
    for (int c = 0; c < cfg->nconc; c++)
        fprintf(f, " ---: |");
    fprintf(f, "\n");
    for (int i = 0; i < lab->nservers; i++) {
        const struct lab_server *s = &lab->servers[i];
        if (!in_tables(s) || (m == M_WAKEUPS && strcmp(s->kind, "herd")))
            continue;
        fprintf(f, "| %s |", s->label);
        for (int c = 0; c < cfg->nconc; c++) {
            char buf[160];
            cell(s, lab_point(lab, s, ki, c), m, cfg->conc[c], buf, sizeof buf);
            fprintf(f, " %s |", buf);
        }
        fprintf(f, "\n");
    }
    fprintf(f, "\n");
}

/* The accept-balance runs: each worker's share of the connections. */
static void balance_md(FILE *f, const struct lab *lab)
{
    if (!lab->nbalance)
        return;
    int n = lab->cfg->balance_workers;
    fprintf(f, "## Accept balance\n\n%d workers on the server's CPU, a connection per request "
               "for the run's duration; the share of connections each worker accepted "
               "(herd's status page). Even is %.0f%% each (balance.svg).\n\n| run |", n,
            100.0 / n);
    for (int w = 0; w < n; w++)
        fprintf(f, " worker %d |", w);
    fprintf(f, " connections | busiest / even |\n| --- |");
    for (int w = 0; w <= n; w++)
        fprintf(f, " ---: |");
    fprintf(f, " ---: |\n");
    for (int i = 0; i < lab->nbalance; i++) {
        const struct lab_balance *b = &lab->balance[i];
        uint64_t total = 0, most = 0;
        for (int w = 0; w < b->workers; w++) {
            total += b->accepted[w];
            most = b->accepted[w] > most ? b->accepted[w] : most;
        }
        fprintf(f, "| %s |", b->label);
        if (!b->ok || !total) {
            fputs(" failed: ", f);
            md_text(f, b->ok ? "no connections" : b->reason);
            fputs(" |\n", f);
            continue;
        }
        for (int w = 0; w < b->workers; w++)
            fprintf(f, " %.1f%% |", 100.0 * (double)b->accepted[w] / (double)total);
        fprintf(f, " %llu | %.2f |\n", (unsigned long long)total,
                (double)most * b->workers / (double)total);
    }
    fprintf(f, "\n");
}

static const char *state_word(enum lab_srv_state st)
{
    switch (st) {
    case SRV_OK: return "ran";
    case SRV_NOT_INSTALLED: return "not installed";
    case SRV_FAILED: return "failed";
    case SRV_SKIPPED: return "not run";
    default: return "pending";
    }
}

/* "3s", "500ms" as a flag takes them; spaced ("3 s") for prose. */
static void fmt_dur(char *buf, size_t n, int64_t ms, int prose)
{
    if (ms % 1000)
        snprintf(buf, n, "%lld%sms", (long long)ms, prose ? " " : "");
    else
        snprintf(buf, n, "%lld%ss", (long long)(ms / 1000), prose ? " " : "");
}

static void servers_md(FILE *f, const struct lab *lab);
static int close_md(FILE *f, const char *tmp, const char *path);

/* The reload scenario's setup and tables. */
static void reload_md(FILE *f, const struct lab *lab)
{
    const struct lab_config *cfg = lab->cfg;
    fprintf(f, "## Setup: reload scenario\n\n");
    fprintf(f, "- Each server runs pinned to CPU %d; herd load runs pinned to CPU %d with one "
               "thread: `herd load http://127.0.0.1:PORT%s -t 1 -c N -d %llds --timeout %lldms "
               "--warmup %lldms --timeline 100ms`.\n",
            cfg->server_cpu, cfg->load_cpu, cfg->path,
            (long long)((cfg->reloads + 1) * cfg->reload_every_ms / 1000),
            (long long)cfg->timeout_ms, (long long)cfg->warmup_ms);
    fprintf(f, "- herd: `herd serve DOCROOT --model M --workers %d --keepalive-requests 100000000 "
               "--status-path /herd-status --listen 127.0.0.1:PORT --pid-file FILE`; nginx: "
               "worker_processes %d, otherwise as in the other scenario. Two workers, not "
               "one: a reload then replaces several workers at once (and herd hands idle "
               "connections over per worker slot), and nginx needs its master anyway; both "
               "share the one server CPU.\n",
            cfg->reload_workers, cfg->reload_workers);
    fprintf(f, "- HUP goes to the master the lab started; USR2 to the master the pid file "
               "names (the new master after an upgrade). nginx runs HUP only: it ignores "
               "USR2 while the process that started it (here the lab) lives (\"the changing "
               "binary signal is ignored\"). h2o and lighttpd are not run.\n\n");
    for (int i = 0; i < lab->nnotes; i++)
        fprintf(f, "> Note: %s.\n\n", lab->notes[i]);
    lab_reload_md(f, lab);
}

int lab_write_md(const struct lab *lab, const char *path)
{
    const struct lab_config *cfg = lab->cfg;
    const struct lab_manifest *m = &lab->man;
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -1;
    fprintf(f, "# herd lab, %s\n\n", m->started);
    if (lab->interrupted)
        fprintf(f, "**Interrupted**: this report holds the runs finished before the signal.\n\n");

    fprintf(f, "## Machine\n\n| | |\n| --- | --- |\n");
    fprintf(f, "| CPU | %s |\n", m->cpu_model);
    fprintf(f, "| cores online | %d (this process may use %s) |\n", m->cpus_online, m->affinity);
    fprintf(f, "| kernel | %s |\n", m->kernel);
    fprintf(f, "| host | %s |\n", m->hostname);
    fprintf(f, "| CPU frequency governor | %s |\n", m->governor);
    fprintf(f, "| load average at start | %s |\n", m->loadavg);
    fprintf(f, "| open files (soft / hard) | %ld / %ld |\n", m->nofile_soft, m->nofile_hard);
    for (int i = 0; i < m->nsysctl; i++)
        fprintf(f, "| %s | %s |\n", m->sysctl[i].name, m->sysctl[i].value);
    fprintf(f, "| herd | %s (%s) |\n", m->herd_version, m->herd_bin);
    fprintf(f, "| started / finished | %s / %s |\n\n", m->started, m->finished);

    if (cfg->scenario == LAB_RELOAD) {
        reload_md(f, lab);
        servers_md(f, lab);
        return close_md(f, tmp, path);
    }
    char dur[32], warm[32], tmo[32];
    fmt_dur(dur, sizeof dur, cfg->duration_ms, 0);
    fmt_dur(warm, sizeof warm, cfg->warmup_ms, 1);
    fmt_dur(tmo, sizeof tmo, cfg->timeout_ms, 0);
    fprintf(f, "## Setup\n\n");
    fprintf(f, "- Each server runs pinned to CPU %d (sched_setaffinity, inherited by its "
               "processes and threads); herd load runs pinned to CPU %d with one thread.\n",
            cfg->server_cpu, cfg->load_cpu);
    fprintf(f, "- Each run: `herd load http://127.0.0.1:PORT%s -t 1 -c N -d %s --timeout %s "
               "[--no-keepalive]`, after an unmeasured warm-up of %s; GET %s (%d bytes).\n",
            cfg->path, dur, tmo, cfg->warmup_ms ? warm : "0 s (none)", cfg->path,
            lab->body_bytes);
    fprintf(f, "- Server counters are read from /proc just before and just after each run of "
               "herd load. Before each run the lab waits (up to 5 s) until both cores are "
               "below 10%% busy; a run in which other work took more than 10%% of either core "
               "is repeated up to %d more time%s and the least disturbed one is kept.\n",
            cfg->retries, cfg->retries == 1 ? "" : "s");
    fprintf(f, "- herd: `herd serve DOCROOT --model M --workers 1 --keepalive-requests "
               "100000000 --status-path /herd-status --listen 127.0.0.1:PORT`.\n");
    fprintf(f, "- nginx, h2o, lighttpd: one worker, access log off, sendfile on, keep-alive "
               "for (effectively) unlimited requests, 127.0.0.1 only, as in "
               "bench/anchors.sh; configs under servers/NAME/.\n");
    fprintf(f, "- The docroot (www/) holds a 64-byte index.html, 4k.bin and 1m.bin.\n\n");
    for (int i = 0; i < lab->nnotes; i++)
        fprintf(f, "> Note: %s.\n\n", lab->notes[i]);

    fprintf(f, "## How to read this\n\n"
               "Rows are servers (herd in each model), columns the number of connections "
               "herd load keeps open. On a two-core machine the server and the load generator "
               "get one core each, and herd load's single thread is often the limit: where "
               "the load generator's CPU (last table) is near 100%%, req/s measures herd "
               "load, not the server, and a more efficient server shows up as less server "
               "CPU and fewer CPU µs per request rather than as more req/s. Rank servers by "
               "req/s only where the server's CPU is near 100%% and the load generator's is "
               "not; elsewhere rank them by CPU per request. The kernel's loopback work is "
               "charged partly to softirq time that is in neither figure. A model that "
               "serves one connection at a time (iterative) stalls every other connection "
               "with keep-alive on: expect timeouts and a p99 near the --timeout there. "
               "With keep-alive off the latency includes the TCP handshake, and req/s are "
               "connections per second. Context switches count every thread of the "
               "server; listen overflows are machine-wide, so they belong to whatever ran "
               "then (here, only the lab). Charts: reqs.svg, p99.svg (log scales), errors.svg "
               "and cpu.svg (CPU per request).\n\n");

    summary_md(f, lab);
    for (int ki = 0; ki < cfg->nka; ki++) {
        fprintf(f, "## %s\n\n", ka_title(cfg->ka[ki]));
        for (int mm = 0; mm < M_N; mm++)
            table(f, lab, ki, (enum metric)mm);
    }

    int failed = 0;
    for (int i = 0; i < lab->nservers; i++) {
        const struct lab_server *s = &lab->servers[i];
        for (int ki = 0; ki < cfg->nka; ki++)
            for (int c = 0; c < cfg->nconc; c++) {
                const struct lab_point *p = lab_point(lab, s, ki, c);
                if (!p->done || p->ok)
                    continue;
                if (!failed++)
                    fprintf(f, "## Failed runs\n\n");
                fprintf(f, "- %s, keep-alive %s, c=%d: ", s->label, cfg->ka[ki] ? "on" : "off",
                        cfg->conc[c]);
                md_text(f, p->reason);
                fputs("\n", f);
            }
    }
    if (failed)
        fprintf(f, "\n");
    balance_md(f, lab);
    if (lab->cfg->profile) {
        fprintf(f, "## Profiles\n\nperf record -e cpu-clock -g on the server's processes "
                   "during one more run per herd model (keep-alive, c=%d); flame graphs drawn "
                   "by herd itself (src/bench/flame.c).\n\n",
                lab->cfg->conc[lab->cfg->nconc - 1]);
        for (int i = 0; i < lab->nservers; i++)
            if (lab->servers[i].flame[0])
                fprintf(f, "- %s: %s\n", lab->servers[i].label, lab->servers[i].flame);
        fprintf(f, "\n");
    }

    servers_md(f, lab);
    return close_md(f, tmp, path);
}

static void servers_md(FILE *f, const struct lab *lab)
{
    const struct lab_manifest *m = &lab->man;
    fprintf(f, "## Servers\n\n| server | state | version | command | pids |\n"
               "| --- | --- | --- | --- | --- |\n");
    for (int i = 0; i < lab->nservers; i++) {
        const struct lab_server *s = &lab->servers[i];
        char pids[200] = "";
        for (int k = 0, o = 0; k < s->npids && o < (int)sizeof pids; k++)
            o += snprintf(pids + o, sizeof pids - (size_t)o, "%s%d", k ? " " : "", (int)s->pids[k]);
        fprintf(f, "| %s | %s%s", s->label, state_word(s->state),
                s->state == SRV_OK || !s->reason[0] ? "" : ": ");
        md_text(f, s->state == SRV_OK ? "" : s->reason);
        fputs(" | ", f);
        md_text(f, !strcmp(s->kind, "herd") ? m->herd_version : s->version[0] ? s->version : "?");
        fputs(" | `", f);
        md_text_in(f, s->command[0] ? s->command : "-", 1);
        fprintf(f, "` | %s |\n", pids[0] ? pids : "-");
    }
    fprintf(f, "\nRaw output of every run of herd load is in raw/, server logs and configs in "
               "servers/, every figure in report.json.\n");
}

static int close_md(FILE *f, const char *tmp, const char *path)
{
    int bad = ferror(f);
    if (fclose(f) != 0 || bad || rename(tmp, path) < 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- JSON */

static void jnum(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.10g", v);
    else
        fputs("null", f);
}

static void jpoint(FILE *f, const struct lab *lab, const struct lab_server *s, int ki, int ci)
{
    const struct lab_point *p = lab_point(lab, s, ki, ci);
    fprintf(f, "    {\"server\": ");
    json_write_str(f, s->label);
    fprintf(f, ", \"keepalive\": %s, \"concurrency\": %d, \"done\": %s, \"ok\": %s",
            lab->cfg->ka[ki] ? "true" : "false", lab->cfg->conc[ci], p->done ? "true" : "false",
            p->ok ? "true" : "false");
    if (!p->ok) {
        fprintf(f, ", \"reason\": ");
        json_write_str(f, p->done ? p->reason
                                  : s->state == SRV_FAILED ? s->reason : "not run");
        fprintf(f, "}");
        return;
    }
    double cpu = p->user_s + p->sys_s, req = (double)p->requests;
    fprintf(f, ", \"requests\": %llu, \"connects\": %llu, \"duration_s\": ",
            (unsigned long long)p->requests, (unsigned long long)p->connects);
    jnum(f, p->duration_s);
    fprintf(f, ", \"requests_per_sec\": ");
    jnum(f, p->rps);
    if (!lab->cfg->ka[ki]) { /* completed connections / duration */
        fprintf(f, ", \"connections_per_sec\": ");
        jnum(f, p->duration_s > 0 ? req / p->duration_s : NAN);
    }
    fprintf(f, ",\n     \"latency_us\": {");
    for (int i = 0; i < LAT_N; i++) {
        fprintf(f, "%s\"%s\": ", i ? ", " : "", lab_lat_keys[i]);
        jnum(f, p->lat_us[i]);
    }
    fprintf(f, "},\n     \"errors\": {");
    for (int k = 0; k < LOAD_NERR; k++)
        fprintf(f, "%s\"%s\": %llu", k ? ", " : "", load_err_names[k],
                (unsigned long long)p->errors[k]);
    fprintf(f, "}, \"errors_total\": %llu,\n     \"server_usage\": {\"wall_s\": ",
            (unsigned long long)p->errors_total);
    jnum(f, p->wall_s);
    fprintf(f, ", \"user_s\": ");
    jnum(f, p->user_s);
    fprintf(f, ", \"sys_s\": ");
    jnum(f, p->sys_s);
    fprintf(f, ", \"cpu_pct\": ");
    jnum(f, p->wall_s > 0 ? 100 * cpu / p->wall_s : NAN);
    fprintf(f, ", \"cpu_us_per_request\": ");
    jnum(f, req > 0 ? 1e6 * cpu / req : NAN);
    if (!lab->cfg->ka[ki]) { /* a connection per request */
        fprintf(f, ", \"cpu_us_per_connection\": ");
        jnum(f, req > 0 ? 1e6 * cpu / req : NAN);
    }
    fprintf(f, ", \"voluntary_ctxt_switches\": %llu, \"involuntary_ctxt_switches\": %llu, "
               "\"processes\": %d, \"threads\": %d",
            (unsigned long long)p->vcsw, (unsigned long long)p->ivcsw, p->nproc, p->nthreads);
    fprintf(f, ", \"empty_accept_wakeups\": ");
    if (p->empty_wakeups >= 0)
        fprintf(f, "%lld", (long long)p->empty_wakeups);
    else
        fputs("null", f);
    fprintf(f, ", \"requests_counted\": ");
    if (p->srv_requests >= 0)
        fprintf(f, "%lld", (long long)p->srv_requests);
    else
        fputs("null", f);
    fprintf(f, "},\n     \"listen_overflows\": %llu, \"listen_drops\": %llu",
            (unsigned long long)p->overflows, (unsigned long long)p->drops);
    fprintf(f, ", \"load_usage\": {\"user_s\": ");
    jnum(f, p->load_user_s);
    fprintf(f, ", \"sys_s\": ");
    jnum(f, p->load_sys_s);
    fprintf(f, ", \"cpu_pct\": ");
    jnum(f, p->wall_s > 0 ? 100 * (p->load_user_s + p->load_sys_s) / p->wall_s : NAN);
    fprintf(f, "}, \"foreign_cpu_pct\": ");
    jnum(f, p->foreign_pct >= 0 ? p->foreign_pct : NAN);
    double little = lab_little_ratio(p, lab->cfg->conc[ci]);
    fprintf(f, ", \"little_ratio\": ");
    jnum(f, little);
    fprintf(f, ", \"little_off\": %s", fabs(little - 1) > LAB_LITTLE_FLAG ? "true" : "false");
    fprintf(f, ", \"attempts\": %d, \"disturbed\": %s", p->attempts,
            p->foreign_pct > FOREIGN_FLAG_PCT ? "true" : "false");
    fprintf(f, ", \"raw\": ");
    json_write_str(f, p->raw);
    fprintf(f, "}");
}

int lab_write_json(const struct lab *lab, const char *path)
{
    const struct lab_config *cfg = lab->cfg;
    const struct lab_manifest *m = &lab->man;
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -1;
    fprintf(f, "{\n  \"herd_lab\": 1, \"interrupted\": %s,\n", lab->interrupted ? "true" : "false");
    fprintf(f, "  \"machine\": {\"cpu_model\": ");
    json_write_str(f, m->cpu_model);
    fprintf(f, ", \"cpus_online\": %d, \"affinity\": ", m->cpus_online);
    json_write_str(f, m->affinity);
    fprintf(f, ", \"kernel\": ");
    json_write_str(f, m->kernel);
    fprintf(f, ", \"hostname\": ");
    json_write_str(f, m->hostname);
    fprintf(f, ", \"governor\": ");
    json_write_str(f, m->governor);
    fprintf(f, ", \"loadavg\": ");
    json_write_str(f, m->loadavg);
    fprintf(f, ", \"nofile\": [%ld, %ld],\n    \"sysctl\": {", m->nofile_soft, m->nofile_hard);
    for (int i = 0; i < m->nsysctl; i++) {
        fprintf(f, "%s", i ? ", " : "");
        json_write_str(f, m->sysctl[i].name);
        fprintf(f, ": ");
        json_write_str(f, m->sysctl[i].value);
    }
    fprintf(f, "},\n    \"herd_version\": ");
    json_write_str(f, m->herd_version);
    fprintf(f, ", \"herd_bin\": ");
    json_write_str(f, m->herd_bin);
    fprintf(f, ", \"started\": ");
    json_write_str(f, m->started);
    fprintf(f, ", \"finished\": ");
    json_write_str(f, m->finished);
    fprintf(f, "},\n  \"config\": {\"scenario\": \"%s\", \"concurrency\": [",
            cfg->scenario == LAB_RELOAD ? "reload" : "throughput");
    for (int c = 0; c < cfg->nconc; c++)
        fprintf(f, "%s%d", c ? ", " : "", cfg->conc[c]);
    fprintf(f, "], \"keepalive\": [");
    for (int k = 0; k < cfg->nka; k++)
        fprintf(f, "%s%s", k ? ", " : "", cfg->ka[k] ? "true" : "false");
    fprintf(f, "], \"duration_ms\": %lld, \"warmup_ms\": %lld, \"timeout_ms\": %lld, "
               "\"retries\": %d, \"server_cpu\": %d, \"load_cpu\": %d, \"path\": ",
            (long long)cfg->duration_ms, (long long)cfg->warmup_ms, (long long)cfg->timeout_ms,
            cfg->retries, cfg->server_cpu, cfg->load_cpu);
    json_write_str(f, cfg->path);
    fprintf(f, ", \"body_bytes\": %d, \"docroot\": ", lab->body_bytes);
    json_write_str(f, lab->docroot);
    fprintf(f, "},\n  \"notes\": [");
    for (int i = 0; i < lab->nnotes; i++) {
        fprintf(f, "%s", i ? ", " : "");
        json_write_str(f, lab->notes[i]);
    }
    fprintf(f, "],\n");
    if (cfg->scenario == LAB_RELOAD)
        lab_reload_json(f, lab);
    fprintf(f, "  \"servers\": [\n");
    for (int i = 0; i < lab->nservers; i++) {
        const struct lab_server *s = &lab->servers[i];
        fprintf(f, "    {\"label\": ");
        json_write_str(f, s->label);
        fprintf(f, ", \"kind\": ");
        json_write_str(f, s->kind);
        fprintf(f, ", \"model\": ");
        if (s->model)
            json_write_str(f, s->model);
        else
            fputs("null", f);
        fprintf(f, ", \"state\": ");
        json_write_str(f, state_word(s->state));
        fprintf(f, ", \"reason\": ");
        if (s->state != SRV_OK && s->reason[0])
            json_write_str(f, s->reason);
        else
            fputs("null", f);
        fprintf(f, ", \"version\": ");
        json_write_str(f, !strcmp(s->kind, "herd") ? m->herd_version : s->version);
        fprintf(f, ", \"command\": ");
        json_write_str(f, s->command);
        fprintf(f, ", \"config\": ");
        json_write_str(f, s->config);
        fprintf(f, ", \"port\": %d, \"pids\": [", s->port);
        for (int k = 0; k < s->npids; k++)
            fprintf(f, "%s%d", k ? ", " : "", (int)s->pids[k]);
        fprintf(f, "], \"profile\": ");
        json_write_str(f, s->flame);
        fprintf(f, "}%s\n", i + 1 < lab->nservers ? "," : "");
    }
    fprintf(f, "  ],\n  \"runs\": [\n");
    int first = 1;
    for (int i = 0; i < lab->nservers; i++) {
        const struct lab_server *s = &lab->servers[i];
        if (!in_tables(s) || cfg->scenario == LAB_RELOAD)
            continue;
        for (int ki = 0; ki < cfg->nka; ki++)
            for (int c = 0; c < cfg->nconc; c++) {
                fprintf(f, "%s", first ? "" : ",\n");
                first = 0;
                jpoint(f, lab, s, ki, c);
            }
    }
    fprintf(f, "\n  ],\n  \"balance\": [");
    for (int i = 0; i < lab->nbalance; i++) {
        const struct lab_balance *b = &lab->balance[i];
        fprintf(f, "%s\n    {\"run\": ", i ? "," : "");
        json_write_str(f, b->label);
        fprintf(f, ", \"workers\": %d, \"ok\": %s, \"accepted\": [", b->workers,
                b->ok ? "true" : "false");
        for (int w = 0; w < b->workers; w++)
            fprintf(f, "%s%llu", w ? ", " : "", (unsigned long long)b->accepted[w]);
        fprintf(f, "]");
        if (!b->ok) {
            fprintf(f, ", \"reason\": ");
            json_write_str(f, b->reason);
        }
        fprintf(f, "}");
    }
    fprintf(f, "\n  ]\n}\n");
    int bad = ferror(f);
    if (fclose(f) != 0 || bad || rename(tmp, path) < 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

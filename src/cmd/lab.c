/* herd lab: flags, help, exit status. The lab itself is src/bench/lab*.c. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/cpus.h"
#include "bench/lab.h"
#include "cmd/cmd.h"
#include "cmd/flags.h"

static const char lab_usage[] =
    "usage: herd lab [options]\n"
    "\n"
    "Runs herd serve in each concurrency model (and nginx, h2o, lighttpd when\n"
    "installed, each with one worker) under herd load at each concurrency\n"
    "level, server and load pinned to separate CPUs, and writes a lab notebook:\n"
    "DIR/report.md (machine manifest, one table per metric), DIR/report.json\n"
    "(every figure), DIR/reqs.svg, p99.svg, errors.svg and cpu.svg (charts against\n"
    "concurrency) and balance.svg. Per run it records req/s, latency\n"
    "p50/p90/p99/p99.9/max, errors, server CPU user/sys, context switches,\n"
    "ListenOverflows/ListenDrops, herd's empty accept wakeups and a Little's-law\n"
    "check. Then prefork (with and without --accept-herd), reuseport and dispatch\n"
    "run once more with several workers, a connection per request, and the\n"
    "share of connections each worker accepted goes to balance.svg. Everything\n"
    "listens on 127.0.0.1 only.\n"
    "\n"
    "  --models all|none|LIST     herd models (default all: %s)\n"
    "  --concurrency LIST         connections per run (default 1,2,5,10,20,50,100,200,500,1000)\n"
    "  --duration DUR             each measured run (default 5s)\n"
    "  --warmup DUR               unmeasured load before each run (default 1s; 0: none)\n"
    "  --timeout DUR              herd load's connect and response timeout (default 2s)\n"
    "  --retries N                repeat a run that other work disturbed (more than 10%% of\n"
    "                             a measured core) up to N more times (default 2)\n"
    "  --keepalive on|off|both    keep-alive, a connection per request, or both (default on)\n"
    "  --compare none|LIST        other servers, when installed (default nginx,h2o,lighttpd;\n"
    "                             NGINX_BIN, H2O_BIN, LIGHTTPD_BIN override where they are)\n"
    "  --out DIR                  where the report goes (default herd-lab-DATE-TIME)\n"
    "  --server-cpu N             the CPU for the server (default 0)\n"
    "  --load-cpu N               the CPU for herd load (default 1)\n"
    "  --port-range A-B           give the servers ports from A to B (default: any free\n"
    "                             port the kernel picks)\n"
    "  --path PATH                what to GET (default /index.html, 64 bytes; the lab's\n"
    "                             docroot also has /4k.bin and /1m.bin)\n"
    "  --balance-workers N        workers of the accept-balance runs (default 4; 0: no\n"
    "                             such runs; at most 16)\n"
    "  --profile                  after each herd model's runs, one more (keep-alive, the\n"
    "                             highest concurrency) under perf record -g: a flame\n"
    "                             graph DIR/flame-herd-MODEL.svg (needs linux-perf)\n"
    "  --scenario throughput|reload\n"
    "                             throughput (the default): the runs above. reload: per\n"
    "                             server, signal and concurrency, a fresh server (%d workers;\n"
    "                             nginx worker_processes %d) under herd load (keep-alive,\n"
    "                             no retries, --timeline 100ms) for (N+1) x DUR, the lab\n"
    "                             signalling its master every DUR; report.md has a table per\n"
    "                             signal (errors in all and by kind, errors per reload, p99\n"
    "                             within 500 ms of the reloads and away from them, HTTP >= 400,\n"
    "                             whether the old generation had gone by the next signal),\n"
    "                             reload-cN-SIGNAL.svg req/s over time with the reloads\n"
    "                             marked. Defaults there: --models with a master\n"
    "                             (%s),\n"
    "                             --compare nginx (HUP only; h2o and lighttpd are not run),\n"
    "                             --concurrency 20,200, no balance runs\n"
    "  --reloads N                reload: signals per run (default 5, 1 to 50)\n"
    "  --reload-every DUR         reload: time between signals (default 2s, 200ms to 60s)\n"
    "  --reload-signal hup|usr2|both\n"
    "                             reload: HUP (reload), USR2 (binary upgrade, herd only) or\n"
    "                             both (default both)\n"
    "  -h, --help                 this text\n"
    "\n"
    "Before the first run it prints an estimate of the whole run time (servers x\n"
    "keep-alive modes x concurrency levels x (warm-up + duration), plus starts).\n"
    "DUR takes ms, s, m, h. Ctrl-C (or SIGTERM) stops the servers the lab started\n"
    "and writes the report of what was measured. Exit status: 0 report written,\n"
    "1 no run succeeded or the report cannot be written, 2 bad usage, 130\n"
    "interrupted.\n";

static int bad(const char *fmt, const char *a)
{
    fprintf(stderr, "herd lab: ");
    fprintf(stderr, fmt, a);
    fprintf(stderr, " (see herd lab --help)\n");
    return 2;
}

static int in_list(const char *const *list, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(list[i], name))
            return i;
    return -1;
}

/* Splits a comma list of names known to known[]; keeps the order of
 * known[] and drops repeats. Returns 0, or 2 after a message. */
static int name_list(const char *flag, const char *v, const char *const *known, int nknown,
                     const char **out, int *nout)
{
    *nout = 0;
    if (!strcmp(v, "none"))
        return 0;
    if (!strcmp(v, "all")) {
        for (int i = 0; i < nknown && i < LAB_MAX_SERVERS; i++)
            out[(*nout)++] = known[i];
        return 0;
    }
    int chosen[LAB_MAX_SERVERS * 4] = {0};
    const char *p = v;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char name[64];
        if (!len || len >= sizeof name) {
            char msg[160];
            snprintf(msg, sizeof msg, "invalid value '%%s' for %s", flag);
            return bad(msg, v);
        }
        memcpy(name, p, len);
        name[len] = 0;
        int k = in_list(known, nknown, name);
        if (k < 0) {
            char msg[300];
            size_t o = (size_t)snprintf(msg, sizeof msg, "unknown name '%%s' in %s (known:", flag);
            for (int i = 0; i < nknown && o < sizeof msg; i++)
                o += (size_t)snprintf(msg + o, sizeof msg - o, " %s", known[i]);
            if (o < sizeof msg)
                snprintf(msg + o, sizeof msg - o, ")");
            return bad(msg, name);
        }
        chosen[k] = 1;
        if (!comma)
            break;
        p = comma + 1;
    }
    for (int i = 0; i < nknown; i++)
        if (chosen[i] && *nout < LAB_MAX_SERVERS)
            out[(*nout)++] = known[i];
    return 0;
}

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

static int conc_list(const char *v, struct lab_config *cfg)
{
    cfg->nconc = 0;
    const char *p = v;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char num[24];
        uint64_t n;
        if (!len || len >= sizeof num)
            return bad("invalid value '%s' for --concurrency", v);
        memcpy(num, p, len);
        num[len] = 0;
        if (flag_count(num, 1, 100000, &n) < 0)
            return bad("invalid value '%s' for --concurrency (each from 1 to 100000)", v);
        if (cfg->nconc == LAB_MAX_CONC)
            return bad("too many levels in --concurrency '%s'", v);
        cfg->conc[cfg->nconc++] = (int)n;
        if (!comma)
            break;
        p = comma + 1;
    }
    qsort(cfg->conc, (size_t)cfg->nconc, sizeof cfg->conc[0], cmp_int);
    int k = 0;
    for (int i = 0; i < cfg->nconc; i++)
        if (!k || cfg->conc[k - 1] != cfg->conc[i])
            cfg->conc[k++] = cfg->conc[i];
    cfg->nconc = k;
    return 0;
}

static int cpu_flag(const char *flag, const char *v, int *out)
{
    uint64_t n;
    char msg[96];
    snprintf(msg, sizeof msg, "invalid value '%%s' for %s", flag);
    if (flag_count(v, 0, CPUS_MAX - 1, &n) < 0)
        return bad(msg, v);
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && !CPU_ISSET((int)n, &set)) {
        snprintf(msg, sizeof msg, "CPU %%s (%s) is not available to this process", flag);
        return bad(msg, v);
    }
    *out = (int)n;
    return 0;
}

/* --port-range A-B: 1 <= A <= B <= 65535. */
static int port_range(const char *v, struct lab_config *cfg)
{
    char *end;
    long lo = strtol(v, &end, 10), hi;
    if (end == v || *end != '-')
        return bad("invalid value '%s' for --port-range (A-B, e.g. 20000-20099)", v);
    const char *h = end + 1;
    hi = strtol(h, &end, 10);
    if (end == h || *end || lo < 1 || hi > 65535 || lo > hi)
        return bad("invalid value '%s' for --port-range (A-B, 1 <= A <= B <= 65535)", v);
    cfg->port_lo = (int)lo;
    cfg->port_hi = (int)hi;
    return 0;
}

static int valid_path(const char *p)
{
    if (p[0] != '/' || strlen(p) > 512)
        return 0;
    for (; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == 0x7f)
            return 0;
    return 1;
}

enum opt { O_MODELS, O_CONC, O_DURATION, O_WARMUP, O_TIMEOUT, O_RETRIES, O_KEEPALIVE,
           O_COMPARE, O_OUT, O_SCPU, O_LCPU, O_PATH, O_PORTS, O_BALANCE, O_PROFILE, O_SCENARIO,
           O_RELOADS, O_RELOAD_EVERY, O_RELOAD_SIGNAL, O_HELP };

static const struct flag_opt opts[] = {
    {"--models", O_MODELS, 1},        {"--concurrency", O_CONC, 1},
    {"--duration", O_DURATION, 1},    {"--warmup", O_WARMUP, 1},
    {"--timeout", O_TIMEOUT, 1},      {"--retries", O_RETRIES, 1},
    {"--keepalive", O_KEEPALIVE, 1},
    {"--compare", O_COMPARE, 1},      {"--out", O_OUT, 1},
    {"--server-cpu", O_SCPU, 1},      {"--load-cpu", O_LCPU, 1},
    {"--path", O_PATH, 1},            {"--port-range", O_PORTS, 1},
    {"--balance-workers", O_BALANCE, 1}, {"--profile", O_PROFILE, 0},
    {"--scenario", O_SCENARIO, 1},    {"--reloads", O_RELOADS, 1},
    {"--reload-every", O_RELOAD_EVERY, 1}, {"--reload-signal", O_RELOAD_SIGNAL, 1},
    {"-h", O_HELP, 0},
    {"--help", O_HELP, 0},
};

/* Which flags the user gave, so the reload scenario's defaults apply only
 * to the others. */
struct given {
    int models, compare, conc, balance;
};

/* The reload scenario's options. Returns 0, or 2 after a message. */
static int reload_flag(int kind, const char *v, struct lab_config *cfg)
{
    uint64_t n;
    switch (kind) {
    case O_SCENARIO:
        if (!strcmp(v, "throughput"))
            cfg->scenario = LAB_THROUGHPUT;
        else if (!strcmp(v, "reload"))
            cfg->scenario = LAB_RELOAD;
        else
            return bad("invalid value '%s' for --scenario (throughput or reload)", v);
        return 0;
    case O_RELOADS:
        if (flag_count(v, 1, LAB_RELOADS_MAX, &n) < 0)
            return bad("invalid value '%s' for --reloads (1 to 50)", v);
        cfg->reloads = (int)n;
        return 0;
    case O_RELOAD_EVERY:
        if (flag_duration_ms(v, &cfg->reload_every_ms) < 0 || cfg->reload_every_ms < 200 ||
            cfg->reload_every_ms > 60000)
            return bad("invalid value '%s' for --reload-every (200ms to 60s)", v);
        return 0;
    default:
        cfg->signals[LAB_SIG_HUP] = !strcmp(v, "hup") || !strcmp(v, "both");
        cfg->signals[LAB_SIG_USR2] = !strcmp(v, "usr2") || !strcmp(v, "both");
        if (!cfg->signals[LAB_SIG_HUP] && !cfg->signals[LAB_SIG_USR2])
            return bad("invalid value '%s' for --reload-signal (hup, usr2 or both)", v);
        return 0;
    }
}

/* The reload scenario's defaults for what the user did not give: the
 * models with a master, nginx, c=20,200, no balance runs, no profile. */
static int reload_defaults(struct lab_config *cfg, const struct given *g)
{
    if (!g->models)
        name_list("--models", "all", lab_herd_reload_models, lab_nherd_reload_models,
                  cfg->models, &cfg->nmodels);
    if (!g->compare)
        name_list("--compare", "nginx", lab_compare_servers, lab_ncompare_servers,
                  cfg->compare, &cfg->ncompare);
    if (!g->conc)
        conc_list("20,200", cfg);
    if (g->balance && cfg->balance_workers)
        return bad("--balance-workers belongs to the throughput scenario%s", "");
    if (cfg->profile)
        return bad("--profile belongs to the throughput scenario%s", "");
    cfg->balance_workers = 0;
    return 0;
}

/* Returns -1 when the flags are fine, else an exit status. */
static int parse(int argc, char **argv, struct lab_config *cfg, int *help, struct given *g)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *v;
        int k = flag_match(opts, sizeof opts / sizeof opts[0], argc, argv, &i, &v);
        if (k == FLAG_UNKNOWN)
            return arg[0] == '-' ? bad("unknown option '%s'", arg)
                                 : bad("unexpected argument '%s'", arg);
        if (k == FLAG_NO_VALUE)
            return bad("%s needs a value", arg);
        int rc = 0;
        switch (opts[k].kind) {
        case O_MODELS:
            g->models = 1;
            rc = name_list("--models", v, lab_herd_models, lab_nherd_models, cfg->models,
                           &cfg->nmodels);
            break;
        case O_COMPARE:
            g->compare = 1;
            rc = name_list("--compare", v, lab_compare_servers, lab_ncompare_servers,
                           cfg->compare, &cfg->ncompare);
            break;
        case O_CONC:
            g->conc = 1;
            rc = conc_list(v, cfg);
            break;
        case O_DURATION:
            if (flag_duration_ms(v, &cfg->duration_ms) < 0 || cfg->duration_ms <= 0 ||
                cfg->duration_ms > 3600000)
                return bad("invalid value '%s' for --duration", v);
            break;
        case O_WARMUP:
            if (flag_duration_ms(v, &cfg->warmup_ms) < 0 || cfg->warmup_ms > 600000)
                return bad("invalid value '%s' for --warmup", v);
            break;
        case O_TIMEOUT:
            if (flag_duration_ms(v, &cfg->timeout_ms) < 0 || cfg->timeout_ms <= 0 ||
                cfg->timeout_ms > 600000)
                return bad("invalid value '%s' for --timeout", v);
            break;
        case O_RETRIES: {
            uint64_t n;
            if (flag_count(v, 0, 10, &n) < 0)
                return bad("invalid value '%s' for --retries (0 to 10)", v);
            cfg->retries = (int)n;
            break;
        }
        case O_KEEPALIVE:
            if (!strcmp(v, "on"))
                cfg->nka = 1, cfg->ka[0] = 1;
            else if (!strcmp(v, "off"))
                cfg->nka = 1, cfg->ka[0] = 0;
            else if (!strcmp(v, "both"))
                cfg->nka = 2, cfg->ka[0] = 1, cfg->ka[1] = 0;
            else
                return bad("invalid value '%s' for --keepalive (on, off or both)", v);
            break;
        case O_OUT:
            if (!*v || strlen(v) > 400)
                return bad("invalid value '%s' for --out", v);
            cfg->out_dir = v;
            break;
        case O_SCPU:
            rc = cpu_flag("--server-cpu", v, &cfg->server_cpu);
            break;
        case O_LCPU:
            rc = cpu_flag("--load-cpu", v, &cfg->load_cpu);
            break;
        case O_PATH:
            if (!valid_path(v))
                return bad("invalid value '%s' for --path (an absolute path, no spaces)", v);
            cfg->path = v;
            break;
        case O_PORTS:
            rc = port_range(v, cfg);
            break;
        case O_BALANCE: {
            uint64_t n;
            if (flag_count(v, 0, LAB_BALANCE_WORKERS_MAX, &n) < 0 || n == 1)
                return bad("invalid value '%s' for --balance-workers (0, or 2 to 16)", v);
            cfg->balance_workers = (int)n;
            g->balance = 1;
            break;
        }
        case O_SCENARIO:
        case O_RELOADS:
        case O_RELOAD_EVERY:
        case O_RELOAD_SIGNAL:
            rc = reload_flag(opts[k].kind, v, cfg);
            break;
        case O_PROFILE:
            cfg->profile = 1;
            break;
        case O_HELP:
            *help = 1;
            break;
        }
        if (rc)
            return rc;
    }
    if (*help)
        return -1;
    if (cfg->server_cpu == cfg->load_cpu) {
        char msg[128];
        snprintf(msg, sizeof msg, "--server-cpu and --load-cpu are both %d: a number measured "
                                  "with both on one core means nothing%%s", cfg->server_cpu);
        return bad(msg, "");
    }
    if (cfg->scenario == LAB_RELOAD && reload_defaults(cfg, g))
        return 2;
    if (!cfg->nmodels && !cfg->ncompare)
        return bad("nothing to run: --models none and --compare none%s", "");
    return -1;
}

int cmd_lab(int argc, char **argv)
{
    struct lab_config cfg;
    memset(&cfg, 0, sizeof cfg);
    int help = 0;
    name_list("--models", "all", lab_herd_models, lab_nherd_models, cfg.models, &cfg.nmodels);
    name_list("--compare", "all", lab_compare_servers, lab_ncompare_servers, cfg.compare,
              &cfg.ncompare);
    conc_list("1,2,5,10,20,50,100,200,500,1000", &cfg);
    cfg.duration_ms = 5000;
    cfg.warmup_ms = 1000;
    cfg.timeout_ms = 2000;
    cfg.retries = 2;
    cfg.nka = 1;
    cfg.ka[0] = 1;
    cfg.server_cpu = 0;
    cfg.load_cpu = 1;
    cfg.path = "/index.html";
    cfg.balance_workers = 4;
    cfg.reloads = 5;
    cfg.reload_every_ms = 2000;
    cfg.signals[LAB_SIG_HUP] = 1;
    cfg.signals[LAB_SIG_USR2] = 1;
    cfg.reload_workers = 2;
    struct given given = {0};
    int rc = parse(argc, argv, &cfg, &help, &given);
    if (rc >= 0)
        return rc;
    if (help) {
        char models[256];
        size_t o = 0;
        models[0] = 0;
        for (int i = 0; i < lab_nherd_models && o < sizeof models; i++)
            o += (size_t)snprintf(models + o, sizeof models - o, "%s%s", i ? "," : "",
                                  lab_herd_models[i]);
        char rmodels[256];
        o = 0;
        rmodels[0] = 0;
        for (int i = 0; i < lab_nherd_reload_models && o < sizeof rmodels; i++)
            o += (size_t)snprintf(rmodels + o, sizeof rmodels - o, "%s%s", i ? "," : "",
                                  lab_herd_reload_models[i]);
        printf(lab_usage, models, 2, 2, rmodels);
        return 0;
    }
    char out[64];
    if (!cfg.out_dir) {
        time_t t = time(NULL);
        struct tm tm;
        localtime_r(&t, &tm);
        strftime(out, sizeof out, "herd-lab-%Y%m%d-%H%M%S", &tm);
        cfg.out_dir = out;
    }
    return lab_run(&cfg);
}

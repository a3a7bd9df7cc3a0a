/* herd load: flags, the run, the report, exit status. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/cpus.h"
#include "bench/hdr.h"
#include "bench/load_run.h"
#include "bench/load_report.h"
#include "cmd/cmd.h"
#include "cmd/flags.h"

static const char load_usage[] =
    "usage: herd load URL [options]\n"
    "       herd load --merge RESULT.json... [--json FILE] [--latency]\n"
    "\n"
    "Sends HTTP/1.1 requests to URL and reports requests/s and latency. Every\n"
    "response is checked; errors are counted by kind. URL is\n"
    "http://HOST[:PORT][/PATH], https://HOST[:PORT][/PATH], or unix:/SOCKET[:/PATH]\n"
    "for a unix-domain socket (the request target starts at the first \":/\";\n"
    "default \"/\"). https: TLS 1.2 or 1.3 with SNI = HOST and ALPN http/1.1; the\n"
    "server's certificate is checked for HOST against the system's CAs or\n"
    "--cacert; a thread reconnecting offers the last resumable TLS session of a\n"
    "connection it closed; a failed handshake is a \"tls\" error.\n"
    "\n"
    "  -c, --connections N   open connections (default 10)\n"
    "  -t, --threads N       threads, each with its own event loop (default 2)\n"
    "  -d, --duration DUR    how long to measure (default 10s, at most 720h)\n"
    "  -H, --header 'N: V'   add a request header; repeatable\n"
    "      --latency         print the latency distribution\n"
    "  -R, --rate R          open loop: R requests/s over all connections, each\n"
    "                        timed from its scheduled send time, so a stalled\n"
    "                        server shows as latency (coordinated omission\n"
    "                        corrected, like wrk2); a thread polls for the last\n"
    "                        100 us before each send, so timer lateness is not\n"
    "                        counted as latency; a warning (stderr, and\n"
    "                        rate_missed in the JSON) when the achieved rate is\n"
    "                        more than 3% below R; default: closed loop\n"
    "      --no-keepalive    a new connection per request (Connection: close);\n"
    "                        latency then includes the connect\n"
    "      --pipeline N      requests in flight per connection (default 1)\n"
    "      --method M        request method (default GET, POST with --body)\n"
    "      --body FILE       send FILE as the request body\n"
    "      --requests FILE   send the requests of FILE in turn, cycling (each\n"
    "                        thread from the first): blocks of 'METHOD /TARGET',\n"
    "                        header lines, an empty line and a body, separated by\n"
    "                        lines '---' (see the README); -H headers are added\n"
    "                        to each unless it sets them; not with --method/--body\n"
    "      --cacert FILE     https: trust the CA certificates of FILE (PEM)\n"
    "                        instead of the system's\n"
    "  -k, --insecure        https: do not verify the server's certificate\n"
    "      --timeout DUR     connect (with TLS handshake) and response timeout\n"
    "                        (default 2s)\n"
    "      --warmup DUR      run this long before measuring (default 0, at most 720h)\n"
    "      --cpus LIST       pin thread i to the i-th CPU of LIST (\"1\", \"0,2-3\")\n"
    "      --json FILE       also write the results as JSON (\"-\": stdout)\n"
    "      --timeline DUR    with --json: add \"timeline\", the measured run in\n"
    "                        slices of DUR (e.g. 100ms): responses, errors by\n"
    "                        kind and latency of each slice (see the README)\n"
    "      --start-file FILE write to FILE, once it is fixed and before the first\n"
    "                        request, the CLOCK_MONOTONIC nanosecond at which the\n"
    "                        measured run starts (the timeline's origin), so a\n"
    "                        harness can time its own events on the same clock\n"
    "      --merge           the arguments are JSON results of runs that ran at\n"
    "                        the same time (several machines): report them as one\n"
    "  -h, --help            this text\n"
    "\n"
    "DUR takes ms, s, m, h (plain numbers are seconds). Ctrl-C ends the run\n"
    "early and reports what was measured. Exit status: 0 when at least one\n"
    "response succeeded (status < 400); 1 when the target cannot be reached or\n"
    "nothing succeeded (then no figures are printed); 2 for bad usage.\n";

enum opt { O_CONNS, O_THREADS, O_DURATION, O_HEADER, O_LATENCY, O_RATE, O_NOKA, O_PIPELINE,
           O_METHOD, O_BODY, O_REQUESTS, O_CACERT, O_INSECURE, O_TIMEOUT, O_WARMUP, O_CPUS, O_JSON, O_TIMELINE, O_START_FILE, O_MERGE, O_HELP };

static const struct flag_opt opts[] = {
    {"-c", O_CONNS, 1},       {"--connections", O_CONNS, 1},
    {"-t", O_THREADS, 1},     {"--threads", O_THREADS, 1},
    {"-d", O_DURATION, 1},    {"--duration", O_DURATION, 1},
    {"-H", O_HEADER, 1},      {"--header", O_HEADER, 1},
    {"--latency", O_LATENCY, 0},
    {"-R", O_RATE, 1},        {"--rate", O_RATE, 1},
    {"--no-keepalive", O_NOKA, 0},
    {"--pipeline", O_PIPELINE, 1},
    {"--method", O_METHOD, 1},
    {"--body", O_BODY, 1},
    {"--requests", O_REQUESTS, 1},
    {"--cacert", O_CACERT, 1},
    {"-k", O_INSECURE, 0},    {"--insecure", O_INSECURE, 0},
    {"--timeout", O_TIMEOUT, 1},
    {"--warmup", O_WARMUP, 1},
    {"--cpus", O_CPUS, 1},
    {"--json", O_JSON, 1},
    {"--timeline", O_TIMELINE, 1},
    {"--start-file", O_START_FILE, 1},
    {"--merge", O_MERGE, 0},
    {"-h", O_HELP, 0},        {"--help", O_HELP, 0},
};

struct load_flags {
    struct load_config cfg;
    const char *url, *body_path, *json_path, *requests_path;
    struct load_script script;
    const char *args[256];
    int nargs;
    int latency, merge, help;
    int cpus[CPUS_MAX];
};

static int usage_error(const char *fmt, const char *a)
{
    return flag_usage_error("load", fmt, a);
}

static int bad_value(const char *opt, const char *v)
{
    return flag_bad_value("load", opt, v);
}

static int valid_header(const char *h)
{
    const char *colon = strchr(h, ':');
    if (!colon || colon == h)
        return 0;
    for (const char *p = h; p < colon; p++)
        if (*p <= ' ' || *p >= 0x7f)
            return 0;
    return !strpbrk(h, "\r\n");
}

static int valid_method(const char *m)
{
    if (!*m)
        return 0;
    for (const char *p = m; *p; p++)
        if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || *p == '-' || *p == '_'))
            return 0;
    return 1;
}

/* Every CPU of the list must be one this process may run on. */
static int check_cpus(const int *cpus, int n)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) < 0)
        return 0;
    for (int i = 0; i < n; i++)
        if (!CPU_ISSET(cpus[i], &set)) {
            fprintf(stderr, "herd load: CPU %d is not available to this process "
                            "(see herd load --help)\n", cpus[i]);
            return 2;
        }
    return 0;
}

/* Returns -1 when the flags are fine, else an exit status. */
static int parse_flags(int argc, char **argv, struct load_flags *f)
{
    struct load_config *cfg = &f->cfg;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (arg[0] != '-' || !strcmp(arg, "-")) {
            if (f->nargs == (int)(sizeof f->args / sizeof f->args[0]))
                return usage_error("too many arguments%s", "");
            f->args[f->nargs++] = arg;
            continue;
        }
        const char *v;
        int k = flag_match(opts, sizeof opts / sizeof opts[0], argc, argv, &i, &v);
        if (k == FLAG_UNKNOWN)
            return usage_error("unknown option '%s'", arg);
        if (k == FLAG_NO_VALUE)
            return usage_error("%s needs a value", arg);
        const char *name = opts[k].name;
        uint64_t n;
        switch (opts[k].kind) {
        case O_CONNS:
            if (flag_count(v, 1, 1000000, &n) < 0)
                return bad_value(name, v);
            cfg->conns = (uint32_t)n;
            break;
        case O_THREADS:
            if (flag_count(v, 1, 1024, &n) < 0)
                return bad_value(name, v);
            cfg->threads = (uint32_t)n;
            break;
        case O_DURATION:
            if (flag_duration_ms(v, &cfg->duration_ms) < 0 || cfg->duration_ms <= 0 ||
                cfg->duration_ms > LOAD_DURATION_MAX_MS)
                return bad_value(name, v);
            break;
        case O_HEADER:
            if (!valid_header(v))
                return usage_error("bad header '%s' (want 'Name: value')", v);
            if (cfg->nheaders == LOAD_MAX_HEADERS)
                return usage_error("too many headers%s", "");
            cfg->headers[cfg->nheaders++] = v;
            break;
        case O_LATENCY:
            f->latency = 1;
            break;
        case O_RATE: {
            char *end;
            errno = 0;
            double r = strtod(v, &end);
            if (errno || end == v || *end || !(r > 0) || r > 1e9)
                return bad_value(name, v);
            cfg->rate = r;
            break;
        }
        case O_NOKA:
            cfg->keepalive = 0;
            break;
        case O_PIPELINE:
            if (flag_count(v, 1, 1024, &n) < 0)
                return bad_value(name, v);
            cfg->pipeline = (uint32_t)n;
            break;
        case O_METHOD:
            if (!valid_method(v))
                return bad_value(name, v);
            cfg->method = v;
            break;
        case O_BODY:
            f->body_path = v;
            break;
        case O_REQUESTS:
            f->requests_path = v;
            break;
        case O_CACERT:
            cfg->cacert = v;
            break;
        case O_INSECURE:
            cfg->insecure = 1;
            break;
        case O_TIMEOUT:
            if (flag_duration_ms(v, &cfg->timeout_ms) < 0 || cfg->timeout_ms <= 0 ||
                cfg->timeout_ms > 3600000)
                return bad_value(name, v);
            break;
        case O_WARMUP:
            if (flag_duration_ms(v, &cfg->warmup_ms) < 0 || cfg->warmup_ms > LOAD_DURATION_MAX_MS)
                return bad_value(name, v);
            break;
        case O_CPUS: {
            int nc = cpus_parse(v, f->cpus, CPUS_MAX);
            if (nc <= 0)
                return bad_value(name, v);
            cfg->cpus = f->cpus;
            cfg->ncpus = nc;
            break;
        }
        case O_JSON:
            f->json_path = v;
            break;
        case O_TIMELINE:
            if (flag_duration_ms(v, &cfg->timeline_ms) < 0 || cfg->timeline_ms < 10 ||
                cfg->timeline_ms > 60000)
                return bad_value(name, v);
            break;
        case O_START_FILE:
            if (!*v)
                return bad_value(name, v);
            cfg->start_file = v;
            break;
        case O_MERGE:
            f->merge = 1;
            break;
        case O_HELP:
            f->help = 1;
            break;
        }
    }
    if (f->help)
        return -1;
    if (f->merge) {
        if (!f->nargs)
            return usage_error("--merge needs the JSON files to merge%s", "");
        return -1;
    }
    if (f->nargs != 1)
        return usage_error(f->nargs ? "one URL only, got '%s' too" : "no URL given%s",
                           f->nargs ? f->args[1] : "");
    f->url = f->args[0];
    if (cfg->conns < cfg->threads)
        return usage_error("fewer connections than threads (-c must be at least -t)%s", "");
    if (f->requests_path && (f->body_path || cfg->method))
        return usage_error("--requests sets each request's method and body (drop %s)",
                           f->body_path ? "--body" : "--method");
    if (!cfg->keepalive && cfg->pipeline > 1)
        return usage_error("--pipeline needs keep-alive (drop --no-keepalive)%s", "");
    if (cfg->timeline_ms && !f->json_path)
        return usage_error("--timeline goes into the JSON: add --json FILE%s", "");
    if (cfg->ncpus && check_cpus(cfg->cpus, cfg->ncpus))
        return 2;
    return -1;
}

static int read_body(const char *path, struct load_config *cfg)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        fprintf(stderr, "herd load: cannot read --body %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, fp);
        if (n < cap || cap >= (64u << 20))
            break;
        char *t = realloc(buf, cap * 2);
        if (!t) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = t;
        cap *= 2;
    }
    int bad = ferror(fp) || !buf || n == cap;
    fclose(fp);
    if (bad) {
        fprintf(stderr, "herd load: cannot read --body %s: %s\n", path,
                buf && n == cap ? "larger than 64 MiB" : "read error");
        free(buf);
        return -1;
    }
    cfg->body = buf;
    cfg->body_len = n;
    return 0;
}

static int merge(struct load_flags *f)
{
    struct load_result r;
    memset(&r, 0, sizeof r);
    r.latency = hdr_new();
    if (!r.latency) {
        fprintf(stderr, "herd load: out of memory\n");
        return 1;
    }
    char err[512];
    int rc = 1;
    for (int i = 0; i < f->nargs; i++)
        if (load_merge_json(f->args[i], &r, err, sizeof err) < 0) {
            fprintf(stderr, "herd load: %s\n", err);
            goto out;
        }
    if (load_failure(&r, err, sizeof err)) {
        fprintf(stderr, "herd load: merged runs: %s\n", err);
        goto out;
    }
    printf("Merged %d results @ %s\n", f->nargs, r.url);
    load_print_text(stdout, &r, f->latency);
    fflush(stdout);
    load_warn_rate(stderr, &r);
    if (f->json_path && load_write_json(f->json_path, &r, err, sizeof err) < 0) {
        fprintf(stderr, "herd load: %s\n", err);
        goto out;
    }
    rc = 0;
out:
    load_result_free(&r);
    return rc;
}

int cmd_load(int argc, char **argv)
{
    struct load_flags *f = calloc(1, sizeof *f);
    if (!f) {
        fprintf(stderr, "herd load: out of memory\n");
        return 1;
    }
    struct load_config *cfg = &f->cfg;
    cfg->conns = 10;
    cfg->threads = 2;
    cfg->pipeline = 1;
    cfg->duration_ms = 10000;
    cfg->timeout_ms = 2000;
    cfg->keepalive = 1;
    int rc = parse_flags(argc, argv, f);
    if (rc >= 0)
        goto out;
    if (f->help) {
        fputs(load_usage, stdout);
        rc = 0;
        goto out;
    }
    if (f->merge) {
        rc = merge(f);
        goto out;
    }
    if (cfg->threads > cfg->conns)
        cfg->threads = cfg->conns;
    char err[512];
    int prc = target_parse_url(f->url, &cfg->target, err, sizeof err);
    if (prc < 0) {
        fprintf(stderr, "herd load: %s%s\n", err, prc == -1 ? " (see herd load --help)" : "");
        rc = prc == -1 ? 2 : 1;
        goto out;
    }
    cfg->url = f->url;
    if ((cfg->cacert || cfg->insecure) && !cfg->target.tls) {
        fprintf(stderr, "herd load: %s is for https:// URLs (see herd load --help)\n",
                cfg->cacert ? "--cacert" : "--insecure");
        rc = 2;
        goto out;
    }
    if (cfg->cacert && cfg->insecure) {
        fprintf(stderr, "herd load: --cacert and --insecure contradict each other\n");
        rc = 2;
        goto out;
    }
    if (f->body_path && read_body(f->body_path, cfg) < 0) {
        rc = 1;
        goto out;
    }
    if (cfg->body && cfg->body_len > (256u << 20) / cfg->pipeline) {
        /* The pipelined copies of the request are kept in memory. */
        fprintf(stderr, "herd load: --body times --pipeline is over 256 MiB of requests\n");
        rc = 2;
        goto out;
    }
    if (f->requests_path) {
        if (load_script_read(f->requests_path, &f->script, err, sizeof err) < 0) {
            fprintf(stderr, "herd load: %s\n", err);
            rc = 1;
            goto out;
        }
        cfg->script = &f->script;
    }
    if (!cfg->method)
        cfg->method = cfg->body ? "POST" : "GET";
    cfg->progress = isatty(STDERR_FILENO);

    char dur[32];
    snprintf(dur, sizeof dur, cfg->duration_ms % 1000 ? "%lldms" : "%llds",
             (long long)(cfg->duration_ms % 1000 ? cfg->duration_ms : cfg->duration_ms / 1000));
    printf("Running %s test @ %s\n  %u thread%s and %u connection%s", dur, f->url, cfg->threads,
           cfg->threads == 1 ? "" : "s", cfg->conns, cfg->conns == 1 ? "" : "s");
    if (cfg->rate > 0)
        printf(", %.0f requests/s", cfg->rate);
    if (!cfg->keepalive)
        printf(", a connection per request");
    if (cfg->pipeline > 1)
        printf(", %u pipelined", cfg->pipeline);
    if (cfg->script)
        printf(", %u request%s from %s in turn", cfg->script->n,
               cfg->script->n == 1 ? "" : "s", f->requests_path);
    if (cfg->warmup_ms)
        printf(", after %lld ms warm-up", (long long)cfg->warmup_ms);
    printf("\n");
    fflush(stdout);

    struct load_result res;
    if (load_run(cfg, &res, err, sizeof err) < 0) {
        fprintf(stderr, "herd load: %s\n", err);
        rc = 1;
        goto out;
    }
    if (load_failure(&res, err, sizeof err)) {
        fprintf(stderr, "herd load: %s\n", err);
        rc = 1;
    } else {
        load_print_text(stdout, &res, f->latency);
        fflush(stdout);
        load_warn_rate(stderr, &res);
        rc = 0;
        if (f->json_path && load_write_json(f->json_path, &res, err, sizeof err) < 0) {
            fprintf(stderr, "herd load: %s\n", err);
            rc = 1;
        }
    }
    load_result_free(&res);
out:
    free((char *)cfg->body);
    load_script_free(&f->script);
    free(f);
    return rc;
}

/* herd lab's accept balance: which worker took the connections. Each
 * multi-process model runs once more with several workers (all on the
 * server's CPU) under connection-per-request load, and the per-worker
 * accepted counts come from its status page: EPOLLEXCLUSIVE (prefork)
 * wakes workers in LIFO order, so one takes most; --accept-herd wakes them
 * all; reuseport hashes connections over the sockets; dispatch deals them
 * out from the master. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/json.h"
#include "bench/lab_internal.h"
#include "bench/lab_proc.h"

static const struct {
    const char *model, *label;
    int accept_herd;
} variants[] = {
    {"prefork", "prefork", 0},
    {"prefork", "prefork --accept-herd", 1},
    {"reuseport", "reuseport", 0},
    {"dispatch", "dispatch", 0},
};
#define NVARIANTS (int)(sizeof variants / sizeof variants[0])

/* Accepted connections of each running worker, by worker index. Returns
 * the number of running workers, or -1 when the page cannot be read. */
static int read_accepted(int port, uint64_t *acc, int max)
{
    static char buf[65536];
    char *body, err[128];
    size_t blen;
    if (lab_http_get(port, "/herd-status", 2000, buf, sizeof buf, &body, &blen) != 200)
        return -1;
    struct json *j = json_parse(body, blen, err, sizeof err);
    if (!j)
        return -1;
    const struct json *slots = json_get(j, "slots");
    int n = 0;
    memset(acc, 0, sizeof *acc * (size_t)max);
    for (const struct json *s = slots ? slots->child : NULL; s; s = s->next) {
        const struct json *st = json_get(s, "state");
        uint64_t w, a;
        if (!st || st->type != JSON_STR || strcmp(st->str, "running") ||
            json_get_u64(s, "worker", &w) < 0 || json_get_u64(s, "accepted", &a) < 0 ||
            w >= (uint64_t)max)
            continue;
        acc[w] = a;
        n++;
    }
    json_free(j);
    return n;
}

static int model_chosen(const struct lab_config *cfg, const char *model)
{
    for (int i = 0; i < cfg->nmodels; i++)
        if (!strcmp(cfg->models[i], model))
            return 1;
    return 0;
}

/* herd load, connection per request, at the lab's highest concurrency. */
static int run_load(const struct lab *lab, int port, const char *log, char *err, size_t errlen)
{
    const struct lab_config *cfg = lab->cfg;
    char url[700], c[16], d[32], t[32], cpu[16];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, cfg->path);
    snprintf(c, sizeof c, "%d", cfg->conc[cfg->nconc - 1] < 64 ? cfg->conc[cfg->nconc - 1] : 64);
    snprintf(d, sizeof d, "%lldms", (long long)cfg->duration_ms);
    snprintf(t, sizeof t, "%lldms", (long long)cfg->timeout_ms);
    snprintf(cpu, sizeof cpu, "%d", cfg->load_cpu);
    char *argv[] = {(char *)lab->man.herd_bin, "load", url, "-c", c, "-t", "1", "-d", d,
                    "--timeout", t, "--cpus", cpu, "--no-keepalive", NULL};
    pid_t pid = lproc_spawn(argv, cfg->load_cpu, log, err, errlen);
    if (pid < 0)
        return -1;
    int status, rc = lproc_wait(pid, cfg->duration_ms + 2 * cfg->timeout_ms + 10000, &status, NULL);
    if (rc != 0) {
        lproc_stop(pid, 2000);
        snprintf(err, errlen, rc == 2 ? "interrupted" : "herd load did not finish; stopped");
        return -1;
    }
    return 0;
}

/* Starts the server and waits until every worker shows on its status page. */
static pid_t start(const struct lab *lab, int v, int port, const char *log, char *err,
                   size_t errlen)
{
    char listen[64], workers[16];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    snprintf(workers, sizeof workers, "%d", lab->cfg->balance_workers);
    char *argv[] = {(char *)lab->man.herd_bin, "serve", (char *)lab->docroot, "--model",
                    (char *)variants[v].model, "--workers", workers, "--status-path",
                    "/herd-status", "--listen", listen,
                    variants[v].accept_herd ? "--accept-herd" : NULL, NULL};
    pid_t pid = lproc_spawn(argv, lab->cfg->server_cpu, log, err, errlen);
    if (pid < 0)
        return -1;
    uint64_t acc[LAB_BALANCE_MAX];
    for (int waited = 0; waited < 10000; waited += 50) {
        int status;
        if (lproc_exited(pid, &status)) {
            snprintf(err, errlen, "the server exited at start (see its server.log)");
            return -1;
        }
        if (read_accepted(port, acc, LAB_BALANCE_MAX) == lab->cfg->balance_workers)
            return pid;
        if (lproc_sleep_ms(50))
            break;
    }
    snprintf(err, errlen, "%d workers did not show on the status page", lab->cfg->balance_workers);
    lproc_stop(pid, 2000);
    return -1;
}

static void run_variant(struct lab *lab, int v, struct lab_balance *b)
{
    const struct lab_config *cfg = lab->cfg;
    char dir[900], log[1000], loadlog[1000];
    snprintf(b->label, sizeof b->label, "%s", variants[v].label);
    b->workers = cfg->balance_workers;
    snprintf(dir, sizeof dir, "%s/servers/balance-%s%s", cfg->out_dir, variants[v].model,
             variants[v].accept_herd ? "-accept-herd" : "");
    int rc = lab_mkdir_p(dir);
    if (rc < 0) {
        snprintf(b->reason, sizeof b->reason, "cannot create %.200s: %s", dir, strerror(-rc));
        return;
    }
    snprintf(log, sizeof log, "%s/server.log", dir);
    snprintf(loadlog, sizeof loadlog, "%s/load.log", dir);
    int port = lab_pick_port(cfg->port_lo, cfg->port_hi);
    if (port < 0) {
        snprintf(b->reason, sizeof b->reason, "no free port on 127.0.0.1");
        return;
    }
    pid_t pid = start(lab, v, port, log, b->reason, sizeof b->reason);
    if (pid < 0)
        return;
    uint64_t before[LAB_BALANCE_MAX], after[LAB_BALANCE_MAX];
    if (read_accepted(port, before, LAB_BALANCE_MAX) != b->workers)
        snprintf(b->reason, sizeof b->reason, "status page unreadable before the run");
    else if (run_load(lab, port, loadlog, b->reason, sizeof b->reason) == 0) {
        if (read_accepted(port, after, LAB_BALANCE_MAX) != b->workers) {
            snprintf(b->reason, sizeof b->reason, "a worker was gone after the run");
        } else {
            for (int w = 0; w < b->workers; w++)
                b->accepted[w] = after[w] - before[w];
            b->ok = 1;
        }
    }
    lproc_stop(pid, 5000);
}

int lab_balance_count(const struct lab_config *cfg)
{
    int n = 0;
    for (int v = 0; v < NVARIANTS && cfg->balance_workers > 1; v++)
        n += model_chosen(cfg, variants[v].model);
    return n;
}

void lab_balance_run(struct lab *lab)
{
    const struct lab_config *cfg = lab->cfg;
    if (cfg->balance_workers < 2)
        return;
    for (int v = 0; v < NVARIANTS && !lproc_stop_requested(); v++) {
        if (!model_chosen(cfg, variants[v].model))
            continue;
        struct lab_balance *b = &lab->balance[lab->nbalance++];
        run_variant(lab, v, b);
        uint64_t total = 0, most = 0;
        for (int w = 0; w < b->workers; w++) {
            total += b->accepted[w];
            most = b->accepted[w] > most ? b->accepted[w] : most;
        }
        if (b->ok)
            fprintf(stderr, "lab: balance %-22s %d workers: %llu connections, the busiest "
                            "took %.0f%%\n", b->label, b->workers, (unsigned long long)total,
                    total ? 100.0 * (double)most / (double)total : 0);
        else
            fprintf(stderr, "lab: balance %s: failed: %s\n", b->label, b->reason);
    }
}

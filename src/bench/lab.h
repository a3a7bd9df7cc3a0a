/* herd lab: runs herd serve in each concurrency model (and nginx, h2o,
 * lighttpd when installed) under herd load at each concurrency level, with
 * server and load pinned to separate CPUs, and writes a lab notebook:
 * report.md, report.json, reqs.svg and p99.svg in one directory. */
#ifndef HERD_BENCH_LAB_H
#define HERD_BENCH_LAB_H

#include <stdint.h>

#define LAB_MAX_SERVERS 32
#define LAB_MAX_CONC 64
#define LAB_BALANCE_WORKERS_MAX 16
#define LAB_RELOADS_MAX 50

enum lab_scenario { LAB_THROUGHPUT, LAB_RELOAD };
enum lab_signal { LAB_SIG_HUP, LAB_SIG_USR2, LAB_NSIG };
extern const char *const lab_signal_names[LAB_NSIG];   /* "hup", "usr2" */

struct lab_config {
    const char *models[LAB_MAX_SERVERS];   /* herd models, report order */
    int nmodels;
    const char *compare[LAB_MAX_SERVERS];  /* other servers: "nginx", ... */
    int ncompare;
    int conc[LAB_MAX_CONC];                /* connections, ascending */
    int nconc;
    int ka[2];                             /* keep-alive modes in order: 1 on, 0 off */
    int nka;
    int64_t duration_ms, warmup_ms, timeout_ms;
    int retries;                           /* more runs when other work disturbed one */
    int server_cpu, load_cpu;
    const char *out_dir;
    const char *path;                      /* request target, e.g. /index.html */
    int port_lo, port_hi;                  /* servers' ports; 0: any free port */
    int balance_workers;                   /* accept-balance runs' workers; < 2: none */
    int profile;                           /* perf record each herd model: flame graphs */
    enum lab_scenario scenario;
    int reloads;                           /* reload scenario: signals per run */
    int64_t reload_every_ms;               /* between signals; a run lasts (reloads + 1) x this */
    int signals[LAB_NSIG];                 /* which signals to run (1: yes) */
    int reload_workers;                    /* herd --workers and nginx worker_processes */
};

/* herd's concurrency models, in report order: "all" means these. This
 * list is the one place the lab learns about a new model. */
extern const char *const lab_herd_models[];
extern const int lab_nherd_models;

/* The models that reload and upgrade (the reload scenario's "all"). */
extern const char *const lab_herd_reload_models[];
extern const int lab_nherd_reload_models;

/* The other servers the lab knows how to configure. */
extern const char *const lab_compare_servers[];
extern const int lab_ncompare_servers;

/* The least time (ms) the lab takes for nservers servers on quiet cores:
 * every run's warm-up, measurement and pause, plus each server's start
 * and stop. Waiting for busy cores and repeating disturbed runs add to it. */
int64_t lab_estimate_ms(const struct lab_config *cfg, int nservers);

/* Runs the lab and writes the report. Progress goes to stderr. Returns
 * the exit status: 0 when the report is written and at least one run
 * succeeded, 1 when none did or the report cannot be written, 130 when a
 * signal stopped it (the report then holds what was measured). */
int lab_run(const struct lab_config *cfg);

#endif

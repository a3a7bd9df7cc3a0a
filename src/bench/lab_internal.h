/* What the lab files share: the measurements of one lab, the servers and
 * the report writers. Not for use outside src/bench/lab*.c. */
#ifndef HERD_BENCH_LAB_INTERNAL_H
#define HERD_BENCH_LAB_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "bench/lab.h"
#include "bench/load_run.h"

enum lab_lat { LAT_P50, LAT_P90, LAT_P99, LAT_P999, LAT_MAX, LAT_MEAN, LAT_N };
extern const char *const lab_lat_keys[LAT_N];   /* "p50", ..., the keys of herd load's JSON */

/* One run: one server, one keep-alive mode, one concurrency. */
struct lab_point {
    int done;                 /* measured, successfully or not */
    int ok;                   /* figures below are valid */
    char reason[256];         /* why it failed */
    uint64_t requests, connects, errors[LOAD_NERR], errors_total;
    double duration_s, rps;
    double lat_us[LAT_N];
    double wall_s;            /* the sampling window around herd load */
    double user_s, sys_s;     /* server CPU over the window, whole process tree */
    uint64_t vcsw, ivcsw;     /* server context switches, every thread */
    int nproc, nthreads;      /* server processes and threads seen */
    uint64_t overflows, drops; /* TcpExt ListenOverflows / ListenDrops, machine-wide */
    int64_t empty_wakeups;    /* herd only (scoreboard); -1: not herd or unreadable */
    int64_t srv_requests;     /* requests the server counted; -1: unknown */
    double load_user_s, load_sys_s;
    double foreign_pct;       /* CPU that neither server nor load used on their cores, % */
    int attempts;             /* runs made for this point (disturbed ones are repeated) */
    char raw[256];            /* herd load's JSON, relative to the out dir */
};

/* The reload scenario (lab_reload.c): one run is one server, one signal,
 * one concurrency; herd load runs (reloads + 1) x reload_every while the
 * lab signals the server's master at each multiple of reload_every. */
#define LAB_RELOAD_WINDOW_MS 500   /* "around a reload": this far either side */

struct lab_reload_mark {
    double t_s;               /* when the signal went, from the start of measuring */
    uint64_t errors;          /* errors from t_s - window to the next mark's t_s - window */
    double p99_us;            /* p99 of the responses within the window around t_s; NAN: none */
    int old_gone;             /* 1: the old generation had gone by the next signal (or the end) */
    int procs_left;           /* processes of the server then (master, workers, logger ...) */
    pid_t master;             /* the master signalled */
    int64_t sent_ns;          /* CLOCK_MONOTONIC when it was */
};

struct lab_reload_run {
    struct lab_point p;       /* the whole run, as in the other scenario (no server counters) */
    int nmarks;
    struct lab_reload_mark marks[LAB_RELOADS_MAX];
    uint64_t errors_before;   /* errors before the first mark's window */
    double p99_near_us, p99_away_us;  /* within the windows around the marks, and elsewhere */
    int nslices;
    double slice_s;
    double *rps;              /* req/s in each slice of herd load's timeline */
    char note[200];           /* what went unexpectedly (an old generation that stayed) */
};

enum lab_srv_state { SRV_PENDING, SRV_OK, SRV_NOT_INSTALLED, SRV_FAILED, SRV_SKIPPED };

struct lab_server {
    char label[48];           /* "herd/reuseport", "nginx" */
    const char *kind;         /* "herd", "nginx", "h2o", "lighttpd" */
    const char *model;        /* herd's model, else NULL */
    enum lab_srv_state state;
    char reason[320];
    char bin[512];
    char version[160];
    char command[1024];       /* the command line, for the report */
    char config[256];         /* its config file, relative to the out dir; "" for herd */
    int port;
    int workers_as_root;      /* the docroot is private: nginx and h2o workers stay root */
    pid_t pids[16];           /* the process tree as first seen */
    int npids;
    struct lab_point *points; /* [ka index * nconc + concurrency index] */
    char flame[300];          /* --profile: its flame graph's file, or why there is none */
    int workers;              /* herd --workers, nginx worker_processes; 0: 1 */
    char pid_file[300];       /* herd --pid-file (follows the master across USR2); "": none */
    struct lab_reload_run *reload; /* [signal * nconc + concurrency index], reload scenario */
};

struct lab_manifest {
    char cpu_model[160];
    int cpus_online;
    char affinity[64];
    char kernel[300];
    char hostname[128];
    char started[40], finished[40];
    char loadavg[64];
    char governor[64];
    char herd_version[32];
    char herd_bin[512];
    struct { const char *name; char value[96]; } sysctl[12];
    int nsysctl;
    long nofile_soft, nofile_hard;
};

/* One accept-balance run (lab_balance.c). */
#define LAB_BALANCE_MAX 16
struct lab_balance {
    char label[48];           /* "prefork --accept-herd" */
    int ok;
    char reason[256];
    int workers;
    uint64_t accepted[LAB_BALANCE_MAX]; /* by worker index, during the run */
};

struct lab {
    const struct lab_config *cfg;
    struct lab_manifest man;
    struct lab_server servers[LAB_MAX_SERVERS * 2];
    int nservers;
    char notes[8][320];
    int nnotes;
    int interrupted;
    char docroot[600];
    int body_bytes;           /* size of the file at cfg->path, -1 if not ours */
    int docroot_private;      /* run as root, and others cannot reach the docroot */
    struct lab_balance balance[4];
    int nbalance;
};

/* Little's law for a closed-loop run: requests in flight = req/s x mean
 * latency, which should come out at the connection count (each connection
 * always has one request out). Returns that over the connections; a run
 * past LAB_LITTLE_FLAG either way measured something other than it meant
 * (a client that could not keep its connections busy, time lost outside
 * the latency it timed). */
#define LAB_LITTLE_FLAG 0.10
static inline double lab_little_ratio(const struct lab_point *p, int conc)
{
    return conc > 0 ? p->rps * p->lat_us[LAT_MEAN] / 1e6 / conc : 0;
}

static inline struct lab_point *lab_point(const struct lab *lab, const struct lab_server *s,
                                          int ka_index, int conc_index)
{
    return &s->points[ka_index * lab->cfg->nconc + conc_index];
}

/* lab_servers.c: binaries, configs and command lines. */

/* Finds the binary of a compare server: $NGINX_BIN etc., else PATH and the
 * sbin directories. Returns 0 with the path, or -1. */
int lab_server_find(const char *kind, char *path, size_t n);

/* Writes the config files under dir (for the compare servers) and fills
 * argv (pointers into store) with the command line serving docroot on
 * 127.0.0.1:port. Returns argc, or -1 with a reason in err. */
int lab_server_command(struct lab_server *s, const char *herd_bin, const char *docroot,
                       const char *dir, int port, long nofile, char *store, size_t storelen,
                       char **argv, int maxargs, char *err, size_t errlen);

/* The version line of a compare server (its -v output), "" if unknown. */
void lab_server_version(struct lab_server *s, const char *dir, int cpu);

/* lab.c: what the reload scenario shares with the default one. */

/* Starts s (its files in dir) and waits until it answers. Returns 0 when it
 * is ready (*pid set), 1 when it started but failed (*pid set, s->reason
 * says why; stop it), -1 when it could not start (s->reason). */
int lab_start_server(struct lab *lab, struct lab_server *s, const char *dir, pid_t *pid);
/* Starts herd load against s (extra: more arguments, NULL-terminated, or
 * NULL) pinned to the load CPU. Its pid, or -1 with err. */
pid_t lab_spawn_load(const struct lab *lab, const struct lab_server *s, int ka, int conc,
                     int64_t dur_ms, const char *json, const char *log,
                     const char *const *extra, char *err, size_t errlen);
/* herd load's JSON file, parsed (json_free it), or NULL with err. */
struct json;
struct json *lab_load_json(const char *path, char *err, size_t errlen);
/* The run's figures from herd load's JSON into p. 0, or -1 when some lack. */
int lab_point_from_json(const struct json *j, struct lab_point *p);
int lab_wait_quiet(const struct lab *lab);  /* 1: a stop signal came */
void lab_slug(char *out, size_t n, const char *label);        /* "herd/x" -> "herd-x" */
void lab_last_line(const char *path, char *out, size_t n);    /* a log's last line, printable */
void lab_describe_exit(int status, char *out, size_t n);      /* "exit status 1" */
int lab_write_reports(struct lab *lab);

/* lab_reload.c: the reload scenario's runs; which servers support it. */
int lab_reload_supported(const char *kind, const char *model, int sig);
void lab_reload_run_all(struct lab *lab);
void lab_reload_free(struct lab *lab);
/* lab_reload_report.c: its sections of report.md and report.json, and
 * reload-cN-SIG.svg per (concurrency, signal). */
void lab_reload_md(FILE *f, const struct lab *lab);
void lab_reload_json(FILE *f, const struct lab *lab);
int lab_reload_svgs(const struct lab *lab);

/* lab_docroot.c */

/* mkdir -p: 0 or -errno. */
int lab_mkdir_p(const char *path);

/* Fills lab->docroot: a 64-byte index.html (the anchors' file), 4k.bin,
 * 1m.bin; sets lab->body_bytes from cfg->path. 0, or -1 with a reason. */
int lab_make_docroot(struct lab *lab, char *err, size_t errlen);

/* Run as root: notes when the docroot is not reachable by other users. */
void lab_check_docroot_reach(struct lab *lab);

/* lab_http.c: one-shot GETs to 127.0.0.1, for checks, not for load. */

/* One GET over a fresh connection, Connection: close. Returns the status
 * code (body and its length in *body, *blen, inside buf), or -errno. */
int lab_http_get(int port, const char *path, int timeout_ms, char *buf, size_t cap,
                 char **body, size_t *blen);

/* herd's /herd-status: empty accept wakeups, requests and (if master is
 * not NULL) the master's pid. 0, or -1 when it could not be read. */
int lab_herd_status(int port, int64_t *wakeups, int64_t *requests, int64_t *master);

/* A port nobody listens on right now, or -1. With lo > 0, one in lo..hi,
 * taken in turn so successive servers get different ports. */
int lab_pick_port(int lo, int hi);

/* lab_balance.c: the multi-worker runs (none when balance_workers < 2),
 * how many the config asks for, and their chart. */
void lab_balance_run(struct lab *lab);
int lab_balance_count(const struct lab_config *cfg);
int lab_write_balance_svg(const struct lab *lab, const char *path);

/* lab.c: herd load against s for dur_ms (ka: keep-alive), its JSON to json
 * (may be NULL), its output to log. Returns 0, 1 (failed, err says why) or
 * 2 (interrupted). */
struct rusage;
int lab_run_load(const struct lab *lab, const struct lab_server *s, int ka, int conc,
                 int64_t dur_ms, const char *json, const char *log, int *status,
                 struct rusage *ru, char *err, size_t errlen);

/* lab_profile.c: --profile, one more run of herd server s (pid, its files
 * in dir) under perf record; fills s->flame. */
void lab_profile(struct lab *lab, struct lab_server *s, pid_t pid, const char *dir);

/* lab_report.c */
void lab_manifest_fill(struct lab_manifest *m, const char *herd_bin);
int lab_write_md(const struct lab *lab, const char *path);
int lab_write_json(const struct lab *lab, const char *path);
/* The summary table of report.md as text lines on f (not for reload). */
void lab_print_summary(const struct lab *lab, FILE *f);

/* lab_svgkit.c: what the charts share. A colour per series index; a
 * round step giving about n ticks up to max; a label escaped for XML;
 * f closed and renamed from tmp to path only when all of it was written
 * (-1 otherwise, tmp removed). */
const char *lab_svg_color(int i);
double lab_svg_step(double max, int n);
void lab_svg_esc(FILE *f, const char *s);
int lab_file_commit(FILE *f, const char *tmp, const char *path);

/* lab_svg.c: req/s (linear), p99 in us (log scale), errors as % of the
 * requests tried and server CPU us per request (both linear). */
enum lab_chart { CHART_RPS, CHART_P99, CHART_ERRORS, CHART_CPU, CHART_N };
int lab_write_svg(const struct lab *lab, enum lab_chart which, const char *path);

/* Formats for tables and charts. */
void lab_fmt_num(char *buf, size_t n, double v);    /* 123,456 */
void lab_fmt_us(char *buf, size_t n, double us);    /* 45 us, 1.2 ms, 2.00 s */

#endif

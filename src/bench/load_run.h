/* herd load, the public API (implemented in load_run.c; one connection's
 * work is in load_conn.c, their private parts in load_internal.h): an
 * HTTP/1.1 load generator. Threads each run their own epoll loop over
 * their share of the connections, in closed loop (a connection sends its
 * next request when the last response is in) or open loop at a fixed rate
 * with latency measured from each request's due time. Every response is
 * checked; errors are counted by kind; latency goes into one HDR histogram
 * per thread, merged at the end. */
#ifndef HERD_BENCH_LOAD_RUN_H
#define HERD_BENCH_LOAD_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "bench/load_script.h"
#include "bench/target.h"

enum load_err {
    LERR_CONNECT,       /* connect failed or timed out */
    LERR_READ,          /* reading failed, or the server closed before a response was complete */
    LERR_WRITE,         /* sending a request failed */
    LERR_TIMEOUT,       /* no complete response within --timeout */
    LERR_BAD_RESPONSE,  /* not HTTP/1.x, bad framing, or bytes nobody asked for */
    LERR_STATUS,        /* a complete response with status >= 400 */
    /* the server closed (FIN or RST) a keep-alive connection that had
     * answered before, without a byte of the response to a request sent on
     * it: the reload race of issue 13. herd load never resends it. */
    LERR_CLOSED_REUSED,
    LERR_TLS,           /* https: the TLS handshake failed (certificate, protocol) or a TLS error later */
    LOAD_NERR
};

/* JSON keys and report words: "connect", "read", ..., "bad_response", "status",
 * "closed_reused", "tls". */
extern const char *const load_err_names[LOAD_NERR];

#define LOAD_MAX_HEADERS 64
/* -d and --warmup: 30 days each, so their sum in ns stays far inside int64 */
#define LOAD_DURATION_MAX_MS (30LL * 24 * 3600 * 1000)

struct load_config {
    struct target target;
    const char *url;
    uint32_t threads, conns, pipeline;
    int64_t duration_ms, warmup_ms, timeout_ms;
    double rate;              /* requests/s over all connections; 0 = closed loop */
    int keepalive;
    const char *cacert;       /* https: verify the server against this CA file; NULL: the system's */
    int insecure;             /* https: no certificate verification */
    const char *method;       /* GET, or POST with a body */
    const char *headers[LOAD_MAX_HEADERS]; /* "Name: value" */
    int nheaders;
    const char *body;
    size_t body_len;
    const struct load_script *script; /* --requests: sent in turn instead; NULL: none */
    const int *cpus;          /* thread i runs on cpus[i % ncpus] */
    int ncpus;
    int progress;             /* one line on stderr per second */
    int64_t timeline_ms;      /* --timeline: slice width; 0 = no timeline */
    const char *start_file;   /* --start-file: where the measured run's start goes; NULL: none */
};

struct hdr;
struct load_timeline;

struct load_result {
    char url[512];
    uint32_t threads, conns, runs;  /* runs: how many results were merged (1 for a run) */
    double rate;                    /* the --rate asked for; 0 for closed loop */
    int keepalive;
    double duration_s;
    uint64_t requests;              /* complete responses of any status */
    uint64_t bytes;                 /* bytes received */
    uint64_t connects;              /* connections established */
    uint64_t tls_resumed;           /* https: of those, how many resumed a TLS session */
    double requests_per_sec, bytes_per_sec; /* summed when merging concurrent runs */
    uint64_t errors[LOAD_NERR];
    char why[LOAD_NERR][160];       /* the first error of each kind, in words */
    struct hdr *latency;            /* ns; from send (or due time) to the response's last byte */
    int interrupted;                /* a signal ended the run early */
    /* Per-thread requests/s, sampled every 100 ms as wrk does: mean,
     * stdev, max and the share of samples within one stdev of the mean
     * (percent). nsamples 0: unknown (merged runs). */
    struct load_thread_rps {
        double mean, stdev, max, within_pct;
        uint64_t nsamples;
    } thread_rps;
    struct load_timeline *timeline; /* --timeline, else NULL; freed by load_result_free */
};

/* The share (percent) by which the achieved rate fell short of --rate, or
 * 0 for closed loop or a rate met. */
double load_rate_shortfall(const struct load_result *r);

/* herd load warns when the rate fell short by more than this (percent). */
#define LOAD_RATE_TOLERANCE_PCT 3.0

/* Runs the load. Returns 0 with res filled (res->latency allocated; free
 * with load_result_free), or -1 with a one-line reason in err when the run
 * could not start: the target is unreachable, or memory or file
 * descriptors ran out. Zero successful responses is a result, not -1:
 * see load_failure. */
int load_run(const struct load_config *cfg, struct load_result *res, char *err, size_t errlen);

void load_result_free(struct load_result *res);

#endif

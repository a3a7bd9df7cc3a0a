#include "bench/load_report.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bench/hdr.h"
#include "bench/json.h"
#include "bench/load_timeline.h"
#include "core/printable.h"
#include "core/readfile.h"

static const struct {
    const char *label, *key;
    double pct;
} pcts[] = {
    {"50", "p50", 50.0},     {"75", "p75", 75.0},       {"90", "p90", 90.0},
    {"99", "p99", 99.0},     {"99.9", "p999", 99.9},    {"99.99", "p9999", 99.99},
};

static const char *const err_words[LOAD_NERR] = {
    "connect", "read", "write", "timeout", "bad response", "status >= 400",
    "closed before the response on a reused connection", "tls",
};

int load_failure(const struct load_result *r, char *msg, size_t n)
{
    uint64_t ok = r->requests - r->errors[LERR_STATUS];
    if (ok > 0)
        return 0;
    if (r->requests) {
        snprintf(msg, n, "no successful response: all %llu responses had status >= 400 (%s)",
                 (unsigned long long)r->requests, r->why[LERR_STATUS]);
        return 1;
    }
    size_t len = (size_t)snprintf(msg, n, "no response completed");
    int any = 0;
    for (int k = 0; k < LOAD_NERR && len < n; k++) {
        if (!r->errors[k])
            continue;
        len += (size_t)snprintf(msg + len, n - len, "%s %llu %s error%s (%s)", any ? "," : ":",
                                (unsigned long long)r->errors[k], err_words[k],
                                r->errors[k] == 1 ? "" : "s", r->why[k]);
        any = 1;
    }
    if (!any && len < n)
        snprintf(msg + len, n - len, r->interrupted ? " before the run was interrupted"
                                                    : " within the run (is --duration too short?)");
    return 1;
}

/* Nanoseconds as wrk shows them: 385.21us, 1.23ms, 2.00s. */
static const char *fmt_time(double ns, char *buf, size_t n)
{
    double us = ns / 1000.0;
    if (us < 1000.0)
        snprintf(buf, n, "%.2fus", us);
    else if (us < 1000000.0)
        snprintf(buf, n, "%.2fms", us / 1000.0);
    else
        snprintf(buf, n, "%.2fs", us / 1000000.0);
    return buf;
}

static const char *fmt_bytes(double b, char *buf, size_t n)
{
    static const char *const units[] = {"B", "KB", "MB", "GB", "TB"};
    int u = 0;
    while (b >= 1024.0 && u < 4) {
        b /= 1024.0;
        u++;
    }
    snprintf(buf, n, "%.2f%s", b, units[u]);
    return buf;
}

/* Requests/s as wrk shows them: 950.00, 56.20k, 1.20M. */
static const char *fmt_count(double v, char *buf, size_t n)
{
    if (v < 1000.0)
        snprintf(buf, n, "%.2f", v);
    else if (v < 1e6)
        snprintf(buf, n, "%.2fk", v / 1e3);
    else
        snprintf(buf, n, "%.2fM", v / 1e6);
    return buf;
}

/* wrk's Req/Sec row: one thread's requests/s, sampled every 100 ms. */
static void print_thread_rps(FILE *f, const struct load_thread_rps *q)
{
    char a[32], b[32], c[32];
    if (!q->nsamples)
        return;
    fprintf(f, "  Req/Sec    %10s %10s %10s %10s %10s\n", "Avg", "Stdev", "Max", "+/- Stdev",
            "(per thread)");
    fprintf(f, "            %10s %10s %10s %9.2f%%\n", fmt_count(q->mean, a, sizeof a),
            fmt_count(q->stdev, b, sizeof b), fmt_count(q->max, c, sizeof c), q->within_pct);
}

void load_print_text(FILE *f, const struct load_result *r, int distribution)
{
    char a[32], b[32], c[32];
    const struct hdr *h = r->latency;
    if (r->runs > 1)
        fprintf(f, "  %u runs merged: %u threads and %u connections in all\n", r->runs,
                r->threads, r->conns);
    fprintf(f, "  Latency%s   %10s %10s %10s %10s\n", r->rate > 0 ? "*" : " ", "Avg", "Stdev",
            "p99", "Max");
    fprintf(f, "            %10s %10s %10s", fmt_time(hdr_mean(h), a, sizeof a),
            fmt_time(hdr_stdev(h), b, sizeof b),
            fmt_time((double)hdr_percentile(h, 99.0), c, sizeof c));
    fprintf(f, " %10s\n", fmt_time((double)hdr_max(h), a, sizeof a));
    print_thread_rps(f, &r->thread_rps);
    if (distribution) {
        fprintf(f, "  Latency Distribution (HDR, %llu samples)\n", (unsigned long long)hdr_count(h));
        for (size_t i = 0; i < sizeof pcts / sizeof pcts[0]; i++)
            fprintf(f, "  %7s%%  %10s\n", pcts[i].label,
                    fmt_time((double)hdr_percentile(h, pcts[i].pct), a, sizeof a));
        fprintf(f, "  %7s%%  %10s\n", "100", fmt_time((double)hdr_max(h), a, sizeof a));
    }
    if (r->rate > 0)
        fprintf(f, "  * from each request's scheduled send time at %.0f requests/s "
                   "(coordinated omission corrected)\n", r->rate);
    fprintf(f, "  %llu requests in %.2fs, %s read", (unsigned long long)r->requests,
            r->duration_s, fmt_bytes((double)r->bytes, a, sizeof a));
    if (!r->keepalive || r->connects > r->conns)
        fprintf(f, ", %llu connections", (unsigned long long)r->connects);
    if (r->tls_resumed)
        fprintf(f, ", %llu TLS sessions resumed", (unsigned long long)r->tls_resumed);
    fputc('\n', f);
    uint64_t errs = 0;
    for (int k = 0; k < LOAD_NERR; k++)
        errs += r->errors[k];
    if (errs) {
        fprintf(f, "  Errors:");
        for (int k = 0; k < LOAD_NERR; k++)
            fprintf(f, "%s %s %llu", k ? "," : "", err_words[k], (unsigned long long)r->errors[k]);
        fputc('\n', f);
        for (int k = 0; k < LOAD_NERR; k++)
            if (r->errors[k] && r->why[k][0])
                fprintf(f, "    first %s error: %s\n", err_words[k], r->why[k]);
    }
    if (r->interrupted)
        fprintf(f, "  (interrupted: figures cover the time it ran)\n");
    fprintf(f, "Requests/sec: %10.2f\n", r->requests_per_sec);
    fprintf(f, "Transfer/sec: %10s\n", fmt_bytes(r->bytes_per_sec, a, sizeof a));
}

void load_warn_rate(FILE *f, const struct load_result *r)
{
    double short_pct = load_rate_shortfall(r);
    if (short_pct > LOAD_RATE_TOLERANCE_PCT)
        fprintf(f, "herd load: warning: the rate was missed: %.2f requests/s of the %.0f asked "
                   "for (%.1f%% short); latency is measured from the schedule, so it grows; "
                   "more connections (-c) or threads (-t) may reach it\n",
                r->requests_per_sec, r->rate, short_pct);
}

int load_write_json(const char *path, const struct load_result *r, char *err, size_t errlen)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "w") : stdout;
    if (!f) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    const struct hdr *h = r->latency;
    fputs("{\n  \"url\": ", f);
    json_write_str(f, r->url);
    fprintf(f, ",\n  \"runs\": %u,\n  \"threads\": %u,\n  \"connections\": %u,\n"
               "  \"keepalive\": %s,\n  \"rate\": %.17g,\n"
               "  \"duration_s\": %.6f,\n  \"requests\": %llu,\n  \"requests_per_sec\": %.2f,\n"
               "  \"transfer_bytes\": %llu,\n  \"transfer_bytes_per_sec\": %.2f,\n"
               "  \"connects\": %llu,\n  \"tls_resumed\": %llu,\n  \"interrupted\": %s,\n"
               "  \"rate_missed\": %s,\n  \"rate_shortfall_pct\": %.2f,\n"
               "  \"thread_req_per_sec\": {\"mean\": %.2f, \"stdev\": %.2f, \"max\": %.2f, "
               "\"within_stdev_pct\": %.2f, \"samples\": %llu},\n  \"latency_us\": {",
            r->runs, r->threads, r->conns, r->keepalive ? "true" : "false", r->rate,
            r->duration_s, (unsigned long long)r->requests, r->requests_per_sec,
            (unsigned long long)r->bytes, r->bytes_per_sec, (unsigned long long)r->connects,
            (unsigned long long)r->tls_resumed, r->interrupted ? "true" : "false",
            load_rate_shortfall(r) > LOAD_RATE_TOLERANCE_PCT ? "true" : "false",
            load_rate_shortfall(r), r->thread_rps.mean, r->thread_rps.stdev, r->thread_rps.max,
            r->thread_rps.within_pct, (unsigned long long)r->thread_rps.nsamples);
    for (size_t i = 0; i < sizeof pcts / sizeof pcts[0]; i++)
        fprintf(f, "\"%s\": %.3f, ", pcts[i].key, (double)hdr_percentile(h, pcts[i].pct) / 1000.0);
    fprintf(f, "\"min\": %.3f, \"max\": %.3f, \"mean\": %.3f, \"stdev\": %.3f},\n  \"errors\": {",
            (double)hdr_min(h) / 1000.0, (double)hdr_max(h) / 1000.0, hdr_mean(h) / 1000.0,
            hdr_stdev(h) / 1000.0);
    for (int k = 0; k < LOAD_NERR; k++)
        fprintf(f, "%s\"%s\": %llu", k ? ", " : "", load_err_names[k],
                (unsigned long long)r->errors[k]);
    fputs("},\n  \"first_errors\": {", f);
    int any = 0;
    for (int k = 0; k < LOAD_NERR; k++) {
        if (!r->why[k][0])
            continue;
        fprintf(f, "%s\"%s\": ", any ? ", " : "", load_err_names[k]);
        json_write_str(f, r->why[k]);
        any = 1;
    }
    fputs("},\n  \"histogram\": ", f);
    hdr_write_json(h, "ns", f);
    if (r->timeline) {
        fputs(",\n  \"timeline\": ", f);
        tl_write_json(r->timeline, f);
    }
    fputs("\n}\n", f);
    int bad = ferror(f);
    if (f != stdout ? fclose(f) != 0 : fflush(f) != 0)
        bad = 1;
    if (bad) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

static char *slurp(const char *path, size_t *len, char *err, size_t errlen)
{
    char *text = read_file_bounded(path, (size_t)1 << 30, len);
    if (!text)
        snprintf(err, errlen, "cannot read %s: %s", path,
                 errno == EFBIG ? "too large" : strerror(errno));
    return text;
}

/* The most runs, threads or connections a merged file may claim: the
 * totals are 32-bit. */
#define OPT_COUNT_MAX 1000000

/* An optional count: absent leaves *out as it is; present, it must be a
 * whole number from 0 to max. */
static int opt_u64(const struct json *obj, const char *key, uint64_t *out, uint64_t max)
{
    uint64_t v;
    const struct json *j = json_get(obj, key);
    if (!j)
        return 0;
    if (json_get_u64(obj, key, &v) < 0 || v > max || (!j->is_u64 && (double)v != j->num))
        return -1;
    *out = v;
    return 0;
}

int load_merge_json(const char *path, struct load_result *r, char *err, size_t errlen)
{
    size_t len;
    char *text = slurp(path, &len, err, errlen);
    if (!text)
        return -1;
    char why[160];
    struct json *root = json_parse(text, len, why, sizeof why);
    free(text);
    if (!root) {
        snprintf(err, errlen, "%s: not JSON (%s)", path, why);
        return -1;
    }
    int rc = -1;
    uint64_t requests, bytes, connects = 0, resumed = 0, runs = 1, threads = 0, conns = 0;
    double duration, rps, bps, rate = 0;
    const struct json *errs = json_get(root, "errors");
    const struct json *hist = json_get(root, "histogram");
    if (root->type != JSON_OBJ || json_get_u64(root, "requests", &requests) ||
        json_get_u64(root, "transfer_bytes", &bytes) ||
        json_get_double(root, "duration_s", &duration) ||
        json_get_double(root, "requests_per_sec", &rps) ||
        json_get_double(root, "transfer_bytes_per_sec", &bps) || !errs || !hist) {
        snprintf(err, errlen, "%s: not a herd load result (--json)", path);
        goto out;
    }
    uint64_t e[LOAD_NERR] = {0}; /* closed_reused, tls: absent in older files */
    for (int k = 0; k < LOAD_NERR; k++)
        if (json_get_u64(errs, load_err_names[k], &e[k]) && k != LERR_CLOSED_REUSED &&
            k != LERR_TLS) {
            snprintf(err, errlen, "%s: errors.%s is missing", path, load_err_names[k]);
            goto out;
        }
    if (hdr_add_json(r->latency, hist, "ns", why, sizeof why) < 0) {
        snprintf(err, errlen, "%s: %s", path, why);
        goto out;
    }
    if (!(duration > 0 && duration < 1e9) || !(rps >= 0 && rps < 1e15) ||
        !(bps >= 0 && bps < 1e18)) {
        snprintf(err, errlen, "%s: duration_s, requests_per_sec or transfer_bytes_per_sec "
                 "out of range", path);
        goto out;
    }
    const char *bad = opt_u64(root, "connects", &connects, UINT64_MAX) ? "connects"
                      : opt_u64(root, "tls_resumed", &resumed, UINT64_MAX) ? "tls_resumed"
                      : opt_u64(root, "runs", &runs, OPT_COUNT_MAX) ? "runs"
                      : opt_u64(root, "threads", &threads, OPT_COUNT_MAX) ? "threads"
                      : opt_u64(root, "connections", &conns, OPT_COUNT_MAX) ? "connections"
                      : NULL;
    if (!bad && json_get(root, "rate") &&
        (json_get_double(root, "rate", &rate) || !(rate >= 0 && rate < 1e15)))
        bad = "rate";
    if (bad) {
        snprintf(err, errlen, "%s: %s is not a count herd load writes", path, bad);
        goto out;
    }
    uint64_t sum_req, sum_bytes, sum_conn, sum_res, sum_e[LOAD_NERR];
    int wraps = __builtin_add_overflow(r->requests, requests, &sum_req) |
                __builtin_add_overflow(r->bytes, bytes, &sum_bytes) |
                __builtin_add_overflow(r->connects, connects, &sum_conn) |
                __builtin_add_overflow(r->tls_resumed, resumed, &sum_res) |
                (r->runs + runs > UINT32_MAX) | (r->threads + threads > UINT32_MAX) |
                (r->conns + conns > UINT32_MAX);
    for (int k = 0; k < LOAD_NERR; k++)
        wraps |= __builtin_add_overflow(r->errors[k], e[k], &sum_e[k]);
    if (wraps) {
        snprintf(err, errlen, "%s: its counts added to the others' pass 2^64", path);
        goto out;
    }
    const struct json *ka = json_get(root, "keepalive");
    const struct json *url = json_get(root, "url");
    const struct json *first = json_get(root, "first_errors");
    if (!r->runs) {
        r->keepalive = !ka || ka->num != 0;
        if (url && url->type == JSON_STR)
            snprintf(r->url, sizeof r->url, "%s", url->str);
    } else if (url && url->type == JSON_STR && strcmp(r->url, url->str)) {
        snprintf(r->url, sizeof r->url, "(several URLs)");
    }
    r->runs += (uint32_t)runs;
    r->threads += (uint32_t)threads;
    r->conns += (uint32_t)conns;
    r->rate += rate;
    r->requests = sum_req;
    r->bytes = sum_bytes;
    r->connects = sum_conn;
    r->tls_resumed = sum_res;
    r->requests_per_sec += rps;
    r->bytes_per_sec += bps;
    if (duration > r->duration_s)
        r->duration_s = duration;
    for (int k = 0; k < LOAD_NERR; k++) {
        r->errors[k] = sum_e[k];
        const struct json *w = json_get(first, load_err_names[k]);
        if (!r->why[k][0] && w && w->type == JSON_STR) {
            /* printed on the terminal: a file's controls become '?' */
            snprintf(r->why[k], sizeof r->why[k], "%s", w->str);
            text_printable(r->why[k], strlen(r->why[k]), 0);
        }
    }
    rc = 0;
out:
    json_free(root);
    return rc;
}

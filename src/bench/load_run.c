/* The load run: builds the request bytes once, checks that the target
 * answers a connect, then runs one thread per --threads, each with its own
 * epoll loop and its share of the connections, and merges what they
 * measured. The main thread only waits: for the end, for SIGINT/SIGTERM
 * (which end the run early, with the results so far), and to print the
 * progress line. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench/cpus.h"
#include "bench/hdr.h"
#include "bench/load_internal.h"
#include "bench/load_reqs.h"
#include "core/regfile.h"

#define TICK_NS 10000000      /* timeouts, retries and progress counters */
#define RBUF_SIZE (64 * 1024) /* per thread; bodies are skipped 64 KiB per read */
#define MAX_EVENTS 256
/* Open loop: a timer wakes a thread tens of microseconds late (50 us at the
 * median on a VM, even with 1 ns timer slack), and that lateness would be
 * charged to the server as latency. So the thread wakes this much before
 * the next due time and polls without sleeping until it comes. */
#define SPIN_NS 100000

const char *const load_err_names[LOAD_NERR] = {
    "connect", "read", "write", "timeout", "bad_response", "status", "closed_reused", "tls",
};

/* ---- the open-loop heap: connections by the due time of their next request */

static int64_t key_at(struct load_thread *t, uint32_t i)
{
    return t->conns[t->heap[i]].heap_key;
}

static void heap_set(struct load_thread *t, uint32_t i, uint32_t conn)
{
    t->heap[i] = conn;
    t->conns[conn].heap_pos = (int32_t)i;
}

static void sift_up(struct load_thread *t, uint32_t i)
{
    uint32_t conn = t->heap[i];
    int64_t k = t->conns[conn].heap_key;
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        if (key_at(t, parent) <= k)
            break;
        heap_set(t, i, t->heap[parent]);
        i = parent;
    }
    heap_set(t, i, conn);
}

static void sift_down(struct load_thread *t, uint32_t i)
{
    uint32_t conn = t->heap[i];
    int64_t k = t->conns[conn].heap_key;
    for (;;) {
        uint32_t child = 2 * i + 1;
        if (child >= t->heap_n)
            break;
        if (child + 1 < t->heap_n && key_at(t, child + 1) < key_at(t, child))
            child++;
        if (key_at(t, child) >= k)
            break;
        heap_set(t, i, t->heap[child]);
        i = child;
    }
    heap_set(t, i, conn);
}

void load_heap_remove(struct load_thread *t, struct lconn *c)
{
    uint32_t i = (uint32_t)c->heap_pos;
    c->heap_pos = -1;
    uint32_t last = t->heap[--t->heap_n];
    if (i == t->heap_n)
        return;
    heap_set(t, i, last);
    sift_down(t, i);
    sift_up(t, (uint32_t)t->conns[last].heap_pos);
}

void load_heap_push(struct load_thread *t, struct lconn *c, int64_t key)
{
    if (c->heap_pos >= 0)
        load_heap_remove(t, c);
    c->heap_key = key;
    t->heap[t->heap_n] = c->index;
    c->heap_pos = (int32_t)t->heap_n++;
    sift_up(t, (uint32_t)c->heap_pos);
}

static struct lconn *heap_pop_due(struct load_thread *t, int64_t now)
{
    if (!t->heap_n || key_at(t, 0) > now)
        return NULL;
    struct lconn *c = &t->conns[t->heap[0]];
    load_heap_remove(t, c);
    return c;
}

/* ---- one thread */

static void start_measuring(struct load_thread *t)
{
    hdr_reset(t->st.latency);
    struct hdr *h = t->st.latency;
    memset(&t->st, 0, sizeof t->st);
    t->st.latency = h;
    t->measuring = 1;
    t->nrps = 0;
    t->rps_reqs = 0;
    t->rps_at = t->measure_ns; /* a thread that starts late owes the samples it missed */
}

/* The Req/Sec samples since the last, one per interval spanned: a thread
 * that did not run for a while (a loaded machine) records its average rate
 * once for each interval it missed, not once for all of them, so every
 * thread has about as many samples as the run has intervals and the mean
 * over all samples stays the per-thread share of the run's rate. */
static void record_rps(struct load_thread *t, int64_t now)
{
    int64_t span = now - t->rps_at;
    if (span < LOAD_RPS_INTERVAL_NS)
        return; /* a tail shorter than an interval is no sample */
    float rate = (float)((double)(t->st.requests - t->rps_reqs) * 1e9 / (double)span);
    int64_t k = span / LOAD_RPS_INTERVAL_NS;
    int64_t room = (int64_t)(sizeof t->rps / sizeof t->rps[0]) - (int64_t)t->nrps;
    for (k = k < room ? k : room; k > 0; k--)
        t->rps[t->nrps++] = rate;
    t->rps_reqs = t->st.requests;
    t->rps_at = now;
}

/* One Req/Sec sample per LOAD_RPS_INTERVAL_NS of measuring. */
static void sample_rps(struct load_thread *t, int64_t now)
{
    if (!t->measuring || t->stopping || now - t->rps_at < LOAD_RPS_INTERVAL_NS)
        return;
    record_rps(t, now);
}

static int busy(const struct load_thread *t)
{
    for (uint32_t i = 0; i < t->nconns; i++)
        if (lconn_in_flight(&t->conns[i]))
            return 1;
    return 0;
}

static void publish(struct load_thread *t)
{
    uint64_t errs = 0;
    for (int k = 0; k < LOAD_NERR; k++)
        errs += t->st.errors[k];
    __atomic_store_n(&t->live_requests, t->all_requests, __ATOMIC_RELAXED);
    __atomic_store_n(&t->live_errors, errs, __ATOMIC_RELAXED);
}

static void *thread_main(void *arg)
{
    struct load_thread *t = arg;
    const struct load_config *cfg = t->cfg;
    if (cfg->ncpus)
        cpus_pin(cfg->cpus[t->id % (uint32_t)cfg->ncpus]);
    if (cfg->rate > 0)
        /* Due times are in nanoseconds; the default 50 us slack would add
         * itself to every open-loop latency. */
        prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);

    int64_t now = load_now_ns();
    if (now >= t->measure_ns)
        start_measuring(t); /* no warm-up: the first connects count too */
    for (uint32_t i = 0; i < t->nconns; i++)
        lconn_start(t, &t->conns[i], now, i == 0 ? t->preflight_fd : -1);
    int64_t next_tick = now + TICK_NS;
    struct epoll_event ev[MAX_EVENTS];
    for (;;) {
        now = load_now_ns();
        if (!t->measuring && now >= t->measure_ns)
            start_measuring(t);
        if (!t->stopping && (now >= t->end_ns || __atomic_load_n(t->stop_flag, __ATOMIC_RELAXED))) {
            t->stopping = 1;
            t->stop_ns = now < t->end_ns ? now : t->end_ns;
            for (uint32_t i = 0; i < t->nconns; i++)
                lconn_stop(t, &t->conns[i]);
        }
        /* After the end, wait for the responses in flight: the server has
         * counted those requests, so the client counts them too. */
        if (t->stopping && (!busy(t) || now >= t->stop_ns + t->timeout_ns + TICK_NS))
            break;
        if (now >= next_tick) {
            for (uint32_t i = 0; i < t->nconns; i++)
                lconn_tick(t, &t->conns[i], now);
            publish(t);
            sample_rps(t, now);
            next_tick = now + TICK_NS;
        }
        struct lconn *due;
        while ((due = heap_pop_due(t, now)))
            lconn_due(t, due, now);

        int64_t wake = next_tick;
        if (t->heap_n && key_at(t, 0) - SPIN_NS < wake)
            wake = key_at(t, 0) - SPIN_NS;
        if (!t->measuring && t->measure_ns < wake)
            wake = t->measure_ns;
        if (!t->stopping && t->end_ns < wake)
            wake = t->end_ns;
        int64_t d = wake > now ? wake - now : 0;
        struct timespec ts = {.tv_sec = d / 1000000000, .tv_nsec = d % 1000000000};
        int n = epoll_pwait2(t->loop.epfd, ev, MAX_EVENTS, &ts, NULL);
        for (int i = 0; i < n; i++) {
            uint32_t idx = (uint32_t)ev[i].data.u64, gen = (uint32_t)(ev[i].data.u64 >> 32);
            struct lconn *c = &t->conns[idx];
            /* A connection closed earlier in this batch has a new generation. */
            if (c->gen != gen || c->fd < 0)
                continue;
            lconn_event(t, c, ev[i].events);
        }
    }
    /* Whatever is still in flight has outlived the timeout. */
    for (uint32_t i = 0; i < t->nconns; i++) {
        struct lconn *c = &t->conns[i];
        if (c->state == LC_OPEN && c->outstanding)
            lconn_fail(t, c, LERR_TIMEOUT, 0, "no complete response within the timeout");
        else if (c->state == LC_CONNECTING)
            lconn_fail(t, c, LERR_CONNECT, ETIMEDOUT, "connect");
        else if (c->state == LC_HANDSHAKE)
            lconn_fail(t, c, LERR_TLS, ETIMEDOUT, "handshake");
    }
    /* The end of the run counts from the last answer (load_run's `end`):
     * whole intervals since the last sample, e.g. a thread that did not
     * run across the end, are sampled too. */
    if (t->measuring)
        record_rps(t, t->last_done_ns > t->stop_ns ? t->last_done_ns : t->stop_ns);
    publish(t);
    __atomic_add_fetch(t->threads_done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* ---- results */

static void thread_rps_stats(const struct load_thread *th, uint32_t nt,
                             struct load_thread_rps *out)
{
    double sum = 0, sq = 0, max = 0;
    uint64_t n = 0, within = 0;
    for (uint32_t i = 0; i < nt; i++)
        for (uint32_t k = 0; k < th[i].nrps; k++) {
            double v = th[i].rps[k];
            sum += v;
            sq += v * v;
            max = v > max ? v : max;
            n++;
        }
    memset(out, 0, sizeof *out);
    if (!n)
        return;
    double mean = sum / (double)n, var = sq / (double)n - mean * mean;
    double sd = var > 0 ? sqrt(var) : 0;
    for (uint32_t i = 0; i < nt; i++)
        for (uint32_t k = 0; k < th[i].nrps; k++)
            within += fabs(th[i].rps[k] - mean) <= sd;
    *out = (struct load_thread_rps){mean, sd, max, 100.0 * (double)within / (double)n, n};
}

double load_rate_shortfall(const struct load_result *r)
{
    if (r->rate <= 0 || r->requests_per_sec >= r->rate)
        return 0;
    return 100.0 * (r->rate - r->requests_per_sec) / r->rate;
}

/* ---- setup */

static int raise_fd_limit(uint64_t need, char *err, size_t errlen)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return 0;
    if (rl.rlim_cur < rl.rlim_max && rl.rlim_cur < need) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
        snprintf(err, errlen, "%llu connections need more file descriptors than the limit of %llu",
                 (unsigned long long)need - 32, (unsigned long long)rl.rlim_cur);
        return -1;
    }
    return 0;
}

static void free_thread(struct load_thread *t)
{
    if (t->conns)
        for (uint32_t i = 0; i < t->nconns; i++)
            if (t->conns[i].fd >= 0) {
                if (t->conns[i].ssl)
                    load_tls_free(t->conns[i].ssl, NULL);
                close(t->conns[i].fd);
            }
    loop_close(&t->loop);
    load_tls_session_free(&t->tls_session);
    free(t->conns);
    free(t->starts);
    free(t->heap);
    free(t->rbuf);
    bufpool_destroy(&t->stash_pool);
    hdr_free(t->st.latency);
    tl_free(&t->tl);
}

/* --start-file: the measured run's start on CLOCK_MONOTONIC, written
 * whole (a temporary renamed into place: core/regfile.h), so a harness
 * polling for the file never reads half a number. 0, or -1 with err. */
static int write_start_file(const char *path, int64_t measure_ns, char *err, size_t errlen)
{
    char text[24];
    int n = snprintf(text, sizeof text, "%lld\n", (long long)measure_ns);
    if (regfile_replace(path, ".tmp", text, (size_t)n) < 0) {
        snprintf(err, errlen, "cannot write --start-file %.200s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* A timeline covers the measured run and the last responses after it. */
static int64_t timeline_span_ns(const struct load_config *cfg)
{
    return (cfg->duration_ms + 2 * cfg->timeout_ms + 1000) * 1000000;
}

static int init_thread(struct load_thread *t, uint32_t first_global)
{
    const struct load_config *cfg = t->cfg;
    t->loop.epfd = -1;
    bufpool_init(&t->stash_pool, RESP_MAX_HEAD, 64);
    if (loop_init(&t->loop) < 0)
        return -1;
    t->conns = calloc(t->nconns, sizeof *t->conns);
    t->starts = calloc((size_t)t->nconns * cfg->pipeline, sizeof *t->starts);
    t->heap = calloc(t->nconns, sizeof *t->heap);
    t->rbuf = malloc(RBUF_SIZE);
    t->rbuf_size = RBUF_SIZE;
    t->st.latency = hdr_new();
    if (!t->conns || !t->starts || !t->heap || !t->rbuf || !t->st.latency)
        return -1;
    if (cfg->timeline_ms > 0 &&
        tl_init(&t->tl, t->measure_ns, cfg->timeline_ms * 1000000, timeline_span_ns(cfg)) < 0)
        return -1;
    for (uint32_t i = 0; i < t->nconns; i++)
        lconn_init(t, &t->conns[i], i, first_global + i);
    return 0;
}

static void progress_line(struct load_thread *th, uint32_t n, int64_t now, int64_t start,
                          int64_t measure, uint64_t *last_reqs)
{
    uint64_t reqs = 0, errs = 0;
    for (uint32_t i = 0; i < n; i++) {
        reqs += __atomic_load_n(&th[i].live_requests, __ATOMIC_RELAXED);
        errs += __atomic_load_n(&th[i].live_errors, __ATOMIC_RELAXED);
    }
    fprintf(stderr, "\r\033[K  %3llds%s  %llu req/s  %llu errors",
            (long long)((now - start) / 1000000000), now < measure ? " (warm-up)" : "",
            (unsigned long long)(reqs - *last_reqs), (unsigned long long)errs);
    *last_reqs = reqs;
}

/* Adds up the threads' timelines into a new res->timeline. 0, or -1. */
static int merge_timelines(struct load_thread *th, uint32_t nt, struct load_result *res)
{
    const struct load_config *cfg = th[0].cfg;
    res->timeline = malloc(sizeof *res->timeline);
    if (!res->timeline || tl_init(res->timeline, th[0].measure_ns, cfg->timeline_ms * 1000000,
                                  timeline_span_ns(cfg)) < 0) {
        free(res->timeline);
        res->timeline = NULL;
        return -1;
    }
    for (uint32_t i = 0; i < nt; i++)
        tl_merge(res->timeline, &th[i].tl);
    return 0;
}

int load_run(const struct load_config *cfg, struct load_result *res, char *err, size_t errlen)
{
    memset(res, 0, sizeof *res);
    if (raise_fd_limit((uint64_t)cfg->conns + 32, err, errlen) < 0)
        return -1;
    SSL_CTX *tls = NULL;
    if (cfg->target.tls && !(tls = load_tls_ctx_new(cfg->cacert, cfg->insecure, err, errlen)))
        return -1;
    struct load_reqs reqs;
    if (load_reqs_build(cfg, &reqs) < 0) {
        snprintf(err, errlen, "out of memory for the requests");
        load_tls_ctx_free(tls);
        return -1;
    }
    /* Fail now, with the reason, rather than count connect errors for the
     * whole run. The socket becomes the first connection. */
    int pre = target_connect_wait(&cfg->target, (int)cfg->timeout_ms);
    if (pre < 0) {
        snprintf(err, errlen, "cannot connect to %s: %s", cfg->target.addr, strerror(-pre));
        load_reqs_free(&reqs);
        load_tls_ctx_free(tls);
        return -1;
    }

    uint32_t nt = cfg->threads < cfg->conns ? cfg->threads : cfg->conns;
    struct load_thread *th = calloc(nt, sizeof *th);
    int stop = 0, done = 0, rc = -1, pre_owned = 1; /* until thread 0 adopts it */
    if (!th) {
        snprintf(err, errlen, "out of memory");
        close(pre);
        load_reqs_free(&reqs);
        load_tls_ctx_free(tls);
        return -1;
    }
    for (uint32_t i = 0; i < nt; i++)
        th[i].loop.epfd = -1; /* out: frees threads not yet initialised too */
    int64_t start = load_now_ns();
    uint32_t given = 0;
    for (uint32_t i = 0; i < nt; i++) {
        struct load_thread *t = &th[i];
        t->cfg = cfg;
        t->id = i;
        t->nconns = cfg->conns / nt + (i < cfg->conns % nt);
        t->preflight_fd = i == 0 ? pre : -1;
        t->reqs = &reqs;
        t->head_method = !cfg->script && !strcmp(cfg->method, "HEAD");
        t->tls_ctx = tls;
        /* MSG_TRUNC would drop TLS records undecrypted */
        t->tcp = cfg->target.family != AF_UNIX && !tls;
        t->timeout_ns = cfg->timeout_ms * 1000000;
        t->start_ns = start;
        t->measure_ns = start + cfg->warmup_ms * 1000000;
        t->end_ns = t->measure_ns + cfg->duration_ms * 1000000;
        t->stop_flag = &stop;
        t->threads_done = &done;
        if (init_thread(t, given) < 0) {
            snprintf(err, errlen, "out of memory or file descriptors for the threads");
            goto out;
        }
        given += t->nconns;
    }

    if (cfg->start_file && write_start_file(cfg->start_file, th[0].measure_ns, err, errlen) < 0)
        goto out;

    sigset_t sigs, old;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, &old);
    uint32_t started = 0;
    for (; started < nt; started++) {
        int e = pthread_create(&th[started].tid, NULL, thread_main, &th[started]);
        if (e) {
            snprintf(err, errlen, "cannot start a thread: %s", strerror(e));
            __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
            break;
        }
        pre_owned = 0;
    }
    int64_t next_print = start + 1000000000;
    uint64_t last_reqs = 0;
    while (__atomic_load_n(&done, __ATOMIC_ACQUIRE) < (int)started) {
        struct timespec to = {.tv_sec = 0, .tv_nsec = 50000000};
        int sig = sigtimedwait(&sigs, NULL, &to);
        if (sig > 0 && !stop) {
            __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
            res->interrupted = 1;
        }
        int64_t now = load_now_ns();
        if (cfg->progress && now >= next_print) {
            progress_line(th, started, now, start, start + cfg->warmup_ms * 1000000, &last_reqs);
            next_print += 1000000000;
        }
    }
    for (uint32_t i = 0; i < started; i++)
        pthread_join(th[i].tid, NULL);
    if (cfg->progress && next_print > start + 1000000000)
        fputs("\r\033[K", stderr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (started < nt)
        goto out;

    res->latency = hdr_new();
    if (!res->latency) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    int64_t end = 0, measure = th[0].measure_ns;
    for (uint32_t i = 0; i < nt; i++) {
        struct load_thread *t = &th[i];
        if (!t->measuring)
            continue;
        int64_t e = t->last_done_ns > t->stop_ns ? t->last_done_ns : t->stop_ns;
        if (e > end)
            end = e;
        res->requests += t->st.requests;
        res->bytes += t->st.bytes;
        res->connects += t->st.connects;
        res->tls_resumed += t->st.tls_resumed;
        for (int k = 0; k < LOAD_NERR; k++) {
            res->errors[k] += t->st.errors[k];
            if (!res->why[k][0])
                memcpy(res->why[k], t->st.why[k], sizeof res->why[k]);
        }
        hdr_merge(res->latency, t->st.latency);
    }
    if (cfg->timeline_ms > 0 && merge_timelines(th, nt, res) < 0) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    thread_rps_stats(th, nt, &res->thread_rps);
    snprintf(res->url, sizeof res->url, "%s", cfg->url);
    res->threads = nt;
    res->conns = cfg->conns;
    res->runs = 1;
    res->rate = cfg->rate;
    res->keepalive = cfg->keepalive;
    res->duration_s = end > measure ? (double)(end - measure) / 1e9 : 0.0;
    if (res->duration_s > 0) {
        res->requests_per_sec = (double)res->requests / res->duration_s;
        res->bytes_per_sec = (double)res->bytes / res->duration_s;
    }
    rc = 0;
out:
    for (uint32_t i = 0; i < nt; i++)
        free_thread(&th[i]);
    if (pre_owned)
        close(pre);
    free(th);
    load_reqs_free(&reqs);
    load_tls_ctx_free(tls);
    return rc;
}

void load_result_free(struct load_result *res)
{
    hdr_free(res->latency);
    res->latency = NULL;
    if (res->timeline) {
        tl_free(res->timeline);
        free(res->timeline);
        res->timeline = NULL;
    }
}

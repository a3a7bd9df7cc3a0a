#include "proc/status.h"
#include "proc/health.h"

#include <stddef.h>
#include <string.h>
#include <time.h>

#include "core/bwriter.h"

struct totals {
    uint64_t requests, bytes_in, bytes_out, status[6], accepted, active, idle, empty;
    uint64_t dropped;           /* access-log lines lost: the workers' and the logger's */
    uint64_t write_dropped;     /* ...of which the logger could not write */
    uint64_t tls_handshakes, tls_resumed, tls_failed[4];
    uint64_t file_reads;
    uint32_t workers;
    /* The slots counted in workers: the page lists these and no others, so
     * that a worker starting or leaving while it is rendered cannot be
     * listed without being counted (or the other way round). */
    uint64_t live[SB_MAX_SLOTS / 64];
    struct sb_latency lat;      /* merged over every slot, like the counters */
};

_Static_assert(SB_MAX_SLOTS % 64 == 0, "live[] holds a bit per slot");

static int counted(const struct totals *t, uint32_t slot)
{
    return (t->live[slot / 64] >> (slot % 64)) & 1;
}

/* The keys of tls_failed, in enum tls_fail's order (net/tls.h). */
static const char *const tls_fail_names[4] = {"plain_http", "protocol", "closed", "timeout"};

static void snapshot(const struct sb_slot *s, struct sb_slot *o)
{
    o->requests = SB_GET(s->requests);
    o->bytes_in = SB_GET(s->bytes_in);
    o->bytes_out = SB_GET(s->bytes_out);
    for (int k = 0; k < 6; k++)
        o->status[k] = SB_GET(s->status[k]);
    o->accepted = SB_GET(s->accepted);
    o->active = SB_GET(s->active);
    o->idle = SB_GET(s->idle);
    o->empty_wakeups = SB_GET(s->empty_wakeups);
    o->log_dropped = SB_GET(s->log_dropped);
    o->tls_handshakes = SB_GET(s->tls_handshakes);
    o->tls_resumed = SB_GET(s->tls_resumed);
    for (int k = 0; k < 4; k++)
        o->tls_failed[k] = SB_GET(s->tls_failed[k]);
    o->file_reads = SB_GET(s->file_reads);
    o->started = SB_GET(s->started);
    o->pid = SB_GET(s->pid);
    o->generation = SB_GET(s->generation);
    o->index = SB_GET(s->index);
    o->state = SB_GET(s->state);
}

/* Counters of exited workers stay in their slots (state FREE, pid 0) until a
 * new worker takes the slot, so totals do not drop when a worker exits. */
static void sum(const struct scoreboard *sb, struct totals *t)
{
    memset(t, 0, sizeof *t);
    t->write_dropped = SB_GET(sb->log_write_dropped);
    t->dropped = t->write_dropped;
    for (uint32_t i = 0; i < sb->nslots; i++) {
        struct sb_slot s;
        snapshot(&sb->slots[i], &s);
        t->requests += s.requests;
        t->bytes_in += s.bytes_in;
        t->bytes_out += s.bytes_out;
        for (int k = 0; k < 6; k++)
            t->status[k] += s.status[k];
        t->accepted += s.accepted;
        t->empty += s.empty_wakeups;
        t->dropped += s.log_dropped;
        lat_merge(&t->lat, &sb->slots[i].latency);
        t->tls_handshakes += s.tls_handshakes;
        t->tls_resumed += s.tls_resumed;
        for (int k = 0; k < 4; k++)
            t->tls_failed[k] += s.tls_failed[k];
        t->file_reads += s.file_reads;
        if (s.state != SB_FREE) {
            t->active += s.active;
            t->idle += s.idle;
            t->workers++;
            t->live[i / 64] |= (uint64_t)1 << (i % 64);
        }
    }
}

static const char *state_name(uint32_t st)
{
    return st == SB_RUNNING ? "running" : st == SB_DRAINING ? "draining" : "exited";
}

/* "upstreams":[{"server":"GROUP ADDR","idle":N,"busy":N,"stalls":N,
 * "health":"up|down|unchecked"},...]: the keep-alive pools of the running
 * workers, summed per server, how often a server was found serving one
 * connection at a time (every slot's, as the other counters), and the
 * master's last health check verdict (unchecked: none configured, or the
 * first still running). */
static void render_upstreams_json(const struct scoreboard *sb, struct bw *w)
{
    uint32_t n = SB_GET(sb->nupstreams);
    bw_printf(w, ",\"upstreams\":[");
    for (uint32_t k = 0; k < n && k < SB_UPSTREAMS; k++) {
        uint32_t u = SB_GET(sb->upstream_order[k]);
        if (u >= SB_UPSTREAMS)
            continue;
        unsigned long long idle = 0, busy = 0, stalls = 0;
        for (uint32_t i = 0; i < sb->nslots; i++) {
            const struct sb_slot *s = &sb->slots[i];
            stalls += SB_GET(s->up[u].stalls);
            if (SB_GET(s->state) != SB_FREE) {
                idle += SB_GET(s->up[u].idle);
                busy += SB_GET(s->up[u].busy);
            }
        }
        const char *name = sb->upstream_names[u];
        uint8_t hv = SB_GET(sb->upstream_health[u]);
        const char *health = hv == HEALTH_UP ? "up" : hv == HEALTH_DOWN ? "down" : "unchecked";
        /* names are group names and addresses, but a unix path may hold
         * any byte: escaped as the JSON access log escapes, so that the
         * document stays valid JSON (and UTF-8) */
        bw_printf(w, "%s{\"server\":\"", k ? "," : "");
        bw_escaped(w, name, strnlen(name, SB_UPSTREAM_NAME), BW_ESC_JSON, 6 * SB_UPSTREAM_NAME);
        bw_printf(w, "\",\"idle\":%llu,\"busy\":%llu,\"stalls\":%llu,\"health\":\"%s\"}",
                  idle, busy, stalls, health);
    }
    bw_printf(w, "]");
}

/* Percentiles (each the high end of its log bucket) and the mean, in us. */
static void json_latency(struct bw *w, const struct sb_latency *lat)
{
    uint64_t n = lat_count(lat);
    bw_printf(w, "\"latency_us\":{\"count\":%llu,\"mean\":%llu,\"p50\":%llu,\"p90\":%llu,"
        "\"p99\":%llu,\"p999\":%llu,\"buckets\":[",
        (unsigned long long)n, (unsigned long long)(n ? lat->sum_us / n : 0),
        (unsigned long long)lat_quantile(lat, 500), (unsigned long long)lat_quantile(lat, 900),
        (unsigned long long)lat_quantile(lat, 990), (unsigned long long)lat_quantile(lat, 999));
    /* the non-empty buckets as [high end, count]: the live page takes the
     * difference of two reads for the percentiles of the last second */
    const char *sep = "";
    for (unsigned i = 0; i < LAT_BUCKETS; i++) {
        if (!lat->log[i])
            continue;
        bw_printf(w, "%s[%llu,%llu]", sep, (unsigned long long)lat_bucket_high(i),
            (unsigned long long)lat->log[i]);
        sep = ",";
    }
    bw_printf(w, "]},");
}

static void render_json(const struct scoreboard *sb, struct bw *w)
{
    struct totals t;
    sum(sb, &t);
    time_t now = time(NULL);
    bw_printf(w,
        "{\"master_pid\":%d,\"logger_pid\":%d,\"model\":\"%s\",\"generation\":%u,"
        "\"uptime_s\":%lld,\"workers\":%u,\"worker_restarts\":%llu,\"logger_restarts\":%llu,"
        "\"requests\":%llu,\"bytes_in\":%llu,\"bytes_out\":%llu,"
        "\"responses\":{\"1xx\":%llu,\"2xx\":%llu,\"3xx\":%llu,\"4xx\":%llu,\"5xx\":%llu},"
        "\"accepted\":%llu,\"active\":%llu,\"idle\":%llu,\"empty_accept_wakeups\":%llu,"
        "\"log_dropped\":%llu,\"log_write_dropped\":%llu,\"file_reads\":%llu,",
        SB_GET(sb->master_pid), SB_GET(sb->logger_pid), sb->model, SB_GET(sb->generation),
        (long long)(now - sb->started), t.workers,
        (unsigned long long)SB_GET(sb->worker_restarts),
        (unsigned long long)SB_GET(sb->logger_restarts), (unsigned long long)t.requests,
        (unsigned long long)t.bytes_in, (unsigned long long)t.bytes_out,
        (unsigned long long)t.status[1], (unsigned long long)t.status[2],
        (unsigned long long)t.status[3], (unsigned long long)t.status[4],
        (unsigned long long)t.status[5], (unsigned long long)t.accepted,
        (unsigned long long)t.active, (unsigned long long)t.idle, (unsigned long long)t.empty,
        (unsigned long long)t.dropped, (unsigned long long)t.write_dropped,
        (unsigned long long)t.file_reads);
    json_latency(w, &t.lat);
    bw_printf(w, "\"tls\":{\"handshakes\":%llu,\"resumed\":%llu,\"failed\":{",
              (unsigned long long)t.tls_handshakes, (unsigned long long)t.tls_resumed);
    for (int k = 0; k < 4; k++)
        bw_printf(w, "%s\"%s\":%llu", k ? "," : "", tls_fail_names[k],
                  (unsigned long long)t.tls_failed[k]);
    bw_printf(w, "}},\"slots\":[");
    int first = 1;
    for (uint32_t i = 0; i < sb->nslots; i++) {
        struct sb_slot s;
        snapshot(&sb->slots[i], &s);
        if (!counted(&t, i))
            continue;
        bw_printf(w,
            "%s{\"slot\":%u,\"worker\":%u,\"pid\":%d,\"generation\":%u,\"state\":\"%s\","
            "\"requests\":%llu,\"bytes_in\":%llu,\"bytes_out\":%llu,\"accepted\":%llu,"
            "\"active\":%llu,\"idle\":%llu,\"empty_accept_wakeups\":%llu,\"log_dropped\":%llu,"
            "\"tls_handshakes\":%llu,\"tls_resumed\":%llu,\"uptime_s\":%lld}",
            first ? "" : ",", i, s.index, s.pid, s.generation, state_name(s.state),
            (unsigned long long)s.requests, (unsigned long long)s.bytes_in,
            (unsigned long long)s.bytes_out, (unsigned long long)s.accepted,
            (unsigned long long)s.active, (unsigned long long)s.idle,
            (unsigned long long)s.empty_wakeups, (unsigned long long)s.log_dropped,
            (unsigned long long)s.tls_handshakes, (unsigned long long)s.tls_resumed,
            (long long)(now - s.started));
        first = 0;
    }
    bw_printf(w, "]");
    render_upstreams_json(sb, w);
    bw_printf(w, "}\n");
}

static void prom(struct bw *w, const char *name, const char *type, const char *help,
                 unsigned long long v)
{
    bw_printf(w, "# HELP herd_%s %s\n# TYPE herd_%s %s\nherd_%s %llu\n", name, help, name, type, name,
        v);
}

/* A histogram with fixed bounds (the same on every server, so scrapes
 * aggregate); buckets are cumulative, as the format wants. */
static void prom_latency(struct bw *w, const struct sb_latency *lat)
{
    const char *name = "herd_request_duration_seconds";
    bw_printf(w, "# HELP %s Time from the first bytes of a request to its answer.\n"
        "# TYPE %s histogram\n", name, name);
    uint64_t cum = 0;
    for (unsigned p = 0; p < LAT_PROM_BOUNDS; p++) {
        cum += lat->prom[p];
        bw_printf(w, "%s_bucket{le=\"%g\"} %llu\n", name, lat_prom_bounds_us[p] / 1e6,
            (unsigned long long)cum);
    }
    cum += lat->prom[LAT_PROM_BOUNDS];
    bw_printf(w, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name,
        (unsigned long long)cum, name, lat->sum_us / 1e6, name, (unsigned long long)cum);
}

/* One series per live slot: labels are bounded by --workers. */
static void prom_per_worker(const struct scoreboard *sb, const struct totals *t, struct bw *w,
                            const char *name, const char *help, size_t field)
{
    bw_printf(w, "# HELP herd_worker_%s %s\n# TYPE herd_worker_%s counter\n", name, help, name);
    for (uint32_t i = 0; i < sb->nslots; i++) {
        const struct sb_slot *s = &sb->slots[i];
        if (!counted(t, i))
            continue;
        const uint64_t *v = (const uint64_t *)((const char *)s + field);
        bw_printf(w, "herd_worker_%s{slot=\"%u\",worker=\"%u\"} %llu\n", name, i,
            SB_GET(s->index), (unsigned long long)SB_GET(*v));
    }
}

static void render_prometheus(const struct scoreboard *sb, struct bw *w)
{
    struct totals t;
    sum(sb, &t);
    prom(w, "requests_total", "counter", "HTTP requests answered.", t.requests);
    prom(w, "received_bytes_total", "counter", "Bytes read from clients.", t.bytes_in);
    prom(w, "sent_bytes_total", "counter", "Bytes written to clients.", t.bytes_out);
    bw_printf(w, "# HELP herd_responses_total HTTP responses by status class.\n"
           "# TYPE herd_responses_total counter\n");
    for (int k = 1; k <= 5; k++)
        bw_printf(w, "herd_responses_total{code=\"%dxx\"} %llu\n", k, (unsigned long long)t.status[k]);
    prom(w, "accepted_connections_total", "counter", "Connections accepted.", t.accepted);
    prom(w, "connections", "gauge", "Open client connections.", t.active);
    prom(w, "idle_connections", "gauge", "Idle keep-alive connections.", t.idle);
    prom(w, "empty_accept_wakeups_total", "counter",
         "Wakeups of a listen socket that found no connection.", t.empty);
    prom(w, "access_log_dropped_total", "counter", "Access-log records dropped.", t.dropped);
    prom(w, "access_log_write_dropped_total", "counter",
         "Access-log records dropped because the logger could not write them.", t.write_dropped);
    prom(w, "file_reads_total", "counter",
         "File windows read into the page cache before their sendfile.", t.file_reads);
    prom(w, "tls_handshakes_total", "counter", "TLS handshakes completed.", t.tls_handshakes);
    prom(w, "tls_resumed_total", "counter", "TLS handshakes that resumed a session.",
         t.tls_resumed);
    bw_printf(w, "# HELP herd_tls_failed_total TLS handshakes failed, by reason.\n"
                 "# TYPE herd_tls_failed_total counter\n");
    for (int k = 0; k < 4; k++)
        bw_printf(w, "herd_tls_failed_total{reason=\"%s\"} %llu\n", tls_fail_names[k],
                  (unsigned long long)t.tls_failed[k]);
    prom(w, "workers", "gauge", "Worker processes alive.", t.workers);
    prom(w, "worker_restarts_total", "counter", "Workers respawned after dying.",
         SB_GET(sb->worker_restarts));
    prom(w, "generation", "gauge", "Reload generation.", SB_GET(sb->generation));
    prom_latency(w, &t.lat);
    prom_per_worker(sb, &t, w, "accepted_connections_total", "Connections accepted, per worker.",
                    offsetof(struct sb_slot, accepted));
    prom_per_worker(sb, &t, w, "requests_total", "HTTP requests answered, per worker.",
                    offsetof(struct sb_slot, requests));
}

static void render_table(const struct scoreboard *sb, struct bw *w)
{
    struct totals t;
    sum(sb, &t);
    time_t now = time(NULL);
    bw_printf(w, "herd: master %d, model %s, generation %u, up %llds, %u workers, logger %d\n",
        SB_GET(sb->master_pid), sb->model, SB_GET(sb->generation),
        (long long)(now - sb->started), t.workers, SB_GET(sb->logger_pid));
    bw_printf(w, "requests %llu  in %llu B  out %llu B  2xx %llu  3xx %llu  4xx %llu  5xx %llu\n",
        (unsigned long long)t.requests, (unsigned long long)t.bytes_in,
        (unsigned long long)t.bytes_out, (unsigned long long)t.status[2],
        (unsigned long long)t.status[3], (unsigned long long)t.status[4],
        (unsigned long long)t.status[5]);
    bw_printf(w, "connections: accepted %llu  open %llu  idle %llu  empty wakeups %llu  "
           "log dropped %llu (%llu not written)  worker restarts %llu\n",
        (unsigned long long)t.accepted, (unsigned long long)t.active,
        (unsigned long long)t.idle, (unsigned long long)t.empty, (unsigned long long)t.dropped,
        (unsigned long long)t.write_dropped,
        (unsigned long long)SB_GET(sb->worker_restarts));
    bw_printf(w, "files: windows read into the page cache %llu\n\n",
        (unsigned long long)t.file_reads);
    if (t.tls_handshakes || t.tls_failed[0] || t.tls_failed[1] || t.tls_failed[2] ||
        t.tls_failed[3])
        bw_printf(w, "tls: handshakes %llu  resumed %llu  failed: plain http %llu  protocol %llu"
                     "  closed %llu  timeout %llu\n\n",
                  (unsigned long long)t.tls_handshakes, (unsigned long long)t.tls_resumed,
                  (unsigned long long)t.tls_failed[0], (unsigned long long)t.tls_failed[1],
                  (unsigned long long)t.tls_failed[2], (unsigned long long)t.tls_failed[3]);
    bw_printf(w, "%4s %6s %8s %4s %-8s %12s %8s %6s %6s %8s\n", "slot", "worker", "pid", "gen",
        "state", "requests", "accepted", "open", "idle", "empty");
    for (uint32_t i = 0; i < sb->nslots; i++) {
        struct sb_slot s;
        snapshot(&sb->slots[i], &s);
        if (!counted(&t, i))
            continue;
        bw_printf(w, "%4u %6u %8d %4u %-8s %12llu %8llu %6llu %6llu %8llu\n", i, s.index, s.pid,
            s.generation, state_name(s.state), (unsigned long long)s.requests,
            (unsigned long long)s.accepted, (unsigned long long)s.active,
            (unsigned long long)s.idle, (unsigned long long)s.empty_wakeups);
    }
}

size_t status_render(const struct scoreboard *sb, enum status_format fmt, char *buf,
                     size_t cap)
{
    struct bw w;
    bw_init(&w, buf, cap);
    switch (fmt) {
    case STATUS_JSON: render_json(sb, &w); break;
    case STATUS_PROMETHEUS: render_prometheus(sb, &w); break;
    case STATUS_TABLE: render_table(sb, &w); break;
    }
    return w.len;
}

size_t status_page(void *sb, int format, char *buf, size_t cap)
{
    return sb ? status_render(sb, (enum status_format)format, buf, cap) : 0;
}

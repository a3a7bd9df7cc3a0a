/* Servers that answer one connection at a time. A single-threaded
 * keep-alive server (Python's stdlib HTTPServer, a one-process app server)
 * reads the connection it is on until that connection closes; the others
 * wait in its listen queue. Behind a keep-alive pool, the connection it is
 * on goes back to the pool after each answer and is taken again, so the
 * requests that went out on any other connection wait until the read
 * timeout: a handful of requests per second and 504s.
 *
 * herd notices it from the answers: a request sent whole gets no byte
 * back for --upstream-stall while the same server answers, again and
 * again, on one other connection, in this worker or another (or answers
 * nothing while connections to it sit idle in a pool, this worker's or
 * another's, one of which it is waiting on). Then that server gets no
 * pool in any worker: idle connections close and every exchange closes
 * its connection after the answer, so the server moves through its
 * queue. After STALL_RELEARN_MS the pool is tried again. A threaded
 * server that is merely slow answers on many connections, which breaks
 * the run (STALL_RUN), and keeps its pool. Each request is judged once:
 * judged again and again, a long poll would sooner or later meet some
 * client's three requests in a row on one pooled connection of a
 * threaded server and take it for one that serves one at a time.
 *
 * Workers share what they learn through the scoreboard: which connection
 * answered last and how many times in a row, how many requests to a
 * server are stalled now, and until when it has no pool. A pooled
 * connection is looked at every stall time: closed when a request to its
 * server is stalled anywhere (the server may be waiting on it). */
#include "models/upstream.h"

#include "core/clock.h"
#include "core/log.h"
#include "models/upstream_internal.h"

/* Answers in a row on one other connection that convict the server. */
#define STALL_RUN 3
/* How long a convicted server goes without a pool before a new try. */
#define STALL_RELEARN_MS 30000

/* Below the pool (upstream_pool.c calls in, never the other way): it
 * judges, the pool closes connections. */
static struct up_server *server_of_x(struct proxy *px, const struct xfer *x)
{
    return &px->groups[x->group].servers[x->server];
}

static struct up_server *pooled_server(struct proxy *px, const struct up_conn *uc)
{
    return &px->groups[uc->up_id / CONFIG_MAX_UPSTREAM_SERVERS]
                .servers[uc->up_id % CONFIG_MAX_UPSTREAM_SERVERS];
}

/* The scoreboard's shared entry of srv exists (and so may be used). */
static int shared(const struct proxy *px, const struct up_server *srv)
{
    return px->sb && srv->index < SB_UPSTREAMS;
}

/* Idle connections to srv in the other workers' pools. */
static uint64_t idle_elsewhere(const struct proxy *px, const struct up_server *srv)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < px->sb->nslots; i++) {
        const struct sb_slot *s = &px->sb->slots[i];
        if (s != px->step->slot && SB_GET(s->state) != SB_FREE)
            n += SB_GET(s->up[srv->index].idle);
    }
    return n;
}

void stall_arm(struct proxy *px, struct xfer *x)
{
    if (!px->stall_ms || x->sent_ms || x->up_fd < 0)
        return; /* off, or armed once already for this request */
    int64_t now = clock_now_ms();
    x->sent_ms = now ? now : 1;
    tq_arm(&px->q_stall, &px->ups[x->up_fd].stall, now);
}

void stall_disarm(struct up_conn *uc)
{
    tq_unlink(&uc->stall);
}

void stall_forget(struct proxy *px, struct xfer *x)
{
    if (!x->stall_counted)
        return;
    x->stall_counted = 0;
    __atomic_fetch_sub(&px->sb->upstream_stalled[server_of_x(px, x)->index], 1,
                       __ATOMIC_RELAXED);
}

void stall_watch_idle(struct proxy *px, struct up_conn *uc)
{
    if (px->stall_ms && shared(px, pooled_server(px, uc)))
        tq_arm(&px->q_stall, &uc->stall, clock_now_ms());
}

/* fd of this worker as an answer run names a connection (never 0). */
static uint64_t conn_id(const struct proxy *px, int fd)
{
    uint64_t slot = px->sb ? (uint64_t)(px->step->slot - px->sb->slots) : 0;
    return (slot << 32 | (uint32_t)fd) + 1;
}

/* Every worker's answers where the scoreboard keeps them, else ours. */
static struct sb_answer_run *answers_of(struct proxy *px, struct up_server *srv)
{
    return shared(px, srv) ? &px->sb->upstream_answer[srv->index] : &srv->answers;
}

void stall_answered(struct proxy *px, struct xfer *x)
{
    struct up_server *srv = server_of_x(px, x);
    stall_disarm(&px->ups[x->up_fd]);
    stall_forget(px, x);
    /* Racy across workers by design: two of them answering in turn keep
     * the run short, which is what a server with several connections
     * going is. */
    struct sb_answer_run *a = answers_of(px, srv);
    uint64_t me = conn_id(px, x->up_fd);
    if (__atomic_load_n(&a->conn, __ATOMIC_RELAXED) == me) {
        __atomic_fetch_add(&a->run, 1, __ATOMIC_RELAXED);
    } else {
        __atomic_store_n(&a->conn, me, __ATOMIC_RELAXED);
        __atomic_store_n(&a->run, 1, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&a->ms, clock_now_ms(), __ATOMIC_RELAXED);
}

uint32_t stall_idle_cap(struct proxy *px, struct up_server *srv)
{
    int64_t now = clock_now_ms();
    if (shared(px, srv) &&
        __atomic_load_n(&px->sb->upstream_nopool_until[srv->index], __ATOMIC_RELAXED) > now)
        return 0; /* another worker found it out */
    if (srv->relearn_at && now >= srv->relearn_at) {
        srv->relearn_at = 0;
        srv->idle_cap = px->keepalive;
    }
    return srv->idle_cap;
}

int stall_judge(struct proxy *px, struct xfer *x)
{
    struct up_server *srv = server_of_x(px, x);
    struct sb_answer_run *a = answers_of(px, srv);
    int answered_since = __atomic_load_n(&a->ms, __ATOMIC_RELAXED) >= x->sent_ms;
    int one_conn = answered_since && __atomic_load_n(&a->run, __ATOMIC_RELAXED) >= STALL_RUN &&
                   __atomic_load_n(&a->conn, __ATOMIC_RELAXED) != conn_id(px, x->up_fd);
    int idle_holds = !answered_since &&
                     (srv->nidle > 0 || (shared(px, srv) && idle_elsewhere(px, srv) > 0));
    if (shared(px, srv) && !x->stall_counted) {
        x->stall_counted = 1; /* other workers' idle connections close now */
        __atomic_fetch_add(&px->sb->upstream_stalled[srv->index], 1, __ATOMIC_RELAXED);
    }
    if (!one_conn && !idle_holds)
        return 0; /* slow, not starved */
    SB_ADD(px->step->slot->up[srv->index].stalls, 1);
    if (srv->idle_cap) {
        const struct upstream_group *g = px->groups[x->group].cfg;
        log_msg(LOG_WARN,
                "upstream %s server %s: no answer within %lld ms while it %s; it serves one "
                "connection at a time: no keep-alive pool for it for %d s",
                g->name, g->servers[x->server].text, (long long)px->stall_ms,
                one_conn ? "answered on another connection" : "had idle pooled connections",
                STALL_RELEARN_MS / 1000);
    }
    srv->idle_cap = 0;
    srv->relearn_at = clock_now_ms() + STALL_RELEARN_MS;
    if (shared(px, srv))
        __atomic_store_n(&px->sb->upstream_nopool_until[srv->index], srv->relearn_at,
                         __ATOMIC_RELAXED);
    return 1;
}

int stall_idle_suspect(struct proxy *px, struct up_conn *uc)
{
    struct up_server *srv = pooled_server(px, uc);
    return __atomic_load_n(&px->sb->upstream_stalled[srv->index], __ATOMIC_RELAXED) ||
           stall_idle_cap(px, srv) == 0;
}

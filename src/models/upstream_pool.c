/* The reverse proxy's upstream side that outlives an exchange: the upstream
 * groups and their servers, server choice (round-robin or least
 * connections), fail marking, non-blocking connects and the keep-alive
 * pool of idle connections per worker and server. Upstream connections
 * have their own struct (up_conn, in an array indexed by fd) and share the
 * loop's epoll set, their events tagged TAG_UPSTREAM. The exchange itself
 * is models/upstream_pump.c. */
#include "models/upstream.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "http/path.h"
#include "http/proxy.h"
#include "models/upstream_internal.h"
#include "proc/health.h"
#include "proc/scoreboard.h"
#include "proc/upstream_index.h"


/* ---- set-up ---- */

void up_publish(struct proxy *px, struct up_server *srv)
{
    if (srv->index >= SB_UPSTREAMS)
        return;
    struct sb_upstream *u = &px->step->slot->up[srv->index];
    SB_SET(u->idle, srv->nidle);
    SB_SET(u->busy, srv->active);
}

struct proxy *upstream_create(const struct proxy_env *env)
{
    const struct serve_config *cfg = env->cfg;
    if (!cfg->nroutes)
        return NULL;
    struct proxy *px = calloc(1, sizeof *px);
    if (!px)
        log_fatal("out of memory at start");
    px->cfg = cfg;
    px->step = env->step;
    px->stopping = env->stopping;
    px->rbuf = env->rbuf;
    px->in_cap = env->in_cap;
    px->max_fds = env->max_fds;
    px->drv = env->drv;
    px->drv_arg = env->drv_arg;
    /* --upstream-keepalive is per worker process: its loops share it, the
     * remainder to the first ones (one loop with 0 closes after each
     * response) */
    uint32_t loops = env->loops > 1 ? (uint32_t)env->loops : 1;
    px->keepalive = cfg->upstream_keepalive / loops +
                    ((uint32_t)env->index < cfg->upstream_keepalive % loops);
    px->least = cfg->upstream_least;
    px->ngroups = cfg->nupstreams;
    px->ucap = 2 * px->in_cap + UBUF_EXTRA;
    px->path_cap = px->in_cap + 16;
    px->path = malloc(px->path_cap);
    px->spath_cap = 3 * px->path_cap + 1; /* every byte may become %XX */
    px->spath = malloc(px->spath_cap);
    if (!px->path || !px->spath)
        log_fatal("out of memory at start");
    /* FastCGI adds a record header per 65535 body bytes a read brings
     * and the empty STDIN after it */
    px->uslack = REFRAME_SLACK + 8 * (px->in_cap / 65535 + 3);
    upstream_fcgi_init(px);
    for (int g = 0; g < cfg->nupstreams; g++) {
        px->groups[g].cfg = &cfg->upstreams[g];
        px->groups[g].codec = cfg->upstreams[g].fastcgi ? &upstream_fcgi : &upstream_http1;
        px->groups[g].servers = calloc((size_t)cfg->upstreams[g].nservers,
                                       sizeof *px->groups[g].servers);
        if (!px->groups[g].servers)
            log_fatal("out of memory at start");
        for (int s = 0; s < cfg->upstreams[g].nservers; s++) {
            struct up_server *srv = &px->groups[g].servers[s];
            srv->idle = calloc(px->keepalive ? px->keepalive : 1, sizeof(int));
            if (!srv->idle)
                log_fatal("out of memory at start");
            srv->idle_cap = px->keepalive;
            srv->index = cfg->upstreams[g].sb_index[s];
        }
    }
    /* under a master the master publishes (at start and on each reload):
     * a worker forked just before a reload would publish the old list
     * after the new one */
    if (env->sb && SB_GET(env->sb->master_pid) == getpid())
        upindex_publish(env->sb, cfg);
    px->stall_ms = cfg->upstream_stall_ms;
    px->sb = env->sb;
    tq_init(&px->q_stall, px->stall_ms);
    tq_init(&px->q_connect, cfg->proxy_connect_timeout_ms);
    tq_init(&px->q_read, cfg->proxy_read_timeout_ms);
    tq_init(&px->q_send, cfg->proxy_send_timeout_ms);
    px->ups = calloc((size_t)px->max_fds, sizeof *px->ups);
    if (!px->ups)
        log_fatal("out of memory at start");
    return px;
}

static void up_close_fd(struct proxy *px, int fd)
{
    struct up_conn *uc = &px->ups[fd];
    up_disarm(uc);
    stall_disarm(uc);
    uc->open = 0;
    uc->xfer = NULL;
    uc->gen = (uc->gen + 1) & UP_GEN_MASK;
    px->drv->forget(px->drv_arg, fd);
    close(fd);
}

const struct serve_config *upstream_config(const struct proxy *px) { return px->cfg; }

char *upstream_scratch(const struct proxy *px) { return px->rbuf; }

void upstream_destroy(struct proxy *px)
{
    if (!px)
        return;
    for (int g = 0; g < px->ngroups; g++) {
        for (int s = 0; s < px->groups[g].cfg->nservers; s++) {
            struct up_server *srv = &px->groups[g].servers[s];
            for (uint32_t i = 0; i < srv->nidle; i++)
                up_close_fd(px, srv->idle[i]);
            free(srv->idle);
        }
        free(px->groups[g].servers);
    }
    for (int i = 0; i < px->ncache; i++)
        xfer_free(px->cache[i]);
    upstream_fcgi_destroy(px);
    free(px->path);
    free(px->spath);
    free(px->ups);
    free(px);
}

/* Routes match the normalised path, as the static handler sees it: a
 * "/x/../api/" is an /api/ request, "/api/../x" is not (nor is a path
 * that does not normalise: the static handler answers that one). The
 * upstream still gets the target as the client sent it, as nginx does,
 * unless the route strips its prefix (upstream_path). */
int upstream_route(struct proxy *px, const struct http_request *req)
{
    const struct serve_config *cfg = px->cfg;
    if (!req->path.len || req->path.p[0] != '/')
        return -1;
    int n = path_normalize(req->path.p, req->path.len, px->path, px->path_cap);
    if (n < 0)
        return -1;
    int route = proxy_route_match(cfg->routes, cfg->nroutes, px->path, (size_t)n);
    return route >= 0 ? route : upstream_fcgi_route(px, req, (size_t)n);
}

/* ---- upstream servers and connections ---- */

struct up_server *server_of(struct proxy *px, const struct xfer *x)
{
    return &px->groups[x->group].servers[x->server];
}

/* Did the master's health check (proc/health.h) find srv down? */
static int health_down(const struct proxy *px, const struct up_server *srv)
{
    return px->sb && srv->index < SB_UPSTREAMS &&
           SB_GET(px->sb->upstream_health[srv->index]) == HEALTH_DOWN;
}

/* Round-robin, or the fewest active exchanges (ties rotate). A server
 * marked down is skipped until its fail timeout passes; in a group of one
 * it is always tried, as in nginx. With use_health, so is a server whose
 * health check failed. */
static int pick_among(struct proxy *px, int group, int use_health)
{
    struct up_group *g = &px->groups[group];
    int n = g->cfg->nservers, best = -1;
    int64_t now = clock_now_ms();
    for (int i = 0; i < n; i++) {
        int k = (int)((g->next + (uint32_t)i) % (uint32_t)n);
        struct up_server *s = &g->servers[k];
        if (n > 1 && (s->down_until > now || (use_health && health_down(px, s))))
            continue;
        if (!px->least) {
            best = k;
            break;
        }
        if (best < 0 || s->active < g->servers[best].active)
            best = k;
    }
    if (best >= 0)
        g->next = px->least ? g->next + 1 : (uint32_t)best + 1;
    return best;
}

/* Healthy servers first; when every one failed its health check, they are
 * tried anyway (as nginx does when all are down): a check path that broke
 * while the application still answers must not turn all traffic into 502. */
static int pick_server(struct proxy *px, int group)
{
    int s = pick_among(px, group, 1);
    return s >= 0 ? s : pick_among(px, group, 0);
}

void mark_down(struct proxy *px, struct xfer *x, const char *why)
{
    const struct upstream_group *g = px->groups[x->group].cfg;
    server_of(px, x)->down_until = clock_now_ms() + px->cfg->upstream_fail_timeout_ms;
    if (g->nservers == 1) /* a group of one is never skipped: there is no other */
        log_msg(LOG_WARN, "upstream %s server %s: %s", g->name, g->servers[x->server].text,
                why);
    else
        log_msg(LOG_WARN, "upstream %s server %s: %s; skipped for %lld ms", g->name,
                g->servers[x->server].text, why, (long long)px->cfg->upstream_fail_timeout_ms);
}

void up_arm(struct proxy *px, struct up_conn *uc, int q)
{
    struct timerq *tq = q == QU_CONNECT ? &px->q_connect : q == QU_READ ? &px->q_read : &px->q_send;
    tq_arm(tq, &uc->timer, clock_now_ms());
    uc->queue = (uint8_t)q;
}

void up_disarm(struct up_conn *uc)
{
    tq_unlink(&uc->timer);
    uc->queue = QU_NONE;
}

/* Gives the upstream connection back: to the pool when it can carry
 * another request, else closed. */
void up_release(struct proxy *px, struct xfer *x, int reuse)
{
    if (x->up_fd < 0)
        return;
    struct up_server *srv = server_of(px, x);
    if (x->counted)
        srv->active--;
    x->counted = 0;
    stall_forget(px, x);
    struct up_conn *uc = &px->ups[x->up_fd];
    if (reuse && !x->connecting && srv->nidle < stall_idle_cap(px, srv)) {
        up_disarm(uc);
        stall_disarm(uc);
        uc->xfer = NULL;
        uc->up_id = (uint16_t)(x->group * CONFIG_MAX_UPSTREAM_SERVERS + x->server);
        srv->idle[srv->nidle++] = x->up_fd;
        stall_watch_idle(px, uc);
    } else {
        up_close_fd(px, x->up_fd);
    }
    x->up_fd = -1;
    x->connecting = 0;
    up_publish(px, srv);
}

/* A new non-blocking connection to a for x, watched by the loop (tagged
 * TAG_UPSTREAM). Returns 0 or the errno that stopped it. */
static int up_open(struct proxy *px, struct xfer *x, const struct listen_addr *a)
{
    int fd = socket(a->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return errno;
    if (fd >= px->max_fds) {
        close(fd);
        return EMFILE;
    }
    if (a->family != AF_UNIX) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    int rc = connect(fd, (const struct sockaddr *)&a->ss, a->len);
    int err = rc == 0 ? 0 : errno;
    if (rc == 0 || err == EINPROGRESS) {
        struct up_conn *uc = &px->ups[fd];
        uint32_t gen = (uc->gen + 1) & UP_GEN_MASK;
        memset(uc, 0, sizeof *uc);
        uc->gen = gen;
        int rc_watch = px->drv->watch(px->drv_arg, fd, gen);
        if (rc_watch == 0) {
            uc->open = 1;
            uc->xfer = x;
            x->up_fd = fd;
            x->connecting = rc != 0;
            if (x->connecting)
                up_arm(px, uc, QU_CONNECT);
            return 0;
        }
        err = -rc_watch;
    }
    close(fd);
    return err;
}

/* Opens (or takes from the pool) a connection to a server of x's group.
 * Returns 0, or -1 when no server can be reached now. */
int up_connect(struct proxy *px, struct xfer *x)
{
    const struct upstream_group *gc = px->groups[x->group].cfg;
    while (x->tries < gc->nservers) {
        int s = pick_server(px, x->group);
        if (s < 0)
            return -1;
        x->server = s;
        struct up_server *srv = server_of(px, x);
        srv->active++;
        x->counted = 1;
        x->got_bytes = 0;
        x->up_readable = 0; /* nothing comes before the request: wait for the edge */
        x->up_wdead = 0;
        x->up_unread = 0;
        x->up_read_full = 0;
        while (srv->nidle) {
            int fd = srv->idle[--srv->nidle];
            /* A request that may not go again (a POST) looks first: the
             * event saying the server closed the connection, or sent on
             * it, may wait behind that request's in the same wakeup, and
             * sent on it the request fails with no retry (502). A retried
             * request pays no recv. */
            if (!x->may_retry && !up_fd_silent(fd)) {
                up_close_fd(px, fd);
                continue;
            }
            x->up_fd = fd;
            px->ups[x->up_fd].xfer = x;
            stall_disarm(&px->ups[x->up_fd]);
            x->reused = 1;
            x->connecting = 0;
            up_publish(px, srv);
            return 0;
        }
        x->reused = 0;
        int err = up_open(px, x, &gc->servers[s]);
        if (!err) {
            up_publish(px, srv);
            return 0;
        }
        srv->active--;
        x->counted = 0;
        up_publish(px, srv); /* pooled ones a POST found dead closed above */
        x->tries++;
        if (err == EAGAIN) {
            /* a unix socket whose listen queue is full: every worker of
             * the server is busy, which is no failure to mark it down for */
            x->busy = 1;
            log_msg(LOG_WARN, "upstream %s server %s: busy (listen queue full)", gc->name,
                    gc->servers[s].text);
            continue;
        }
        if (err == EMFILE || err == ENFILE || err == ENOMEM || err == ENOBUFS) {
            log_msg(LOG_ERROR, "upstream connect: %s", strerror(err));
            return -1; /* our limit, not the server's fault */
        }
        mark_down(px, x, strerror(err));
    }
    return -1;
}

void up_idle_closed(struct proxy *px, struct up_conn *uc)
{
    int fd = (int)(uc - px->ups);
    struct up_server *srv = &px->groups[uc->up_id / CONFIG_MAX_UPSTREAM_SERVERS]
                                 .servers[uc->up_id % CONFIG_MAX_UPSTREAM_SERVERS];
    for (uint32_t i = 0; i < srv->nidle; i++)
        if (srv->idle[i] == fd) {
            srv->idle[i] = srv->idle[--srv->nidle];
            break;
        }
    up_close_fd(px, fd);
    up_publish(px, srv);
}

void up_close_idle(struct proxy *px, struct up_server *srv)
{
    while (srv->nidle)
        up_close_fd(px, srv->idle[--srv->nidle]);
    up_publish(px, srv);
}

void up_stall_expire(struct proxy *px)
{
    struct tq_node *n;
    while ((n = tq_pop_expired(&px->q_stall, clock_now_ms())) != NULL) {
        struct up_conn *uc = container_of(n, struct up_conn, stall);
        if (!uc->xfer) {
            if (stall_idle_suspect(px, uc))
                up_idle_closed(px, uc);
            else
                stall_watch_idle(px, uc);
        } else if (!uc->xfer->got_bytes && stall_judge(px, uc->xfer)) {
            up_close_idle(px, server_of(px, uc->xfer));
        }
    }
}


/* A pooled connection has nothing to say: anything readable (the close
 * above all) ends it, as its event does in the event loop. The stall
 * checks that are due run here too (upstream_stall.c). */
void upstream_sweep_idle(struct proxy *px, uint32_t (*noted)(int fd))
{
    up_stall_expire(px);
    for (int g = 0; g < px->ngroups; g++) {
        for (int s = 0; s < px->groups[g].cfg->nservers; s++) {
            struct up_server *srv = &px->groups[g].servers[s];
            for (uint32_t i = srv->nidle; i-- > 0;) {
                /* a recv for every idle connection each time the thread
                 * sleeps was 20 syscalls a proxied request (bench/RESULTS.md
                 * section 21) */
                if (!noted(srv->idle[i]))
                    continue;
                if (!up_fd_silent(srv->idle[i]))
                    up_idle_closed(px, &px->ups[srv->idle[i]]);
            }
        }
    }
}

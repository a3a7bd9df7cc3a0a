#include "models/step.h"

#include <netinet/in.h>
#include <string.h>

#include "core/clock.h"
#include "net/acl.h"
#include "http/pp.h"

static void set_peer(struct step_conn *c, const struct sockaddr_storage *peer)
{
    if (peer && peer->ss_family == AF_INET) {
        c->peer_family = AF_INET;
        memcpy(c->peer, &((const struct sockaddr_in *)peer)->sin_addr, 4);
        c->peer_port = ((const struct sockaddr_in *)peer)->sin_port;
    } else if (peer && peer->ss_family == AF_INET6) {
        c->peer_family = AF_INET6;
        memcpy(c->peer, &((const struct sockaddr_in6 *)peer)->sin6_addr, 16);
        c->peer_port = ((const struct sockaddr_in6 *)peer)->sin6_port;
    }
}

void step_peer(const struct step_conn *c, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof *ss);
    ss->ss_family = c->peer_family;
    if (c->peer_family == AF_INET) {
        memcpy(&((struct sockaddr_in *)ss)->sin_addr, c->peer, 4);
        ((struct sockaddr_in *)ss)->sin_port = c->peer_port;
    } else if (c->peer_family == AF_INET6) {
        memcpy(&((struct sockaddr_in6 *)ss)->sin6_addr, c->peer, 16);
        ((struct sockaddr_in6 *)ss)->sin6_port = c->peer_port;
    }
}

void step_conn_init(struct step_conn *c, const struct step_ctx *x,
                    const struct sockaddr_storage *peer, int unix_client, int pp)
{
    memset(c, 0, sizeof *c);
    c->await_pp = (uint8_t)pp;
    set_peer(c, peer);
    c->status_ok = (uint8_t)acl_allows(&x->cfg->status_allow, unix_client, peer);
}

/* A request's duration: from the loop iteration that delivered the first
 * bytes of its head (the cached clock, read once per wakeup) to now, when
 * its answer is planned (static: the driver's write follows at once) or
 * its proxy exchange ended (the last byte went to the client). */
static uint64_t elapsed_us(const struct step_conn *c)
{
    int64_t d = c->head_us ? clock_fresh_us() - c->head_us : 0;
    return d > 0 ? (uint64_t)d : 0;
}

void step_account(struct step_ctx *x, const struct step_conn *c,
                  const struct http_request *req, unsigned status, uint64_t bytes)
{
    lat_record(&x->slot->latency, elapsed_us(c));
    SB_ADD(x->slot->requests, 1);
    SB_ADD(x->slot->status[status / 100 % 6], 1);
    if (x->alog && alog_on(x->alog))
        alog_record_addr(x->alog, c->peer_family, c->peer, req, status, bytes);
}

/* A listener behind a load balancer: the connection starts with a PROXY
 * protocol header naming the real client. Returns its length, 0 while it
 * is incomplete, -1 when the bytes are not one. */
static long take_pp_header(const struct step_ctx *x, struct step_conn *c, const char *in,
                           size_t len)
{
    struct pp_info info;
    int k = pp_parse(in, len, &info);
    if (k == PP_INCOMPLETE)
        return len < PP_V2_MAX ? 0 : -1;
    if (k < 0)
        return -1;
    c->await_pp = 0;
    if (!info.local) {
        set_peer(c, &info.src);
        c->status_ok = (uint8_t)acl_allows(&x->cfg->status_allow, 0, &info.src);
    }
    return k;
}

long step_take_pp(const struct step_ctx *x, struct step_conn *c, const char *in, size_t len)
{
    return take_pp_header(x, c, in, len);
}

static uint64_t plan_bytes(const struct http_plan *p)
{
    return p->body_len + p->inline_len + (uint64_t)(p->file ? p->file_len : 0);
}

/* Answers the request parsed from in[0..n): a static file, an error, or
 * the status page. Starts reading past its body when it has one. */
static void answer(struct step_ctx *x, struct step_conn *c, struct http_request *req,
                   struct http_out *out, struct step_result *r)
{
    const struct http_config *hc = x->http->cfg;
    c->nreq++;
    int may_keepalive = !x->stopping && c->nreq < hc->keepalive_requests;
    http_handle(x->http, req, may_keepalive, c->status_ok, out, &r->plan);
    if (!r->plan.close && (req->content_length > 0 || req->chunked)) {
        body_skip_start(&c->skip, req->content_length, req->chunked, hc->max_header_size);
        body_clock_start(&c->body, clock_now_ms());
        r->body_started = 1;
    }
}

void step_put_back(struct step_conn *c)
{
    c->nreq--;
    c->next_pipelined = c->this_pipelined;
}

void step_saw_next(struct step_conn *c, const char *in, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (in[i] != '\r' && in[i] != '\n') {
            c->next_pipelined = 1;
            return;
        }
    }
}

enum step_action step_next(struct step_ctx *x, struct step_conn *c, const char *in,
                           size_t len, struct http_request *req, struct http_out *out,
                           struct step_result *r)
{
    const struct http_config *hc = x->http->cfg;
    size_t pos = 0;
    r->used = 0;
    r->body_started = 0;
    if (c->closing)
        return STEP_MORE;
    if (c->await_pp) {
        long k = take_pp_header(x, c, in, len);
        if (k < 0)
            return STEP_CLOSE;
        if (k == 0)
            return STEP_MORE;
        pos = (size_t)k;
    }
    if (body_skip_active(&c->skip) && pos < len) {
        long n = body_skip(&c->skip, in + pos, len - pos, hc->max_body_size);
        if (n < 0) {
            /* broken or oversized chunked body: its answer went out, and
             * the peer may still be sending: drain before the close, lest
             * a reset destroy that answer (linger.h) */
            c->closing = 1;
            c->linger = 1;
            r->used = len;
            return STEP_CLOSE;
        }
        body_clock_add(&c->body, (size_t)n);
        pos += (size_t)n;
    }
    r->used = pos;
    if (pos == len || body_skip_active(&c->skip))
        return STEP_MORE;
    if (c->head_of != c->nreq + 1) {
        c->head_of = c->nreq + 1;
        c->head_us = clock_now_us();
    }
    int n = http_parse_request(in + pos, len - pos, hc->max_header_size, req);
    if (n == HTTP_PARSE_INCOMPLETE)
        return STEP_MORE;
    c->this_pipelined = c->next_pipelined;
    c->next_pipelined = 0;
    memset(&r->plan, 0, sizeof r->plan);
    if (n == HTTP_PARSE_ERROR) {
        http_handle_parse_error(req, out, &r->plan);
        r->used = len;
        req = NULL;
    } else {
        /* CONNECT is never proxied (herd makes no tunnels; nginx answers it
         * 405 too): an upstream's 2xx to it would make the connection a
         * tunnel for a client, while herd went on reading it as HTTP. */
        int route = x->route && req->method != HTTP_CONNECT ? x->route(x->route_arg, req) : -1;
        if (route >= 0 && (req->content_length < 0 ||
                           (uint64_t)req->content_length <= hc->max_body_size)) {
            /* counted and logged by the proxy when the exchange ends */
            c->nreq++;
            r->route = route;
            r->head_len = (size_t)n;
            return STEP_UPSTREAM;
        }
        r->used = pos + (size_t)n;
        answer(x, c, req, out, r);
        if (!body_skip_active(&c->skip))
            step_saw_next(c, in + r->used, len - r->used);
    }
    step_account(x, c, req, r->plan.status, plan_bytes(&r->plan));
    if (r->plan.close) {
        /* Input behind the request that closes (pipelined, or sent against
         * the close) is never read: the close would reset the connection
         * and drop what of this answer is still unsent, so drain it first,
         * as nginx lingers when more input waits (models/linger.h). */
        r->plan.linger = r->plan.linger || r->used < len;
        c->closing = 1;
        c->linger = r->plan.linger;
    }
    return STEP_ANSWER;
}

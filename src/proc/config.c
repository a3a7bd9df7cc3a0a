#include "proc/config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <netinet/in.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/regfile.h"
#include "core/units.h"
#include "proc/daemon.h"
#include "proc/config_paths.h"
#include "proc/upstream_index.h"

const char config_help[] =
    "  --listen ADDR            HOST:PORT, [V6]:PORT or unix:/path; repeatable\n"
    "                           (default 127.0.0.1:8080; port 0 picks a free one);\n"
    "                           `--listen 'ADDR tls'` serves HTTPS there\n"
    "  --tls-cert FILE          TLS: the default certificate (PEM, chain after it)\n"
    "  --tls-key FILE           TLS: its private key (PEM), read before privileges drop\n"
    "  --tls-sni NAME=CERT,KEY  TLS: another certificate for clients asking for NAME\n"
    "                           (a host name or *.domain); repeatable\n"
    "  --tls-protocols LIST     TLSv1.2 and/or TLSv1.3 (default both)\n"
    "  --tls-ciphers LIST       TLS 1.2 ciphers, OpenSSL syntax (default: ECDHE with\n"
    "                           AES-GCM or ChaCha20-Poly1305 only)\n"
    "  --tls-session-timeout DUR  session tickets live this long; their keys, shared\n"
    "                           by every worker, rotate as often (default 1h)\n"
    "  --docroot DIR            the files to serve (or the first argument; default .)\n"
    "  --config FILE            read settings from FILE (`name = value` lines; its\n"
    "                           relative paths start at its folder); flags override it\n"
    "  --check-config FILE      validate FILE, its docroot and log folders: exit 0,\n"
    "                           or print FILE:LINE (or FILE) and a reason, exit 2\n"
    "  --workers N              worker processes, 1..128 (default: one per CPU)\n"
    "  --model NAME             how connections reach the HTTP code: reuseport (default),\n"
    "                           prefork, dispatch, threads, coro, uring (io_uring),\n"
    "                           iterative, or single (one process, no master)\n"
    "  --threads N              threads and coro: kernel threads in the one worker\n"
    "                           process, 1..128 (default: --workers, else one per CPU)\n"
    "  --coro-stack SIZE        coro: stack per connection, virtual (default 64k)\n"
    "  --accept-herd            prefork: wake every worker per connection (a demo)\n"
    "  --worker-cpus auto|none  auto: worker i runs on the i-th CPU; reuseport and uring\n"
    "                           also steer each connection to the worker on the CPU that\n"
    "                           took its SYN (SO_INCOMING_CPU); workers of several threads\n"
    "                           are not pinned (default none)\n"
    "  --dispatch rr|least      dispatch: round-robin or least connections (default rr)\n"
    "  --access-log PATH        write an access log through the logger process\n"
    "  --access-log-format F    combined (default) or json\n"
    "  --error-log PATH         the error log of every process (default: stderr)\n"
    "  --status-path PATH       serve live counters at PATH (e.g. /herd-status): JSON,\n"
    "                           ?format=prometheus|table, or a live page for browsers\n"
    "                           (?format=html or Accept: text/html)\n"
    "  --status-allow ADDR[/BITS]|unix  who may read the status page: an IPv4/IPv6\n"
    "                           address or CIDR, or unix (unix-socket clients);\n"
    "                           repeatable; default loopback and unix; others get 403\n"
    "                           (PROXY protocol listeners: the client it declares)\n"
    "  --pid-file PATH          write the master's pid here\n"
    "  --upgrade-binary PATH    the binary USR2 execs (default: the running one)\n"
    "  --daemon                 detach from the terminal\n"
    "  --user NAME, --group NAME  drop privileges after binding (when root)\n"
    "  --serve-dotfiles         serve names starting with '.' (default: 404)\n"
    "  --no-precompressed       do not serve FILE.br, FILE.zst or FILE.gz in place of\n"
    "                           FILE when Accept-Encoding allows (default: on)\n"
    "  --cache-control MATCH=VALUE  Cache-Control for files whose path ends with\n"
    "                           MATCH's *SUFFIX or starts with its /PREFIX (e.g.\n"
    "                           '*.css=public, max-age=31536000, immutable');\n"
    "                           repeatable, the longest MATCH wins\n"
    "  --expires MATCH=DUR      Expires (Date + DUR) and max-age=DUR for matching\n"
    "                           files (DUR 0 to 87600h); repeatable, longest wins\n"
    "  --error-page CODE=/PATH  answer error CODE (404, 403...) with the file PATH\n"
    "                           below the docroot; repeatable\n"
    "  --autoindex              list directories that have no index.html (HTML,\n"
    "                           at most 10000 entries)\n"
    "  --keepalive-requests N   requests per connection (default 10000)\n"
    "  --max-header-size SIZE   request line and headers (default 8k)\n"
    "  --max-body-size SIZE     request body read and discarded, else 413 (default 1m)\n"
    "  --header-timeout DUR     a request head must arrive within (default 15s)\n"
    "  --keepalive-timeout DUR  idle time between requests (default 75s)\n"
    "  --send-timeout DUR       a blocked write must progress within (default 60s)\n"
    "  --body-timeout DUR       a request body must arrive within, plus 1s for every\n"
    "                           --body-min-rate bytes received (default 60s)\n"
    "  --body-min-rate N        bytes/s a body must keep up (default 500; 0: the whole\n"
    "                           body within --body-timeout)\n"
    "  --shutdown-timeout DUR   graceful stop deadline (default 10s)\n"
    "  --upgrade-timeout DUR    a USR2 upgrade's new master must report ready within\n"
    "                           this, else it is killed (default 30s)\n"
    "  --max-connections N      open connections per worker process, split among\n"
    "                           its threads (default: what the file limit leaves,\n"
    "                           halved when a route proxies)\n"
    "  --backlog N              listen queue length (default 511)\n"
    "  --proxy-protocol         every listener expects a PROXY protocol v1/v2 header\n"
    "                           (from HAProxy, AWS NLB...); for one listener only,\n"
    "                           write `--listen 'ADDR proxy_protocol'`\n"
    "  --upstream NAME=ADDR[,ADDR...]  a group of upstream servers (unix:/path or\n"
    "                           host:port); repeatable\n"
    "  --proxy PREFIX=NAME      send requests whose path starts with PREFIX to the\n"
    "                           upstream group NAME (longest prefix wins); repeatable;\n"
    "                           NAME/ strips PREFIX (/api/x goes up as /x); PREFIX\n"
    "                           without its trailing / gets a 301 to PREFIX\n"
    "  --upstream-balance rr|least  pick servers round-robin (default) or by fewest\n"
    "                           active requests\n"
    "  --upstream-fail-timeout DUR  a server that failed is skipped this long (10s)\n"
    "  --upstream-health NAME=PATH,INTERVAL  the master sends GET PATH to each server\n"
    "                           of group NAME every INTERVAL; a non-2xx/3xx answer,\n"
    "                           no answer within INTERVAL or a failed connect marks\n"
    "                           it down (skipped) until a check passes; INTERVAL\n"
    "                           at least 100ms; repeatable\n"
    "  --upstream-keepalive N   idle upstream connections kept per worker and server\n"
    "                           (default 32; 0: close after each response)\n"
    "  --upstream-stall DUR     a request without an answer this long while its\n"
    "                           server answers on one other connection: that server\n"
    "                           serves one connection at a time, and gets no pool for\n"
    "                           30s (default 250ms; 0: never)\n"
    "  --proxy-connect-timeout DUR  connecting to an upstream (default 5s)\n"
    "  --proxy-read-timeout DUR between two reads from an upstream (default 60s)\n"
    "  --proxy-send-timeout DUR between two writes to an upstream (default 60s)\n"
    "  --proxy-pass-underscores  pass request headers whose names hold '_' to the\n"
    "                           upstreams (default: dropped; CGI/WSGI servers read\n"
    "                           X_Forwarded_For as X-Forwarded-For)\n"
    "  --fastcgi MATCH=NAME     run scripts through the FastCGI group NAME (an\n"
    "                           --upstream group: php-fpm, php-cgi under herd spawn);\n"
    "                           MATCH is *.EXT or /PREFIX/; repeatable\n"
    "  --fastcgi-index NAME     a directory's script (default index.php)\n"
    "  --fastcgi-fallback PATH  the script for paths that name no file, such as\n"
    "                           /index.php (a framework's front controller)\n"
    "  --fastcgi-param NAME=VALUE  add or override a FastCGI parameter; repeatable\n"
    "  --proxy-pass-server      pass the upstreams' Server and Date headers to clients\n"
    "                           (default: replaced by herd's own, as nginx does)\n"
    "  -v, --verbose            debug lines in the error log\n";

/* Every model herd knows; models/models.c maps them to code. */
static const char *const model_names[] = {
    "reuseport", "prefork", "dispatch", "threads", "coro", "uring", "iterative", "single",
};

void config_defaults(struct serve_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    strcpy(cfg->docroot, ".");
    strcpy(cfg->model, "reuseport");
    cfg->backlog = 511;
    cfg->http.max_header_size = 8192;
    cfg->http.max_body_size = 1024 * 1024;
    cfg->http.keepalive_requests = 10000;
    cfg->header_timeout_ms = 15000;
    cfg->keepalive_timeout_ms = 75000;
    cfg->send_timeout_ms = 60000;
    cfg->body_timeout_ms = 60000;
    cfg->body_min_rate = 500;
    cfg->shutdown_timeout_ms = 10000;
    cfg->upgrade_timeout_ms = 30000;
    cfg->upstream_keepalive = 32;
    cfg->upstream_fail_timeout_ms = 10000;
    cfg->upstream_stall_ms = 250;
    cfg->proxy_connect_timeout_ms = 5000;
    cfg->proxy_read_timeout_ms = 60000;
    cfg->proxy_send_timeout_ms = 60000;
    strcpy(cfg->fastcgi_index, "index.php");
    cfg->coro_stack = 64 * 1024;
    cfg->tls.proto_min = 2;
    cfg->tls.proto_max = 3;
    cfg->tls.session_timeout_ms = 3600 * 1000;
}

int config_has_tls(const struct serve_config *cfg)
{
    for (int i = 0; i < cfg->nlisten; i++)
        if (cfg->listen_tls[i])
            return 1;
    return 0;
}

static int copy_str(char *dst, size_t cap, const char *v, const char *name, char *err,
                    size_t errlen)
{
    if (strlen(v) >= cap) {
        snprintf(err, errlen, "%s: value too long", name);
        return -1;
    }
    strcpy(dst, v);
    return 0;
}

static int duration(const char *name, const char *v, int64_t *out, char *err, size_t errlen)
{
    if (unit_duration_ms(v, out) < 0 || *out <= 0) {
        snprintf(err, errlen, "invalid duration '%s' for %s (e.g. 500ms, 15s, 2m)", v, name);
        return -1;
    }
    return 0;
}

/* workers and threads: 1..CONFIG_MAX_WORKERS; more is refused, not cut
 * down to what the master can run behind the user's back. */
static int worker_count(const char *name, const char *v, uint64_t *out, char *err,
                        size_t errlen)
{
    if (unit_count(v, 1, UINT32_MAX, out) < 0) {
        snprintf(err, errlen, "invalid value '%s' for %s", v, name);
        return -1;
    }
    if (*out > CONFIG_MAX_WORKERS) {
        snprintf(err, errlen, "%s %s: at most %d", name, v, CONFIG_MAX_WORKERS);
        return -1;
    }
    return 0;
}

/* "ADDR", "ADDR proxy_protocol", "ADDR tls", as nginx's listen directive. */
static int listen_setting(struct serve_config *cfg, const char *v, char *err, size_t errlen)
{
    char addr[256];
    const char *sp = strchr(v, ' ');
    size_t n = sp ? (size_t)(sp - v) : strlen(v);
    if (n >= sizeof addr) {
        snprintf(err, errlen, "listen address too long: '%s'", v);
        return -1;
    }
    memcpy(addr, v, n);
    addr[n] = '\0';
    uint8_t proxy = 0, tls = 0;
    for (const char *p = sp; p && *p;) {
        while (*p == ' ')
            p++;
        size_t l = strcspn(p, " ");
        if (l == 14 && !strncmp(p, "proxy_protocol", 14))
            proxy = 1;
        else if (l == 3 && !strncmp(p, "tls", 3))
            tls = 1;
        else if (l) {
            snprintf(err, errlen,
                     "unknown listen option '%.*s' in '%s' (known: proxy_protocol, tls)",
                     (int)l, p, v);
            return -1;
        }
        p += l;
    }
    if (listen_parse(addr, &cfg->listen[cfg->nlisten], err, errlen) < 0)
        return -1;
    cfg->listen_tls[cfg->nlisten] = tls;
    cfg->listen_proxy[cfg->nlisten++] = proxy;
    return 0;
}

static int name_ok(const char *s, size_t len)
{
    if (!len || len >= UPSTREAM_NAME_MAX)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
            return 0;
    return 1;
}

static int find_upstream(const struct serve_config *cfg, const char *name)
{
    for (int i = 0; i < cfg->nupstreams; i++)
        if (!strcmp(cfg->upstreams[i].name, name))
            return i;
    return -1;
}

/* NAME=ADDR[,ADDR...]; each ADDR is unix:/path or host:port with a port. */
static int set_upstream(struct serve_config *cfg, const char *v, char *err, size_t errlen)
{
    const char *eq = strchr(v, '=');
    if (!eq || !name_ok(v, (size_t)(eq - v))) {
        snprintf(err, errlen,
                 "upstream '%s': expected NAME=ADDR[,ADDR...] (NAME of letters, digits, -_.)", v);
        return -1;
    }
    if (cfg->nupstreams == CONFIG_MAX_UPSTREAMS) {
        snprintf(err, errlen, "too many upstream groups (at most %d)", CONFIG_MAX_UPSTREAMS);
        return -1;
    }
    struct upstream_group *g = &cfg->upstreams[cfg->nupstreams];
    memset(g, 0, sizeof *g);
    memcpy(g->name, v, (size_t)(eq - v));
    if (find_upstream(cfg, g->name) >= 0) {
        snprintf(err, errlen, "upstream '%s' defined twice", g->name);
        return -1;
    }
    const char *p = eq + 1;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char addr[128];
        if (!len || len >= sizeof addr) {
            snprintf(err, errlen, "upstream %s: empty or too long address in '%s'", g->name, v);
            return -1;
        }
        if (g->nservers == CONFIG_MAX_UPSTREAM_SERVERS) {
            snprintf(err, errlen, "upstream %s: too many servers (at most %d)", g->name,
                     CONFIG_MAX_UPSTREAM_SERVERS);
            return -1;
        }
        memcpy(addr, p, len);
        addr[len] = '\0';
        struct listen_addr *a = &g->servers[g->nservers];
        char why[200];
        int bad = strncmp(addr, "unix:", 5) != 0 && !strchr(addr, ':');
        if (!bad && listen_parse(addr, a, why, sizeof why) < 0)
            bad = 1;
        if (!bad && a->family != AF_UNIX) {
            /* a port is needed, and a wildcard host names no server */
            const struct sockaddr_in *in = (const struct sockaddr_in *)&a->ss;
            const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&a->ss;
            int port = a->family == AF_INET ? in->sin_port : in6->sin6_port;
            int any = a->family == AF_INET ? in->sin_addr.s_addr == 0
                                           : IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr);
            bad = !port || any;
        }
        if (bad) {
            snprintf(err, errlen,
                     "upstream %s: bad address '%s' (unix:/path, IPv4:PORT or [IPv6]:PORT)",
                     g->name, addr);
            return -1;
        }
        g->nservers++;
        if (!comma)
            break;
        p = comma + 1;
    }
    cfg->nupstreams++;
    return 0;
}

/* PREFIX=NAME, or PREFIX=NAME/ to strip the prefix (nginx's proxy_pass
 * with a URI); the name is resolved in config_finish, so flags may name a
 * group defined later (a config file checks its own routes at its end, to
 * report FILE:LINE). */
static int set_proxy(struct serve_config *cfg, const char *v, char *err, size_t errlen)
{
    const char *eq = strrchr(v, '=');
    size_t nlen = eq ? strlen(eq + 1) : 0;
    int strip = nlen > 1 && eq[nlen] == '/';
    if (!eq || v[0] != '/' || (size_t)(eq - v) >= PROXY_PREFIX_MAX ||
        !name_ok(eq + 1, nlen - (size_t)strip)) {
        snprintf(err, errlen, "proxy '%s': expected /PREFIX=UPSTREAM or /PREFIX=UPSTREAM/", v);
        return -1;
    }
    if (cfg->nroutes == CONFIG_MAX_ROUTES) {
        snprintf(err, errlen, "too many proxy routes (at most %d)", CONFIG_MAX_ROUTES);
        return -1;
    }
    struct proxy_route *r = &cfg->routes[cfg->nroutes];
    memset(r, 0, sizeof *r);
    memcpy(r->prefix, v, (size_t)(eq - v));
    for (int i = 0; i < cfg->nroutes; i++)
        if (!strcmp(cfg->routes[i].prefix, r->prefix)) {
            snprintf(err, errlen, "proxy prefix '%s' given twice", r->prefix);
            return -1;
        }
    memcpy(cfg->route_upstream[cfg->nroutes], eq + 1, nlen - (size_t)strip);
    cfg->route_upstream[cfg->nroutes][nlen - (size_t)strip] = '\0';
    r->strip = (uint8_t)strip;
    r->group = find_upstream(cfg, cfg->route_upstream[cfg->nroutes]);
    cfg->nroutes++;
    return 0;
}

/* MATCH=NAME with MATCH "*.ext" (a suffix of the path) or "/prefix/";
 * the group is resolved in config_finish, as for --proxy. */
static int set_fastcgi(struct serve_config *cfg, const char *name, const char *v, char *err,
                       size_t errlen)
{
    (void)name;
    const char *eq = strrchr(v, '=');
    int suffix = v[0] == '*' && v[1] == '.';
    const char *m = suffix ? v + 1 : v;
    size_t mlen = eq ? (size_t)(eq - m) : 0;
    if (!eq || (!suffix && v[0] != '/') || mlen < 2 || mlen >= PROXY_PREFIX_MAX ||
        memchr(m + 1, '/', suffix ? mlen - 1 : 0) || memchr(m, '*', mlen) ||
        !name_ok(eq + 1, strlen(eq + 1))) {
        snprintf(err, errlen, "fastcgi '%s': expected *.EXT=UPSTREAM or /PREFIX/=UPSTREAM", v);
        return -1;
    }
    if (cfg->nroutes == CONFIG_MAX_ROUTES) {
        snprintf(err, errlen, "too many proxy and fastcgi routes (at most %d)",
                 CONFIG_MAX_ROUTES);
        return -1;
    }
    struct proxy_route *r = &cfg->routes[cfg->nroutes];
    memset(r, 0, sizeof *r);
    memcpy(r->prefix, m, mlen);
    r->fastcgi = 1;
    r->suffix = (uint8_t)suffix;
    strcpy(cfg->route_upstream[cfg->nroutes], eq + 1);
    r->group = find_upstream(cfg, eq + 1);
    cfg->nroutes++;
    return 0;
}

static int set_fastcgi_param(struct serve_config *cfg, const char *name, const char *v,
                             char *err, size_t errlen)
{
    (void)name;
    const char *eq = strchr(v, '=');
    if (!eq || eq == v || strlen(v) >= FASTCGI_PARAM_MAX) {
        snprintf(err, errlen, "fastcgi-param '%s': expected NAME=VALUE (under %d bytes)", v,
                 FASTCGI_PARAM_MAX);
        return -1;
    }
    if (cfg->nfastcgi_params == CONFIG_MAX_FASTCGI_PARAMS) {
        snprintf(err, errlen, "too many fastcgi-param (at most %d)", CONFIG_MAX_FASTCGI_PARAMS);
        return -1;
    }
    strcpy(cfg->fastcgi_params[cfg->nfastcgi_params++], v);
    return 0;
}

/* A URI path of a script: "/index.php". */
static int set_fastcgi_fallback(struct serve_config *cfg, const char *name, const char *v,
                                char *err, size_t errlen)
{
    (void)name;
    if (v[0] != '/' || strlen(v) >= sizeof cfg->fastcgi_fallback || strstr(v, "/..") ||
        strchr(v, '?')) {
        snprintf(err, errlen, "fastcgi-fallback '%s': expected a script's path such as /index.php",
                 v);
        return -1;
    }
    strcpy(cfg->fastcgi_fallback, v);
    return 0;
}

static int set_fastcgi_index(struct serve_config *cfg, const char *name, const char *v,
                             char *err, size_t errlen)
{
    (void)name;
    if (strchr(v, '/') || v[0] == '.' || strlen(v) >= sizeof cfg->fastcgi_index) {
        snprintf(err, errlen, "fastcgi-index '%s': expected a file name such as index.php", v);
        return -1;
    }
    strcpy(cfg->fastcgi_index, v);
    return 0;
}

static int set_listen(struct serve_config *cfg, const char *name, const char *v, char *err,
                      size_t errlen)
{
    (void)name;
    if (cfg->nlisten == CONFIG_MAX_LISTEN) {
        snprintf(err, errlen, "too many listen addresses (at most %d)", CONFIG_MAX_LISTEN);
        return -1;
    }
    return listen_setting(cfg, v, err, errlen);
}

static int set_tls_sni(struct serve_config *cfg, const char *name, const char *v, char *err,
                       size_t errlen)
{
    (void)name;
    return tls_conf_add_sni(&cfg->tls, v, err, errlen);
}

static int set_tls_protocols(struct serve_config *cfg, const char *name, const char *v,
                             char *err, size_t errlen)
{
    (void)name;
    return tls_conf_protocols(&cfg->tls, v, err, errlen);
}

static int set_model(struct serve_config *cfg, const char *name, const char *v, char *err,
                     size_t errlen)
{
    (void)name;
    for (size_t k = 0; k < sizeof model_names / sizeof model_names[0]; k++)
        if (!strcmp(v, model_names[k])) {
            strcpy(cfg->model, v);
            return 0;
        }
    snprintf(err, errlen,
             "unknown model '%s' (reuseport, prefork, dispatch, threads, coro, uring, iterative, single)",
             v);
    return -1;
}

static int set_log_format(struct serve_config *cfg, const char *name, const char *v,
                          char *err, size_t errlen)
{
    if (!strcmp(v, "combined"))
        cfg->access_log_format = ACCESS_LOG_COMBINED;
    else if (!strcmp(v, "json"))
        cfg->access_log_format = ACCESS_LOG_JSON;
    else {
        snprintf(err, errlen, "invalid value '%s' for %s", v, name);
        return -1;
    }
    return 0;
}

static int set_worker_cpus(struct serve_config *cfg, const char *name, const char *v,
                           char *err, size_t errlen)
{
    (void)name;
    if (strcmp(v, "auto") && strcmp(v, "none")) {
        snprintf(err, errlen, "worker-cpus '%s': expected auto or none", v);
        return -1;
    }
    cfg->worker_cpus = v[0] == 'a';
    return 0;
}

static int set_status_path(struct serve_config *cfg, const char *name, const char *v,
                           char *err, size_t errlen)
{
    (void)name;
    if (v[0] != '/') {
        snprintf(err, errlen, "status-path must start with '/' (got '%s')", v);
        return -1;
    }
    if (strlen(v) >= sizeof cfg->http.status_path) {
        snprintf(err, errlen, "status-path is longer than %zu bytes",
                 sizeof cfg->http.status_path - 1);
        return -1;
    }
    strcpy(cfg->http.status_path, v);
    return 0;
}

static int set_status_allow(struct serve_config *cfg, const char *name, const char *v,
                            char *err, size_t errlen)
{
    (void)name;
    return acl_add(&cfg->status_allow, v, err, errlen);
}

static int set_upstream_group(struct serve_config *cfg, const char *name, const char *v,
                              char *err, size_t errlen)
{
    (void)name;
    return set_upstream(cfg, v, err, errlen);
}

/* NAME=PATH,INTERVAL: PATH an origin-form target, INTERVAL a duration. The
 * group is looked up in config_finish (it may be defined after). */
static int set_upstream_health(struct serve_config *cfg, const char *name, const char *v,
                               char *err, size_t errlen)
{
    const char *eq = strchr(v, '=');
    const char *comma = eq ? strrchr(eq, ',') : NULL;
    size_t plen = comma ? (size_t)(comma - eq - 1) : 0;
    struct upstream_health h = {0};
    int bad = !eq || !name_ok(v, (size_t)(eq - v)) || !comma || plen == 0 ||
              plen >= sizeof h.path || eq[1] != '/';
    for (size_t i = 0; !bad && i < plen; i++)
        bad = (unsigned char)eq[1 + i] <= ' ' || eq[1 + i] == 0x7f;
    if (bad) {
        snprintf(err, errlen, "%s '%s': expected NAME=/PATH,INTERVAL (e.g. api=/health,5s)",
                 name, v);
        return -1;
    }
    if (duration(name, comma + 1, &h.interval_ms, err, errlen) < 0)
        return -1;
    /* The interval is also the check's deadline: below this a busy backend
     * is marked down for a slow answer, and the master's connects every
     * few milliseconds become load of their own. */
    if (h.interval_ms < HEALTH_MIN_INTERVAL_MS) {
        snprintf(err, errlen, "%s '%s': INTERVAL below the minimum of %dms", name, v,
                 HEALTH_MIN_INTERVAL_MS);
        return -1;
    }
    memcpy(h.group, v, (size_t)(eq - v));
    memcpy(h.path, eq + 1, plen);
    int i = 0;
    while (i < cfg->nhealth && strcmp(cfg->health[i].group, h.group))
        i++; /* a group's later line wins */
    if (i == CONFIG_MAX_UPSTREAMS) {
        snprintf(err, errlen, "too many %s lines (at most %d)", name, CONFIG_MAX_UPSTREAMS);
        return -1;
    }
    cfg->health[i] = h;
    if (i == cfg->nhealth)
        cfg->nhealth++;
    return 0;
}

/* Each upstream-health line onto its group, which must exist and speak HTTP. */
static int resolve_health(struct serve_config *cfg, char *err, size_t errlen)
{
    for (int i = 0; i < cfg->nhealth; i++) {
        const struct upstream_health *h = &cfg->health[i];
        int g = find_upstream(cfg, h->group);
        if (g < 0) {
            snprintf(err, errlen, "upstream-health %s: unknown upstream '%s' (define it "
                     "with upstream)", h->group, h->group);
            return -1;
        }
        if (cfg->upstreams[g].fastcgi) {
            snprintf(err, errlen, "upstream-health %s: the group speaks FastCGI; health "
                     "checks speak HTTP", h->group);
            return -1;
        }
        memcpy(cfg->upstreams[g].health_path, h->path, sizeof h->path);
        cfg->upstreams[g].health_interval_ms = h->interval_ms;
    }
    return 0;
}

static int set_proxy_route(struct serve_config *cfg, const char *name, const char *v,
                           char *err, size_t errlen)
{
    (void)name;
    return set_proxy(cfg, v, err, errlen);
}

static int set_cache_control(struct serve_config *cfg, const char *name, const char *v,
                             char *err, size_t errlen)
{
    (void)name;
    return cache_rule_add(&cfg->http.cache, 0, v, err, errlen);
}

static int set_expires(struct serve_config *cfg, const char *name, const char *v, char *err,
                       size_t errlen)
{
    (void)name;
    return cache_rule_add(&cfg->http.cache, 1, v, err, errlen);
}

static int set_error_page(struct serve_config *cfg, const char *name, const char *v,
                          char *err, size_t errlen)
{
    (void)name;
    return error_page_add(&cfg->http.error_pages, v, err, errlen);
}

/* How a setting's value is read. Most settings only differ in the field
 * and the bounds, so they are rows of one table; the rest have a setter. */
enum value_kind {
    V_FLAG,      /* no value: the uint8_t field becomes 1 */
    V_STRING,    /* copied into a char array of `size` bytes */
    V_DURATION,  /* int64_t milliseconds, > 0 */
    V_DURATION0, /* the same, or 0 (or 0s, 0ms): off */
    V_COUNT,     /* an integer in min..max */
    V_SIZE,      /* bytes with k/m/g, in min..max */
    V_WORKERS,   /* 1..CONFIG_MAX_WORKERS, the bound named in the error */
    V_RR_LEAST,  /* rr or least: the uint8_t field becomes 0 or 1 */
    V_SETTER,    /* set() does it all */
};

typedef int setter_fn(struct serve_config *cfg, const char *name, const char *v, char *err,
                      size_t errlen);

struct setting {
    const char *name;
    enum value_kind kind;
    size_t off, size;     /* the field in struct serve_config */
    uint64_t min, max;    /* V_COUNT and V_SIZE */
    setter_fn *set;       /* V_SETTER */
};

#define FIELD(f) offsetof(struct serve_config, f), sizeof(((struct serve_config *)0)->f)
#define FLAG(n, f) {n, V_FLAG, FIELD(f), 0, 0, NULL}
#define STRING(n, f) {n, V_STRING, FIELD(f), 0, 0, NULL}
#define DURATION(n, f) {n, V_DURATION, FIELD(f), 0, 0, NULL}
#define DURATION_OR_OFF(n, f) {n, V_DURATION0, FIELD(f), 0, 0, NULL}
#define COUNT(n, f, lo, hi) {n, V_COUNT, FIELD(f), lo, hi, NULL}
#define SIZE(n, f, lo, hi) {n, V_SIZE, FIELD(f), lo, hi, NULL}
#define WORKERS(n, f) {n, V_WORKERS, FIELD(f), 0, 0, NULL}
#define RR_LEAST(n, f) {n, V_RR_LEAST, FIELD(f), 0, 0, NULL}
#define SETTER(n, fn) {n, V_SETTER, 0, 0, 0, 0, fn}

static const struct setting settings[] = {
    SETTER("listen", set_listen),
    STRING("docroot", docroot),
    WORKERS("workers", workers),
    SETTER("model", set_model),
    STRING("access-log", access_log),
    SETTER("access-log-format", set_log_format),
    STRING("error-log", error_log),
    SETTER("status-path", set_status_path),
    SETTER("status-allow", set_status_allow),
    STRING("pid-file", pid_file),
    FLAG("daemon", daemon),
    STRING("user", user),
    STRING("group", group),
    FLAG("serve-dotfiles", http.serve_dotfiles),
    FLAG("no-precompressed", http.no_precompressed),
    SETTER("cache-control", set_cache_control),
    SETTER("expires", set_expires),
    SETTER("error-page", set_error_page),
    FLAG("autoindex", http.autoindex),
    COUNT("keepalive-requests", http.keepalive_requests, 1, UINT32_MAX),
    SIZE("max-header-size", http.max_header_size, 256, 1024 * 1024),
    SIZE("max-body-size", http.max_body_size, 0, UINT64_MAX),
    DURATION("header-timeout", header_timeout_ms),
    DURATION("keepalive-timeout", keepalive_timeout_ms),
    DURATION("send-timeout", send_timeout_ms),
    DURATION("body-timeout", body_timeout_ms),
    SIZE("body-min-rate", body_min_rate, 0, UINT32_MAX),
    DURATION("shutdown-timeout", shutdown_timeout_ms),
    DURATION("upgrade-timeout", upgrade_timeout_ms),
    COUNT("max-connections", max_connections, 1, 1 << 24),
    FLAG("verbose", verbose),
    FLAG("accept-herd", accept_herd),
    SETTER("worker-cpus", set_worker_cpus),
    RR_LEAST("dispatch", dispatch_least),
    COUNT("backlog", backlog, 1, 65535),
    FLAG("proxy-protocol", proxy_protocol),
    STRING("upgrade-binary", upgrade_binary),
    SETTER("upstream", set_upstream_group),
    SETTER("proxy", set_proxy_route),
    SETTER("upstream-health", set_upstream_health),
    RR_LEAST("upstream-balance", upstream_least),
    DURATION("upstream-fail-timeout", upstream_fail_timeout_ms),
    DURATION_OR_OFF("upstream-stall", upstream_stall_ms),
    COUNT("upstream-keepalive", upstream_keepalive, 0, 4096),
    DURATION("proxy-connect-timeout", proxy_connect_timeout_ms),
    DURATION("proxy-read-timeout", proxy_read_timeout_ms),
    DURATION("proxy-send-timeout", proxy_send_timeout_ms),
    FLAG("proxy-pass-underscores", proxy_pass_underscores),
    SETTER("fastcgi", set_fastcgi),
    SETTER("fastcgi-index", set_fastcgi_index),
    SETTER("fastcgi-fallback", set_fastcgi_fallback),
    SETTER("fastcgi-param", set_fastcgi_param),
    FLAG("proxy-pass-server", proxy_pass_server),
    WORKERS("threads", threads),
    STRING("tls-cert", tls.cert),
    STRING("tls-key", tls.key),
    SETTER("tls-sni", set_tls_sni),
    SETTER("tls-protocols", set_tls_protocols),
    STRING("tls-ciphers", tls.ciphers),
    DURATION("tls-session-timeout", tls.session_timeout_ms),
    /* Below 16k the HTTP code itself overflows; above 8m use threads. */
    SIZE("coro-stack", coro_stack, 16 * 1024, 8 * 1024 * 1024),
};

#define NSETTINGS (sizeof settings / sizeof settings[0])

static const struct setting *find_setting(const char *name)
{
    for (size_t i = 0; i < NSETTINGS; i++)
        if (!strcmp(settings[i].name, name))
            return &settings[i];
    return NULL;
}

int config_known(const char *name)
{
    const struct setting *s = find_setting(name);
    return !s ? 0 : s->kind == V_FLAG ? 1 : 2;
}

/* Stores n in an unsigned or int field of 1, 4 or 8 bytes; the table's
 * bounds already keep n in the field's range. */
static void store_number(void *field, size_t size, uint64_t n)
{
    uint8_t u8 = (uint8_t)n;
    uint32_t u32 = (uint32_t)n;
    if (size == 1)
        memcpy(field, &u8, 1);
    else if (size == 4)
        memcpy(field, &u32, 4);
    else
        memcpy(field, &n, 8);
}

/* Reads v as the number a V_COUNT, V_SIZE, V_WORKERS or V_RR_LEAST row
 * wants. Returns 0, or -1 with the reason in err. */
static int parse_number(const struct setting *s, const char *v, uint64_t *n, char *err,
                        size_t errlen)
{
    int bad = 0;
    switch (s->kind) {
    case V_WORKERS:
        return worker_count(s->name, v, n, err, errlen);
    case V_COUNT:
        bad = unit_count(v, s->min, s->max, n) < 0;
        break;
    case V_SIZE:
        bad = unit_size(v, n) < 0 || *n < s->min || *n > s->max;
        break;
    case V_RR_LEAST:
        *n = !strcmp(v, "least");
        bad = !*n && strcmp(v, "rr");
        break;
    default:
        bad = 1;
    }
    if (bad) {
        snprintf(err, errlen, "invalid value '%s' for %s", v, s->name);
        return -1;
    }
    return 0;
}

static int apply(struct serve_config *cfg, const struct setting *s, const char *v, char *err,
                 size_t errlen)
{
    char *field = (char *)cfg + s->off;
    uint64_t n;
    switch (s->kind) {
    case V_FLAG:
        *(uint8_t *)field = 1;
        return 0;
    case V_STRING:
        return copy_str(field, s->size, v, s->name, err, errlen);
    case V_DURATION0:
        if (unit_duration_ms(v, (int64_t *)(void *)field) == 0 && !*(int64_t *)(void *)field)
            return 0;
        /* fall through */
    case V_DURATION:
        return duration(s->name, v, (int64_t *)(void *)field, err, errlen);
    case V_SETTER:
        return s->set(cfg, s->name, v, err, errlen);
    default:
        if (parse_number(s, v, &n, err, errlen) < 0)
            return -1;
        store_number(field, s->size, n);
        return 0;
    }
}

int config_set(struct serve_config *cfg, const char *name, const char *v, char *err,
               size_t errlen)
{
    const struct setting *s = find_setting(name);
    if (!s) {
        snprintf(err, errlen, "unknown setting '%s'", name);
        return -1;
    }
    if (s->kind != V_FLAG && !v) {
        snprintf(err, errlen, "%s needs a value", name);
        return -1;
    }
    if (s->kind == V_FLAG && v) {
        snprintf(err, errlen, "%s takes no value", name);
        return -1;
    }
    return apply(cfg, s, v, err, errlen);
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

/* Reads one line (without its newline) into buf. Returns its length, -1
 * at the end of the file, -2 when it does not fit in n - 1 bytes (the
 * rest of it is left unread). Unlike fgets, it says where a NUL byte is:
 * *nul is the offset of the first one read, or -1. */
static long read_line(FILE *f, char *buf, size_t n, long *nul)
{
    size_t len = 0;
    int c;
    *nul = -1;
    while ((c = getc(f)) != EOF && c != '\n') {
        if (len + 1 >= n)
            return -2;
        if (c == '\0' && *nul < 0)
            *nul = (long)len;
        buf[len++] = (char)c;
    }
    if (c == EOF && len == 0)
        return -1;
    buf[len] = '\0';
    return (long)len;
}

int config_load(struct serve_config *cfg, const char *path, char *err, size_t errlen)
{
    FILE *f = regfile_open(path);
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, regfile_strerror(errno));
        return -1;
    }
    char line[4096], why[512];
    int lineno = 0, rc = 0, first_route = cfg->nroutes;
    int route_line[CONFIG_MAX_ROUTES] = {0};
    long len, nul;
    while ((len = read_line(f, line, sizeof line, &nul)) != -1) {
        lineno++;
        if (nul >= 0) {
            /* Text tools stop at a NUL and would show a different line. */
            snprintf(err, errlen, "%s:%d: NUL byte at column %ld (a config file is text)", path,
                     lineno, nul + 1);
            rc = -1;
            break;
        }
        if (len == -2) {
            snprintf(err, errlen, "%s:%d: line too long (over %zu bytes)", path, lineno,
                     sizeof line - 1);
            rc = -1;
            break;
        }
        /* A control byte, comments included (a CR inside: a file of
         * CR-only lines reads as one line, whose settings a '#' would hide;
         * an escape) would land in values and in the reasons quoting them,
         * raw on a terminal. Tabs are blanks; a CR may end the line (CRLF). */
        for (long i = 0; i < len; i++) {
            unsigned char c = (unsigned char)line[i];
            if ((c < 0x20 && c != '\t' && !(c == '\r' && i == len - 1)) || c == 0x7f) {
                snprintf(err, errlen, "%s:%d: control byte 0x%02x at column %ld (a config file "
                         "is text; lines end in LF)", path, lineno, c, i + 1);
                rc = -1;
                break;
            }
        }
        if (rc < 0)
            break;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        /* editors on some systems start a UTF-8 file with a byte-order mark */
        char *s = trim(lineno == 1 && !strncmp(line, "\xef\xbb\xbf", 3) ? line + 3 : line);
        if (!*s)
            continue;
        char *eq = strchr(s, '=');
        char *value = NULL;
        if (eq) {
            *eq = '\0';
            value = trim(eq + 1);
            if (!*trim(s)) {
                snprintf(err, errlen, "%s:%d: a value with no setting name", path, lineno);
                rc = -1;
                break;
            }
            if (!*value) {
                snprintf(err, errlen, "%s:%d: '%s' has an empty value", path, lineno, trim(s));
                rc = -1;
                break;
            }
        }
        char *name = trim(s);
        if (!eq && strpbrk(name, " \t")) {
            /* "listen 127.0.0.1:80": a name never holds a space; nginx habits */
            snprintf(err, errlen, "%s:%d: expected `name = value`, got '%s'", path, lineno, name);
            rc = -1;
            break;
        }
        int nroutes = cfg->nroutes;
        char resolved[PATH_MAX + sizeof line];
        if (config_path_resolve(path, name, value, resolved, sizeof resolved, why,
                                sizeof why) < 0 ||
            config_set(cfg, name, value ? resolved : NULL, why, sizeof why) < 0) {
            snprintf(err, errlen, "%s:%d: %s", path, lineno, why);
            rc = -1;
            break;
        }
        if (cfg->nroutes > nroutes)
            route_line[nroutes] = lineno;
    }
    for (int i = first_route; rc == 0 && i < cfg->nroutes; i++)
        if (find_upstream(cfg, cfg->route_upstream[i]) < 0) {
            snprintf(err, errlen, "%s:%d: proxy %s: unknown upstream '%s'", path, route_line[i],
                     cfg->routes[i].prefix, cfg->route_upstream[i]);
            rc = -1;
        }
    if (rc == 0 && ferror(f)) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno)); /* e.g. a directory */
        rc = -1;
    }
    fclose(f);
    return rc;
}

int config_thread_count(const struct serve_config *cfg)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    long n = cfg->threads ? (long)cfg->threads : cfg->workers ? (long)cfg->workers
             : ncpu > 0 ? ncpu : 1;
    return n > CONFIG_MAX_WORKERS ? CONFIG_MAX_WORKERS : (int)n;
}

int config_finish(struct serve_config *cfg, char *err, size_t errlen)
{
    cfg->listen_default = cfg->nlisten == 0;
    if (cfg->nlisten == 0 &&
        listen_parse("127.0.0.1:8080", &cfg->listen[cfg->nlisten++], err, errlen) < 0)
        return -1;
    if (cfg->proxy_protocol)
        for (int i = 0; i < cfg->nlisten; i++)
            cfg->listen_proxy[i] = 1;
    acl_default_if_empty(&cfg->status_allow);
    for (int i = 0; i < cfg->nroutes; i++) {
        cfg->routes[i].group = find_upstream(cfg, cfg->route_upstream[i]);
        if (cfg->routes[i].group < 0) {
            snprintf(err, errlen, "proxy %s: unknown upstream '%s' (define it with upstream)",
                     cfg->routes[i].prefix, cfg->route_upstream[i]);
            return -1;
        }
        if (cfg->routes[i].fastcgi)
            cfg->upstreams[cfg->routes[i].group].fastcgi = 1;
    }
    /* one pool per group: its connections speak one protocol */
    for (int i = 0; i < cfg->nroutes; i++)
        if (!cfg->routes[i].fastcgi && cfg->upstreams[cfg->routes[i].group].fastcgi) {
            snprintf(err, errlen, "upstream '%s' is used by both proxy and fastcgi routes",
                     cfg->route_upstream[i]);
            return -1;
        }
    if (resolve_health(cfg, err, errlen) < 0)
        return -1;
    upindex_number(cfg);
    /* Here, not in each worker: a user that does not exist fails
     * --check-config, the start (before a port is bound) and a reload
     * (the old config stays), rather than every worker, over and over. */
    if (user_ids(cfg->user, cfg->group, &cfg->uid, &cfg->gid, err, errlen) < 0)
        return -1;
    /* a ticket's lifetime hint is whole seconds, and OpenSSL takes 0 for
     * its own default (2 hours): below 1s it would promise what it is not */
    if (cfg->tls.session_timeout_ms < 1000) {
        snprintf(err, errlen, "tls-session-timeout: at least 1s (tickets count whole seconds)");
        return -1;
    }
    if (config_has_tls(cfg)) {
        if (!cfg->tls.cert[0] || !cfg->tls.key[0]) {
            snprintf(err, errlen, "a TLS listener needs --tls-cert and --tls-key");
            return -1;
        }
        /* The drivers that move bytes through the TLS transport; any other
         * (iterative, a new one) is refused rather than served in clear. */
        static const char *const tls_models[] = {"reuseport", "prefork", "dispatch",
                                                 "threads", "coro", "single"};
        int ok = 0;
        for (size_t k = 0; k < sizeof tls_models / sizeof tls_models[0]; k++)
            ok |= !strcmp(cfg->model, tls_models[k]);
        if (!ok) {
            snprintf(err, errlen, "TLS listeners are not supported by --model %s (use "
                     "reuseport, prefork, dispatch, threads, coro or single)", cfg->model);
            return -1;
        }
    }
    if (cfg->nroutes && !strcmp(cfg->model, "iterative")) {
        snprintf(err, errlen, "proxy routes need an event-loop, coro or uring model (not %s)",
                 cfg->model);
        return -1;
    }
    /* The threads model splits --max-connections among its loops, each on
     * a listen socket of its own: a loop with no share would leave the
     * connections the kernel hands its socket waiting for good. */
    if (!strcmp(cfg->model, "threads") && cfg->max_connections) {
        uint64_t loops = (uint64_t)config_thread_count(cfg);
        if (cfg->max_connections < loops) {
            snprintf(err, errlen, "max-connections %u is below the %llu threads of --model "
                     "threads (each takes at least one)", (unsigned)cfg->max_connections,
                     (unsigned long long)loops);
            return -1;
        }
    }
    return 0;
}

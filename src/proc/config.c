#include "proc/config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <netinet/in.h>
#include <sys/un.h>

#include "core/units.h"
#include "proc/config_paths.h"

const char config_help[] =
    "  --listen ADDR            HOST:PORT, [V6]:PORT or unix:/path; repeatable\n"
    "                           (default 127.0.0.1:8080; port 0 picks a free one)\n"
    "  --docroot DIR            the files to serve (or the first argument; default .)\n"
    "  --config FILE            read settings from FILE (`name = value` lines; its\n"
    "                           relative paths start at its folder); flags override it\n"
    "  --check-config FILE      validate FILE, its docroot and log folders: exit 0,\n"
    "                           or print FILE:LINE (or FILE) and a reason, exit 2\n"
    "  --workers N              worker processes, 1..128 (default: one per CPU)\n"
    "  --model NAME             how connections reach the HTTP code: reuseport (default),\n"
    "                           prefork, dispatch, threads, coro, iterative, or single\n"
    "                           (one process, no master)\n"
    "  --threads N              threads and coro: kernel threads in the one worker\n"
    "                           process, 1..128 (default: --workers, else one per CPU)\n"
    "  --coro-stack SIZE        coro: stack per connection, virtual (default 64k)\n"
    "  --accept-herd            prefork: wake every worker per connection (a demo)\n"
    "  --dispatch rr|least      dispatch: round-robin or least connections (default rr)\n"
    "  --access-log PATH        write an access log through the logger process\n"
    "  --access-log-format F    combined (default) or json\n"
    "  --error-log PATH         the error log of every process (default: stderr)\n"
    "  --status-path PATH       serve live counters at PATH (e.g. /herd-status)\n"
    "  --status-allow ADDR[/BITS]|unix  who may read the status page: an IPv4/IPv6\n"
    "                           address or CIDR, or unix (unix-socket clients);\n"
    "                           repeatable; default loopback and unix; others get 403\n"
    "                           (PROXY protocol listeners: the client it declares)\n"
    "  --pid-file PATH          write the master's pid here\n"
    "  --upgrade-binary PATH    the binary USR2 execs (default: the running one)\n"
    "  --daemon                 detach from the terminal\n"
    "  --user NAME, --group NAME  drop privileges after binding (when root)\n"
    "  --serve-dotfiles         serve names starting with '.' (default: 404)\n"
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
    "  --max-connections N      open connections per worker process, split among\n"
    "                           its threads (default: file limit - 64)\n"
    "  --backlog N              listen queue length (default 511)\n"
    "  --proxy-protocol         every listener expects a PROXY protocol v1/v2 header\n"
    "                           (from HAProxy, AWS NLB...); for one listener only,\n"
    "                           write `--listen 'ADDR proxy_protocol'`\n"
    "  --upstream NAME=ADDR[,ADDR...]  a group of upstream servers (unix:/path or\n"
    "                           host:port); repeatable\n"
    "  --proxy PREFIX=NAME      send requests whose path starts with PREFIX to the\n"
    "                           upstream group NAME (longest prefix wins); repeatable\n"
    "  --upstream-balance rr|least  pick servers round-robin (default) or by fewest\n"
    "                           active requests\n"
    "  --upstream-fail-timeout DUR  a server that failed is skipped this long (10s)\n"
    "  --upstream-keepalive N   idle upstream connections kept per worker and server\n"
    "                           (default 32; 0: close after each response)\n"
    "  --proxy-connect-timeout DUR  connecting to an upstream (default 5s)\n"
    "  --proxy-read-timeout DUR between two reads from an upstream (default 60s)\n"
    "  --proxy-send-timeout DUR between two writes to an upstream (default 60s)\n"
    "  --proxy-pass-underscores  pass request headers whose names hold '_' to the\n"
    "                           upstreams (default: dropped; CGI/WSGI servers read\n"
    "                           X_Forwarded_For as X-Forwarded-For)\n"
    "  -v, --verbose            debug lines in the error log\n";

enum kind {
    K_LISTEN, K_DOCROOT, K_WORKERS, K_MODEL, K_ACCESS_LOG, K_ACCESS_LOG_FORMAT,
    K_STATUS_PATH, K_PID_FILE, K_DAEMON, K_USER, K_GROUP, K_DOTFILES, K_KA_REQS,
    K_MAX_HDR, K_MAX_BODY, K_HDR_TO, K_KA_TO, K_SEND_TO, K_STOP_TO, K_MAX_CONNS,
    K_VERBOSE, K_ACCEPT_HERD, K_DISPATCH, K_BACKLOG, K_PROXY_PROTOCOL, K_UPGRADE_BIN, K_UPSTREAM, K_PROXY, K_UP_BALANCE,
    K_UP_FAIL_TO, K_UP_KEEPALIVE, K_PX_CONNECT_TO, K_PX_READ_TO, K_PX_SEND_TO,
    K_PX_UNDERSCORES,
    K_THREADS, K_CORO_STACK, K_STATUS_ALLOW, K_ERROR_LOG, K_BODY_TO, K_BODY_RATE,
};

static const struct {
    const char *name;
    enum kind kind;
    uint8_t takes_value;
} settings[] = {
    {"listen", K_LISTEN, 1},
    {"docroot", K_DOCROOT, 1},
    {"workers", K_WORKERS, 1},
    {"model", K_MODEL, 1},
    {"access-log", K_ACCESS_LOG, 1},
    {"access-log-format", K_ACCESS_LOG_FORMAT, 1},
    {"error-log", K_ERROR_LOG, 1},
    {"status-path", K_STATUS_PATH, 1},
    {"status-allow", K_STATUS_ALLOW, 1},
    {"pid-file", K_PID_FILE, 1},
    {"daemon", K_DAEMON, 0},
    {"user", K_USER, 1},
    {"group", K_GROUP, 1},
    {"serve-dotfiles", K_DOTFILES, 0},
    {"keepalive-requests", K_KA_REQS, 1},
    {"max-header-size", K_MAX_HDR, 1},
    {"max-body-size", K_MAX_BODY, 1},
    {"header-timeout", K_HDR_TO, 1},
    {"keepalive-timeout", K_KA_TO, 1},
    {"send-timeout", K_SEND_TO, 1},
    {"body-timeout", K_BODY_TO, 1},
    {"body-min-rate", K_BODY_RATE, 1},
    {"shutdown-timeout", K_STOP_TO, 1},
    {"max-connections", K_MAX_CONNS, 1},
    {"verbose", K_VERBOSE, 0},
    {"accept-herd", K_ACCEPT_HERD, 0},
    {"dispatch", K_DISPATCH, 1},
    {"backlog", K_BACKLOG, 1},
    {"proxy-protocol", K_PROXY_PROTOCOL, 0},
    {"upgrade-binary", K_UPGRADE_BIN, 1},
    {"upstream", K_UPSTREAM, 1},
    {"proxy", K_PROXY, 1},
    {"upstream-balance", K_UP_BALANCE, 1},
    {"upstream-fail-timeout", K_UP_FAIL_TO, 1},
    {"upstream-keepalive", K_UP_KEEPALIVE, 1},
    {"proxy-connect-timeout", K_PX_CONNECT_TO, 1},
    {"proxy-read-timeout", K_PX_READ_TO, 1},
    {"proxy-send-timeout", K_PX_SEND_TO, 1},
    {"proxy-pass-underscores", K_PX_UNDERSCORES, 0},
    {"threads", K_THREADS, 1},
    {"coro-stack", K_CORO_STACK, 1},
};

/* Every model herd knows; models/models.c maps them to code. */
static const char *const model_names[] = {
    "reuseport", "prefork", "dispatch", "threads", "coro", "iterative", "single",
};

#define NSETTINGS (sizeof settings / sizeof settings[0])

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
    cfg->upstream_keepalive = 32;
    cfg->upstream_fail_timeout_ms = 10000;
    cfg->proxy_connect_timeout_ms = 5000;
    cfg->proxy_read_timeout_ms = 60000;
    cfg->proxy_send_timeout_ms = 60000;
    cfg->coro_stack = 64 * 1024;
}

int config_known(const char *name)
{
    for (size_t i = 0; i < NSETTINGS; i++)
        if (!strcmp(settings[i].name, name))
            return settings[i].takes_value ? 2 : 1;
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

/* "ADDR" or "ADDR proxy_protocol", as nginx's listen directive. */
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
    uint8_t proxy = 0;
    for (const char *p = sp; p && *p;) {
        while (*p == ' ')
            p++;
        size_t l = strcspn(p, " ");
        if (l == 14 && !strncmp(p, "proxy_protocol", 14))
            proxy = 1;
        else if (l) {
            snprintf(err, errlen, "unknown listen option '%.*s' in '%s' (known: proxy_protocol)",
                     (int)l, p, v);
            return -1;
        }
        p += l;
    }
    if (listen_parse(addr, &cfg->listen[cfg->nlisten], err, errlen) < 0)
        return -1;
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

/* PREFIX=NAME; the name is resolved in config_finish, so flags may name a
 * group defined later (a config file checks its own routes at its end, to
 * report FILE:LINE). */
static int set_proxy(struct serve_config *cfg, const char *v, char *err, size_t errlen)
{
    const char *eq = strrchr(v, '=');
    if (!eq || v[0] != '/' || (size_t)(eq - v) >= PROXY_PREFIX_MAX ||
        !name_ok(eq + 1, strlen(eq + 1))) {
        snprintf(err, errlen, "proxy '%s': expected /PREFIX=UPSTREAM", v);
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
    strcpy(cfg->route_upstream[cfg->nroutes], eq + 1);
    r->group = find_upstream(cfg, eq + 1);
    cfg->nroutes++;
    return 0;
}

int config_set(struct serve_config *cfg, const char *name, const char *v, char *err,
               size_t errlen)
{
    size_t i = 0;
    while (i < NSETTINGS && strcmp(settings[i].name, name))
        i++;
    if (i == NSETTINGS) {
        snprintf(err, errlen, "unknown setting '%s'", name);
        return -1;
    }
    if (settings[i].takes_value && !v) {
        snprintf(err, errlen, "%s needs a value", name);
        return -1;
    }
    if (!settings[i].takes_value && v) {
        snprintf(err, errlen, "%s takes no value", name);
        return -1;
    }
    uint64_t n;
    switch (settings[i].kind) {
    case K_LISTEN:
        if (cfg->nlisten == CONFIG_MAX_LISTEN) {
            snprintf(err, errlen, "too many listen addresses (at most %d)", CONFIG_MAX_LISTEN);
            return -1;
        }
        return listen_setting(cfg, v, err, errlen);
    case K_DOCROOT:
        return copy_str(cfg->docroot, sizeof cfg->docroot, v, name, err, errlen);
    case K_WORKERS:
        if (worker_count(name, v, &n, err, errlen) < 0)
            return -1;
        cfg->workers = (uint32_t)n;
        return 0;
    case K_MODEL:
        for (size_t k = 0; k < sizeof model_names / sizeof model_names[0]; k++)
            if (!strcmp(v, model_names[k])) {
                strcpy(cfg->model, v);
                return 0;
            }
        snprintf(err, errlen,
                 "unknown model '%s' (reuseport, prefork, dispatch, threads, coro, iterative, single)",
                 v);
        return -1;
    case K_ACCESS_LOG:
        return copy_str(cfg->access_log, sizeof cfg->access_log, v, name, err, errlen);
    case K_ERROR_LOG:
        return copy_str(cfg->error_log, sizeof cfg->error_log, v, name, err, errlen);
    case K_ACCESS_LOG_FORMAT:
        if (!strcmp(v, "combined"))
            cfg->access_log_format = ACCESS_LOG_COMBINED;
        else if (!strcmp(v, "json"))
            cfg->access_log_format = ACCESS_LOG_JSON;
        else
            goto bad;
        return 0;
    case K_STATUS_PATH:
        if (v[0] != '/' || strlen(v) >= sizeof cfg->http.status_path) {
            snprintf(err, errlen, "status-path must start with '/' (got '%s')", v);
            return -1;
        }
        strcpy(cfg->http.status_path, v);
        return 0;
    case K_STATUS_ALLOW:
        return acl_add(&cfg->status_allow, v, err, errlen);
    case K_PID_FILE:
        return copy_str(cfg->pid_file, sizeof cfg->pid_file, v, name, err, errlen);
    case K_UPGRADE_BIN:
        return copy_str(cfg->upgrade_binary, sizeof cfg->upgrade_binary, v, name, err, errlen);
    case K_DAEMON:
        cfg->daemon = 1;
        return 0;
    case K_USER:
        return copy_str(cfg->user, sizeof cfg->user, v, name, err, errlen);
    case K_GROUP:
        return copy_str(cfg->group, sizeof cfg->group, v, name, err, errlen);
    case K_DOTFILES:
        cfg->http.serve_dotfiles = 1;
        return 0;
    case K_KA_REQS:
        if (unit_count(v, 1, UINT32_MAX, &n) < 0)
            goto bad;
        cfg->http.keepalive_requests = (uint32_t)n;
        return 0;
    case K_MAX_HDR:
        if (unit_size(v, &n) < 0 || n < 256 || n > 1024 * 1024)
            goto bad;
        cfg->http.max_header_size = (uint32_t)n;
        return 0;
    case K_MAX_BODY:
        if (unit_size(v, &n) < 0)
            goto bad;
        cfg->http.max_body_size = n;
        return 0;
    case K_HDR_TO:
        return duration(name, v, &cfg->header_timeout_ms, err, errlen);
    case K_KA_TO:
        return duration(name, v, &cfg->keepalive_timeout_ms, err, errlen);
    case K_SEND_TO:
        return duration(name, v, &cfg->send_timeout_ms, err, errlen);
    case K_BODY_TO:
        return duration(name, v, &cfg->body_timeout_ms, err, errlen);
    case K_BODY_RATE:
        if (unit_size(v, &n) < 0 || n > UINT32_MAX)
            goto bad;
        cfg->body_min_rate = (uint32_t)n;
        return 0;
    case K_STOP_TO:
        return duration(name, v, &cfg->shutdown_timeout_ms, err, errlen);
    case K_MAX_CONNS:
        if (unit_count(v, 1, 1 << 24, &n) < 0)
            goto bad;
        cfg->max_connections = (uint32_t)n;
        return 0;
    case K_VERBOSE:
        cfg->verbose = 1;
        return 0;
    case K_BACKLOG:
        if (unit_count(v, 1, 65535, &n) < 0)
            goto bad;
        cfg->backlog = (int)n;
        return 0;
    case K_THREADS:
        if (worker_count(name, v, &n, err, errlen) < 0)
            return -1;
        cfg->threads = (uint32_t)n;
        return 0;
    case K_CORO_STACK:
        /* Below 16k the HTTP code itself overflows; above 8m use threads. */
        if (unit_size(v, &n) < 0 || n < 16 * 1024 || n > 8 * 1024 * 1024)
            goto bad;
        cfg->coro_stack = (uint32_t)n;
        return 0;
    case K_ACCEPT_HERD:
        cfg->accept_herd = 1;
        return 0;
    case K_PROXY_PROTOCOL:
        cfg->proxy_protocol = 1;
        return 0;
    case K_UPSTREAM:
        return set_upstream(cfg, v, err, errlen);
    case K_PROXY:
        return set_proxy(cfg, v, err, errlen);
    case K_UP_BALANCE:
        if (!strcmp(v, "rr"))
            cfg->upstream_least = 0;
        else if (!strcmp(v, "least"))
            cfg->upstream_least = 1;
        else
            goto bad;
        return 0;
    case K_UP_FAIL_TO:
        return duration(name, v, &cfg->upstream_fail_timeout_ms, err, errlen);
    case K_UP_KEEPALIVE:
        if (unit_count(v, 0, 4096, &n) < 0)
            goto bad;
        cfg->upstream_keepalive = (uint32_t)n;
        return 0;
    case K_PX_CONNECT_TO:
        return duration(name, v, &cfg->proxy_connect_timeout_ms, err, errlen);
    case K_PX_READ_TO:
        return duration(name, v, &cfg->proxy_read_timeout_ms, err, errlen);
    case K_PX_SEND_TO:
        return duration(name, v, &cfg->proxy_send_timeout_ms, err, errlen);
    case K_PX_UNDERSCORES:
        cfg->proxy_pass_underscores = 1;
        return 0;
    case K_DISPATCH:
        if (!strcmp(v, "rr"))
            cfg->dispatch_least = 0;
        else if (!strcmp(v, "least"))
            cfg->dispatch_least = 1;
        else
            goto bad;
        return 0;
    }
bad:
    snprintf(err, errlen, "invalid value '%s' for %s", v, name);
    return -1;
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
    FILE *f = fopen(path, "re");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
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
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *s = trim(line);
        if (!*s)
            continue;
        char *eq = strchr(s, '=');
        char *value = NULL;
        if (eq) {
            *eq = '\0';
            value = trim(eq + 1);
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
    }
    if (cfg->nroutes && !strcmp(cfg->model, "iterative")) {
        snprintf(err, errlen, "proxy routes need an event-loop or the coro model (not %s)",
                 cfg->model);
        return -1;
    }
    return 0;
}

/* The server's settings, one table for both the command line and the
 * config file: `--name value` on the command line is `name = value` in the
 * file, so every flag has a config line and the other way round.
 *
 * Config file format: one setting per line, `name = value` or `name` for
 * switches; `#` starts a comment; blank lines are ignored; `listen` may be
 * repeated. Relative paths are relative to the file's folder
 * (proc/config_paths.h). Example:
 *
 *     # /etc/herd.conf
 *     docroot = /srv/www
 *     listen = 0.0.0.0:80
 *     workers = 4
 *     keepalive-timeout = 30s
 *     access-log = /var/log/herd/access.log
 */
#ifndef HERD_PROC_CONFIG_H
#define HERD_PROC_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "http/handler.h"
#include "http/proxy.h"
#include "net/acl.h"
#include "net/listen.h"
#include "net/tls_ctx.h"

#define CONFIG_MAX_LISTEN 16
/* Worker processes, or threads of the one worker process: the master's
 * tables and the scoreboard (four generations of slots) are sized for it. */
#define CONFIG_MAX_WORKERS 128
#define CONFIG_MAX_UPSTREAMS 16
#define CONFIG_MAX_UPSTREAM_SERVERS 16
#define CONFIG_MAX_ROUTES 32
#define UPSTREAM_NAME_MAX 32
#define CONFIG_MAX_FASTCGI_PARAMS 32
#define FASTCGI_PARAM_MAX 512

/* `upstream = NAME=ADDR[,ADDR...]`: servers a proxy route sends to. */
struct upstream_group {
    char name[UPSTREAM_NAME_MAX];
    struct listen_addr servers[CONFIG_MAX_UPSTREAM_SERVERS]; /* unix:/path or host:port */
    int nservers;
    /* each server's index in the scoreboard's upstream tables: config
     * order at first, kept across reloads (proc/upstream_index.h) */
    uint16_t sb_index[CONFIG_MAX_UPSTREAM_SERVERS];
    uint8_t fastcgi;            /* spoken to in FastCGI (a --fastcgi route names it) */
    /* `upstream-health = NAME=PATH,INTERVAL`: the master sends GET PATH to
     * each server every interval (proc/health.c); "" when off */
    char health_path[256];
    int64_t health_interval_ms;
};

/* The shortest --upstream-health INTERVAL accepted. */
#define HEALTH_MIN_INTERVAL_MS 100

/* An upstream-health line as given (its group may come later): resolved
 * into the group's health_* fields by config_finish. */
struct upstream_health {
    char group[UPSTREAM_NAME_MAX];
    char path[256];
    int64_t interval_ms;
};

enum log_format { ACCESS_LOG_COMBINED, ACCESS_LOG_JSON };

struct serve_config {
    char docroot[1024];
    struct listen_addr listen[CONFIG_MAX_LISTEN];
    int nlisten;
    uint8_t listen_proxy[CONFIG_MAX_LISTEN]; /* expects a PROXY protocol header */
    uint8_t proxy_protocol;     /* every listener does */
    uint8_t listen_tls[CONFIG_MAX_LISTEN];   /* speaks TLS (`--listen 'ADDR tls'`) */
    struct tls_conf tls;        /* certificates, protocols, ciphers, tickets */
    uint8_t listen_default;     /* no listen address given: 127.0.0.1:8080, or
                                   every socket systemd passed (LISTEN_FDS) */
    struct http_config http;
    struct acl status_allow;    /* who may read http.status_path */
    int64_t header_timeout_ms;
    int64_t keepalive_timeout_ms;
    int64_t send_timeout_ms;
    int64_t body_timeout_ms;    /* a request body's clock (models/body_clock.h) */
    uint32_t body_min_rate;     /* body bytes per second that extend it by 1 s */
    int64_t shutdown_timeout_ms;
    int64_t upgrade_timeout_ms;   /* a USR2's new master must be ready within this */
    uint32_t max_connections;   /* 0: from RLIMIT_NOFILE */
    uint32_t workers;           /* 0: one per CPU */
    uint32_t threads;           /* one-process models: kernel threads, 0: as workers */
    uint32_t coro_stack;        /* coro: bytes of stack per coroutine */
    int backlog;                /* listen(2) queue */
    char model[16];
    char access_log[1024];      /* "" when off */
    enum log_format access_log_format;
    char error_log[1024];       /* "" for stderr */
    char pid_file[1024];
    char upgrade_binary[1024];  /* USR2 execs this; "" for the running binary */
    char user[64], group[64];
    uid_t uid;                  /* user and group resolved by config_finish, so */
    gid_t gid;                  /* a name that does not exist stops the start */
    uint8_t daemon;
    uint8_t verbose;
    uint8_t accept_herd;        /* prefork without EPOLLEXCLUSIVE */
    uint8_t worker_cpus;        /* --worker-cpus auto (proc/worker_cpu.h) */
    uint8_t dispatch_least;     /* dispatch: least connections, else round-robin */
    /* reverse proxy */
    struct upstream_group upstreams[CONFIG_MAX_UPSTREAMS];
    int nupstreams;
    struct proxy_route routes[CONFIG_MAX_ROUTES];
    char route_upstream[CONFIG_MAX_ROUTES][UPSTREAM_NAME_MAX]; /* resolved in finish */
    int nroutes;
    struct upstream_health health[CONFIG_MAX_UPSTREAMS];
    int nhealth;
    uint8_t upstream_least;     /* least connections, else round-robin */
    uint32_t upstream_keepalive; /* idle connections kept per worker and server */
    int64_t upstream_fail_timeout_ms;
    int64_t upstream_stall_ms;  /* no first byte this long: is the pool starving it? 0: off */
    int64_t proxy_connect_timeout_ms;
    int64_t proxy_read_timeout_ms;
    int64_t proxy_send_timeout_ms;
    uint8_t proxy_pass_underscores; /* header names with '_' go upstream too */
    /* FastCGI (routes are in routes[], marked fastcgi) */
    char fastcgi_index[256];    /* a directory's script ("index.php") */
    char fastcgi_fallback[1024]; /* the front controller for missing files, or "" */
    char fastcgi_params[CONFIG_MAX_FASTCGI_PARAMS][FASTCGI_PARAM_MAX]; /* NAME=VALUE */
    int nfastcgi_params;
    uint8_t proxy_pass_server;  /* the upstream's Server and Date reach clients */
};

/* Whether any listener speaks TLS. */
int config_has_tls(const struct serve_config *cfg);

/* Fills in the defaults. */
void config_defaults(struct serve_config *cfg);

/* Applies one setting by its name (without "--"). value is NULL for a
 * switch. Returns 0, or -1 with a one-line reason in err. */
int config_set(struct serve_config *cfg, const char *name, const char *value, char *err,
               size_t errlen);

/* 1 when name is a setting, 2 when it takes a value, 0 when unknown. */
int config_known(const char *name);

/* Reads a config file into cfg. Returns 0, or -1 with "FILE:LINE: reason"
 * in err. */
int config_load(struct serve_config *cfg, const char *path, char *err, size_t errlen);

/* The threads of --model threads or coro: --threads, else --workers, else
 * one per CPU, at most CONFIG_MAX_WORKERS (the master caps the default so). */
int config_thread_count(const struct serve_config *cfg);

/* Checks settings that depend on each other; fills the defaults that
 * depend on the machine. Returns 0 or -1 with a reason. */
int config_finish(struct serve_config *cfg, char *err, size_t errlen);

/* Help text lines for every setting. */
extern const char config_help[];

#endif

/* herd serve: settings from flags and the config file, then either the
 * master with its workers or, with --model single, one process. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "core/log.h"
#include "core/signals.h"
#include "models/evloop.h"
#include "models/models.h"
#include "models/sizing.h"
#include "models/uring_ring.h"
#include "net/inherit.h"
#include "proc/config.h"
#include "proc/config_paths.h"
#include "proc/daemon.h"
#include "proc/master.h"
#include "proc/tls_setup.h"

static const char serve_usage_head[] =
    "usage: herd serve [DOCROOT] [options]\n"
    "\n"
    "Serves the files below DOCROOT over HTTP/1.1: a master process supervises\n"
    "worker processes (one per CPU by default) and an access-log daemon.\n"
    "\n";

static const char serve_usage_tail[] =
    "  -h, --help               this text\n"
    "\n"
    "SIZE takes k/m/g suffixes; DUR takes ms, s, m, h (plain numbers are seconds).\n"
    "Signals to the master: TERM/INT stop gracefully, QUIT at once, HUP reloads the\n"
    "config (new workers, old ones drain), USR1 reopens the log files, USR2 execs\n"
    "the binary again (or --upgrade-binary) on the same sockets, then the old master\n"
    "drains and exits. Sockets passed by systemd (LISTEN_FDS) are used, not bound;\n"
    "a passed fd that is not a listening TCP or unix stream socket is an error.\n";

/* The command line, kept for reloads: settings = defaults, then the config
 * file, then the flags. */
struct invocation {
    int argc;
    char **argv;
    const char *config_path;
};

static int usage_error(const char *msg, const char *arg)
{
    fprintf(stderr, "herd: %s%s (see herd serve --help)\n", msg, arg);
    return 2;
}

/* First pass: --help, --config, --check-config. Returns -1 to go on, else an
 * exit status. */
static int scan_special(int argc, char **argv, struct invocation *inv, const char **check)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(serve_usage_head, stdout);
            fputs(config_help, stdout);
            fputs(serve_usage_tail, stdout);
            return 0;
        }
        const char **dst = !strncmp(a, "--config", 8) && (a[8] == '\0' || a[8] == '=')
                               ? &inv->config_path
                           : !strncmp(a, "--check-config", 14) && (a[14] == '\0' || a[14] == '=')
                               ? check
                               : NULL;
        if (!dst)
            continue;
        const char *eq = strchr(a, '=');
        if (eq)
            *dst = eq + 1;
        else if (i + 1 < argc)
            *dst = argv[++i];
        else
            return usage_error(a, " needs a value");
    }
    return -1;
}

/* Applies the flags over cfg. Returns -1 when fine, else an exit status. */
static int apply_flags(const struct invocation *inv, struct serve_config *cfg)
{
    int docroot_seen = 0;
    for (int i = 1; i < inv->argc; i++) {
        const char *a = inv->argv[i];
        if (a[0] != '-' || !strcmp(a, "-")) {
            if (docroot_seen++)
                return usage_error("unexpected argument ", a);
            char err[256];
            if (config_set(cfg, "docroot", a, err, sizeof err) < 0)
                return usage_error(err, "");
            continue;
        }
        if (!strcmp(a, "-v")) {
            cfg->verbose = 1;
            continue;
        }
        if (a[1] != '-')
            return usage_error("unknown option ", a);
        char name[64];
        const char *eq = strchr(a, '=');
        size_t nlen = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        if (nlen >= sizeof name)
            return usage_error("unknown option ", a);
        memcpy(name, a + 2, nlen);
        name[nlen] = '\0';
        if (!strcmp(name, "config") || !strcmp(name, "check-config")) {
            if (!eq)
                i++;
            continue;
        }
        int known = config_known(name);
        if (!known)
            return usage_error("unknown option ", a);
        const char *value = NULL;
        if (known == 2) {
            if (eq)
                value = eq + 1;
            else if (i + 1 < inv->argc)
                value = inv->argv[++i];
            else
                return usage_error(a, " needs a value");
        } else if (eq) {
            return usage_error(a, ": takes no value");
        }
        char err[256];
        if (config_set(cfg, name, value, err, sizeof err) < 0)
            return usage_error(err, "");
    }
    return -1;
}

/* Settings = defaults, then the config file, then the flags (a --listen
 * flag replaces the file's listen lines, a --status-allow flag its
 * status-allow lines, and so do --cache-control, --expires and
 * --error-page). Returns 0; or -1 with a reason in
 * err; or 2 when a flag was wrong (already reported on stderr). */
static int build_config(const struct invocation *inv, struct serve_config *cfg, char *err,
                        size_t errlen)
{
    config_defaults(cfg);
    if (inv->config_path && config_load(cfg, inv->config_path, err, errlen) < 0)
        return -1;
    for (int i = 1; i < inv->argc; i++)
        if (!strncmp(inv->argv[i], "--listen", 8))
            cfg->nlisten = 0;
        else if (!strncmp(inv->argv[i], "--status-allow", 14))
            memset(&cfg->status_allow, 0, sizeof cfg->status_allow);
        else if (!strncmp(inv->argv[i], "--cache-control", 15))
            cfg->http.cache.ncc = 0;
        else if (!strncmp(inv->argv[i], "--expires", 9))
            cfg->http.cache.nexp = 0;
        else if (!strncmp(inv->argv[i], "--error-page", 12))
            cfg->http.error_pages.n = 0;
    if (apply_flags(inv, cfg) >= 0)
        return 2;
    return config_finish(cfg, err, errlen);
}

/* The model the master runs (a reload does not change it). */
static const char *running_model;

/* --model threads and coro: the threads' own fds and a connection each
 * must fit in the fd limit, or every connection is refused for good.
 * 0, or -1 with the reason in err. */
static int threads_fit(const struct serve_config *cfg, char *err, size_t errlen)
{
    long loops = config_thread_count(cfg);
    long need = sizing_threads_fds_needed(running_model, (int)loops, cfg->nlisten);
    if (sizing_fd_limit() >= need)
        return 0;
    snprintf(err, errlen, "%ld threads need at least %ld file descriptors (their own, and a "
             "connection each); the limit is %d: raise it (ulimit -n) or run fewer threads",
             loops, need, sizing_fd_limit());
    return -1;
}

static int reload_config(void *arg, struct serve_config *out, char *err, size_t errlen)
{
    const struct invocation *inv = arg;
    if (build_config(inv, out, err, errlen) != 0)
        return -1; /* flags were checked at start, so err holds the reason */
    if (threads_fit(out, err, errlen) < 0)
        return -1;
    struct stat st;
    if (stat(out->docroot, &st) < 0) {
        snprintf(err, errlen, "docroot %s: %s", out->docroot, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) { /* errno is whatever came before: not the reason */
        snprintf(err, errlen, "docroot %s: not a directory", out->docroot);
        return -1;
    }
    return 0;
}

static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
            log_msg(LOG_WARN, "cannot raise the open-file limit: %s", strerror(errno));
    }
}

static void announce(const struct serve_config *cfg, const uint8_t *inherited)
{
    for (int i = 0; i < cfg->nlisten; i++) {
        char desc[160];
        listen_describe(&cfg->listen[i], desc, sizeof desc);
        log_msg(LOG_NOTICE, "listening on %s%s%s", desc, cfg->listen_tls[i] ? " (TLS)" : "",
                inherited[i] ? " (inherited)" : "");
    }
}

/* --model single: no master, no logger; the part-1 server in one process. */
static int serve_single(struct serve_config *cfg)
{
    char err[512];
    /* Passed sockets are checked before we open an fd of our own (see
     * inherit_from_env). */
    struct inherited in;
    int passed = inherit_from_env(&in, err, sizeof err);
    if (passed < 0) {
        fprintf(stderr, "herd: %s\n", err);
        return 1;
    }
    int sfd = signals_open();
    if (sfd < 0) {
        fprintf(stderr, "herd: signalfd: %s\n", strerror(-sfd));
        inherit_free(&in);
        return 1;
    }
    int fds[CONFIG_MAX_LISTEN];
    uint8_t inherited[CONFIG_MAX_LISTEN] = {0};
    if (passed && cfg->listen_default) {
        int n = inherit_addresses(&in, cfg->listen, CONFIG_MAX_LISTEN);
        if (n > CONFIG_MAX_LISTEN) {
            fprintf(stderr, "herd: LISTEN_FDS passes %d addresses; herd serves at most %d\n", n,
                    CONFIG_MAX_LISTEN);
            close(sfd);
            inherit_free(&in);
            return 1;
        }
        if (n > 0)
            cfg->nlisten = n;
        for (int i = 0; i < n; i++)
            cfg->listen_proxy[i] = cfg->proxy_protocol;
    }
    for (int i = 0; i < cfg->nlisten; i++) {
        const struct inherited_fd *f = inherit_take(&in, &cfg->listen[i]);
        inherited[i] = f != NULL;
        fds[i] = f ? f->fd : listen_open(&cfg->listen[i], cfg->backlog, 0);
        if (fds[i] < 0) {
            fprintf(stderr, "herd: cannot listen on %s: %s\n", cfg->listen[i].text,
                    strerror(-fds[i]));
            for (int j = 0; j < i; j++) {
                close(fds[j]);
                if (!inherited[j])
                    listen_cleanup(&cfg->listen[j]);
            }
            inherit_free(&in);
            return 1;
        }
    }
    if (inherit_close_unused(&in))
        log_msg(LOG_NOTICE, "closed inherited sockets that no listen address wants");
    inherit_free(&in);
    static struct tls_setup tls; /* no master: the keys never rotate */
    int rc_tls = tls_setup_load(&tls, cfg, err, sizeof err);
    /* "listening on" once nothing can refuse the start (as the master
     * says it), but for --daemon before the detach, where it is read */
    if (rc_tls == 0 && cfg->daemon)
        announce(cfg, inherited);
    if (rc_tls < 0 || (cfg->daemon && daemonize(err, sizeof err) < 0) ||
        pidfile_write(cfg->pid_file, err, sizeof err) < 0 ||
        drop_privileges(cfg->user, cfg->group, cfg->uid, cfg->gid, err, sizeof err) < 0) {
        fprintf(stderr, "herd: %s\n", err);
        /* the unix socket files made above go: no server is behind them */
        for (int i = 0; i < cfg->nlisten; i++)
            if (!inherited[i])
                listen_cleanup(&cfg->listen[i]);
        return 1;
    }
    if (!cfg->daemon)
        announce(cfg, inherited);
    if (cfg->access_log[0])
        log_msg(LOG_WARN, "--access-log needs the master (not --model single): ignored");
    if (cfg->nhealth)
        log_msg(LOG_WARN, "--upstream-health needs the master (not --model single): ignored");
    log_msg(LOG_NOTICE, "serving %s (single process)", cfg->docroot);
    /* A scoreboard of one, so the status page works here too. */
    struct scoreboard *sb = sb_create(1);
    if (sb) {
        sb->master_pid = getpid();
        sb->started = time(NULL);
        sb->generation = 1;
        snprintf(sb->model, sizeof sb->model, "single");
        sb->slots[0].pid = getpid();
        sb->slots[0].started = sb->started;
        sb->slots[0].generation = 1;
        sb->slots[0].state = SB_RUNNING;
    }
    struct worker_env env = {.listen_fds = fds, .nthreads = 1, .signal_fd = sfd,
                             .channel_fd = -1, .handover_fd = -1, .log_fd = -1,
                             .slot = sb ? &sb->slots[0] : NULL, .sb = sb,
                             .tls = tls.server};
    int rc = evloop_run(cfg, &env);
    for (int i = 0; i < cfg->nlisten; i++)
        if (!inherited[i]) /* a path systemd made is systemd's */
            listen_cleanup(&cfg->listen[i]);
    pidfile_remove(cfg->pid_file);
    close(sfd);
    if (rc == 0)
        log_msg(LOG_NOTICE, "stopped");
    return rc;
}

int cmd_serve(int argc, char **argv)
{
    static struct invocation inv;
    static struct serve_config cfg;
    const char *check = NULL;
    inv.argc = argc;
    inv.argv = argv;
    int rc = scan_special(argc, argv, &inv, &check);
    if (rc >= 0)
        return rc;

    char err[1200];
    if (check) {
        config_defaults(&cfg);
        if (config_load(&cfg, check, err, sizeof err) < 0) {
            fprintf(stderr, "%s\n", err); /* FILE:LINE: reason */
            return 2;
        }
        /* what is wrong with the lines together (an unknown user, a TLS
         * listener without a certificate): the file alone is to blame here,
         * so it is named, as --help promises (FILE: reason) */
        if (config_finish(&cfg, err, sizeof err) < 0) {
            fprintf(stderr, "%s: %s\n", check, err);
            return 2;
        }
        /* what starting would find wrong: a docroot or a log folder missing */
        if (config_check_paths(&cfg, err, sizeof err) < 0) {
            fprintf(stderr, "%s: %s\n", check, err);
            return 2;
        }
        /* and the TLS files, as nginx -t loads them: an unreadable or
         * mismatched certificate and key, or ciphers OpenSSL does not know */
        struct tls_setup tls = {0};
        int tls_rc = tls_setup_load(&tls, &cfg, err, sizeof err);
        tls_setup_free(&tls);
        if (tls_rc < 0) {
            fprintf(stderr, "%s: %s\n", check, err);
            return 2;
        }
        printf("%s: ok\n", check);
        return 0;
    }
    rc = build_config(&inv, &cfg, err, sizeof err);
    if (rc == -1)
        fprintf(stderr, "herd: %s\n", err);
    if (rc != 0)
        return 2;
    if (cfg.verbose)
        log_max_level = LOG_DEBUG;
    if (privileges_droppable(cfg.user, cfg.group, err, sizeof err) < 0) {
        fprintf(stderr, "herd: %s\n", err);
        return 2;
    }

    struct stat st;
    if (stat(cfg.docroot, &st) < 0) {
        fprintf(stderr, "herd: docroot %s: %s\n", cfg.docroot, strerror(errno));
        return 1;
    }
    if (!S_ISDIR(st.st_mode)) {
        fprintf(stderr, "herd: docroot %s: not a directory\n", cfg.docroot);
        return 1;
    }
    if (cfg.error_log[0] && (rc = log_open_file(cfg.error_log)) < 0) {
        fprintf(stderr, "herd: error log %s: %s\n", cfg.error_log, strerror(-rc));
        return 1;
    }
    raise_fd_limit();
    running_model = cfg.model;
    if (threads_fit(&cfg, err, sizeof err) < 0) {
        fprintf(stderr, "herd: %s\n", err);
        return 1;
    }
    if (cfg.proxy_pass_underscores)
        log_msg(LOG_WARN, "--proxy-pass-underscores: request headers whose names hold '_' "
                          "reach the upstreams (a CGI/WSGI upstream reads X_Forwarded_For "
                          "as X-Forwarded-For)");
    int fastcgi = 0;
    for (int i = 0; i < cfg.nroutes; i++)
        fastcgi |= cfg.routes[i].fastcgi;
    if (fastcgi && cfg.upstream_keepalive)
        log_msg(LOG_NOTICE, "fastcgi: each pooled connection holds a FastCGI child (php-cgi, "
                            "php-fpm): keep --upstream-keepalive (%u) times the workers "
                            "below the children, or set it to 0, or requests queue behind "
                            "idle connections",
                cfg.upstream_keepalive);
    if (!strcmp(cfg.model, "single"))
        return serve_single(&cfg);
    const struct model_desc *model = model_find(cfg.model);
    if (!model) {
        fprintf(stderr, "herd: unknown model '%s'\n", cfg.model);
        return 2;
    }
    if (!strcmp(cfg.model, "uring") && uring_probe(err, sizeof err) < 0) {
        fprintf(stderr, "herd: io_uring is not permitted here (%s); use --model reuseport\n",
                err);
        return 1;
    }
    struct master_hooks hooks = {
        .model = model,
        .reload = reload_config,
        .arg = &inv,
        .argc = argc,
        .argv = argv,
    };
    return master_run(&cfg, &hooks);
}

/* herd serve: flags, checks, listen sockets, then the event loop. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "cmd/flags.h"
#include "core/log.h"
#include "core/signals.h"
#include "models/evloop.h"
#include "net/listen.h"

#define MAX_LISTEN 16

static const char serve_usage[] =
    "usage: herd serve [DOCROOT] [options]\n"
    "\n"
    "Serves the files below DOCROOT (default: the current directory) over HTTP/1.1.\n"
    "\n"
    "  --listen ADDR            HOST:PORT, [V6]:PORT or unix:/path; repeatable\n"
    "                           (default 127.0.0.1:8080; port 0 picks a free one)\n"
    "  --serve-dotfiles         serve names starting with '.' (default: 404)\n"
    "  --keepalive-requests N   requests per connection (default 10000)\n"
    "  --max-header-size SIZE   request line and headers (default 8k)\n"
    "  --max-body-size SIZE     request body read and discarded, else 413 (default 1m)\n"
    "  --header-timeout DUR     a request head must arrive within (default 15s)\n"
    "  --keepalive-timeout DUR  idle time between requests (default 75s)\n"
    "  --send-timeout DUR       a blocked write must progress within (default 60s)\n"
    "  --shutdown-timeout DUR   graceful stop deadline (default 10s)\n"
    "  --max-connections N      open connections (default: file limit - 64)\n"
    "  -v, --verbose            debug lines in the error log\n"
    "  -h, --help               this text\n"
    "\n"
    "SIZE takes k/m/g suffixes; DUR takes ms, s, m, h (plain numbers are seconds).\n"
    "Signals: TERM/INT stop gracefully, QUIT stops at once.\n";

enum opt_kind { O_LISTEN, O_DOTFILES, O_KA_REQS, O_MAX_HDR, O_MAX_BODY, O_HDR_TO,
                O_KA_TO, O_SEND_TO, O_STOP_TO, O_MAX_CONNS, O_VERBOSE, O_HELP };

static const struct {
    const char *name;
    enum opt_kind kind;
    int takes_value;
} opts[] = {
    {"--listen", O_LISTEN, 1},
    {"--serve-dotfiles", O_DOTFILES, 0},
    {"--keepalive-requests", O_KA_REQS, 1},
    {"--max-header-size", O_MAX_HDR, 1},
    {"--max-body-size", O_MAX_BODY, 1},
    {"--header-timeout", O_HDR_TO, 1},
    {"--keepalive-timeout", O_KA_TO, 1},
    {"--send-timeout", O_SEND_TO, 1},
    {"--shutdown-timeout", O_STOP_TO, 1},
    {"--max-connections", O_MAX_CONNS, 1},
    {"--verbose", O_VERBOSE, 0},
    {"-v", O_VERBOSE, 0},
    {"--help", O_HELP, 0},
    {"-h", O_HELP, 0},
};

static int usage_error(const char *fmt, const char *a, const char *b)
{
    fprintf(stderr, "herd: ");
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, " (see herd serve --help)\n");
    return 2;
}

static int bad_value(const char *opt, const char *v)
{
    return usage_error("invalid value '%s' for %s", v, opt);
}

static int timeout_flag(const char *opt, const char *v, int64_t *out)
{
    if (flag_duration_ms(v, out) < 0 || *out <= 0)
        return bad_value(opt, v);
    return 0;
}

/* Returns -1 when the flags are fine, else an exit status. */
static int parse_flags(int argc, char **argv, struct serve_config *cfg, struct listen_addr *ls)
{
    const char *docroot = NULL;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (arg[0] != '-' || !strcmp(arg, "-")) {
            if (docroot)
                return usage_error("unexpected argument '%s'%s", arg, "");
            docroot = arg;
            continue;
        }
        const char *eq = strchr(arg, '=');
        size_t nlen = eq ? (size_t)(eq - arg) : strlen(arg);
        int k = -1;
        for (size_t j = 0; j < sizeof opts / sizeof opts[0]; j++)
            if (strlen(opts[j].name) == nlen && !strncmp(opts[j].name, arg, nlen))
                k = (int)j;
        if (k < 0)
            return usage_error("unknown option '%s'%s", arg, "");
        const char *name = opts[k].name;
        const char *v = NULL;
        if (opts[k].takes_value) {
            if (eq)
                v = eq + 1;
            else if (i + 1 < argc)
                v = argv[++i];
            else
                return usage_error("%s needs a value%s", name, "");
        } else if (eq) {
            return usage_error("%s takes no value%s", name, "");
        }
        uint64_t n;
        char err[256];
        switch (opts[k].kind) {
        case O_LISTEN:
            if (cfg->nlisten == MAX_LISTEN)
                return usage_error("too many --listen (at most 16)%s%s", "", "");
            if (listen_parse(v, &ls[cfg->nlisten], err, sizeof err) < 0) {
                fprintf(stderr, "herd: %s\n", err);
                return 2;
            }
            cfg->nlisten++;
            break;
        case O_DOTFILES:
            cfg->http.serve_dotfiles = 1;
            break;
        case O_KA_REQS:
            if (flag_count(v, 1, UINT32_MAX, &n) < 0)
                return bad_value(name, v);
            cfg->http.keepalive_requests = (uint32_t)n;
            break;
        case O_MAX_HDR:
            if (flag_size(v, &n) < 0 || n < 256 || n > 1024 * 1024)
                return bad_value(name, v);
            cfg->http.max_header_size = (uint32_t)n;
            break;
        case O_MAX_BODY:
            if (flag_size(v, &n) < 0)
                return bad_value(name, v);
            cfg->http.max_body_size = n;
            break;
        case O_HDR_TO:
            if (timeout_flag(name, v, &cfg->header_timeout_ms))
                return 2;
            break;
        case O_KA_TO:
            if (timeout_flag(name, v, &cfg->keepalive_timeout_ms))
                return 2;
            break;
        case O_SEND_TO:
            if (timeout_flag(name, v, &cfg->send_timeout_ms))
                return 2;
            break;
        case O_STOP_TO:
            if (timeout_flag(name, v, &cfg->shutdown_timeout_ms))
                return 2;
            break;
        case O_MAX_CONNS:
            if (flag_count(v, 1, 1 << 24, &n) < 0)
                return bad_value(name, v);
            cfg->max_connections = (uint32_t)n;
            break;
        case O_VERBOSE:
            log_max_level = LOG_DEBUG;
            break;
        case O_HELP:
            fputs(serve_usage, stdout);
            return 0;
        }
    }
    cfg->docroot = docroot ? docroot : ".";
    if (cfg->nlisten == 0) {
        char err[256];
        listen_parse("127.0.0.1:8080", &ls[0], err, sizeof err);
        cfg->nlisten = 1;
    }
    return -1;
}

/* Sockets and files are cheap to hold and costly to run out of. */
static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
            log_msg(LOG_WARN, "cannot raise the open-file limit: %s", strerror(errno));
    }
}

int cmd_serve(int argc, char **argv)
{
    static struct listen_addr ls[MAX_LISTEN];
    struct serve_config cfg = {
        .listen = ls,
        .http = {
            .max_header_size = 8192,
            .max_body_size = 1024 * 1024,
            .keepalive_requests = 10000,
        },
        .header_timeout_ms = 15000,
        .keepalive_timeout_ms = 75000,
        .send_timeout_ms = 60000,
        .shutdown_timeout_ms = 10000,
    };
    int rc = parse_flags(argc, argv, &cfg, ls);
    if (rc >= 0)
        return rc;

    struct stat st;
    if (stat(cfg.docroot, &st) < 0) {
        fprintf(stderr, "herd: docroot %s: %s\n", cfg.docroot, strerror(errno));
        return 1;
    }
    if (!S_ISDIR(st.st_mode)) {
        fprintf(stderr, "herd: docroot %s: not a directory\n", cfg.docroot);
        return 1;
    }
    raise_fd_limit();
    int sfd = signals_open();
    if (sfd < 0) {
        fprintf(stderr, "herd: signalfd: %s\n", strerror(-sfd));
        return 1;
    }

    int fds[MAX_LISTEN];
    for (int i = 0; i < cfg.nlisten; i++) {
        fds[i] = listen_open(&ls[i], 4096);
        if (fds[i] < 0) {
            fprintf(stderr, "herd: cannot listen on %s: %s\n", ls[i].text, strerror(-fds[i]));
            for (int j = 0; j < i; j++) {
                close(fds[j]);
                listen_cleanup(&ls[j]);
            }
            return 1;
        }
    }
    for (int i = 0; i < cfg.nlisten; i++) {
        char desc[160];
        listen_describe(&ls[i], desc, sizeof desc);
        log_msg(LOG_NOTICE, "listening on %s", desc);
    }
    log_msg(LOG_NOTICE, "serving %s", cfg.docroot);

    rc = evloop_run(&cfg, fds, sfd);
    for (int i = 0; i < cfg.nlisten; i++)
        listen_cleanup(&ls[i]);
    close(sfd);
    if (rc == 0)
        log_msg(LOG_NOTICE, "stopped");
    return rc;
}

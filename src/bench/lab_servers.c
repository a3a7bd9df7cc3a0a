/* The servers herd lab runs: herd in each model, and nginx, h2o and
 * lighttpd configured as bench/anchors.sh configures them (one
 * worker, access log off, sendfile on, keep-alive for effectively
 * unlimited requests, 127.0.0.1 only). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/lab_internal.h"
#include "bench/lab_proc.h"
#include "core/printable.h"

/* A new model of herd serve is added here, and nowhere else in the lab. */
const char *const lab_herd_models[] = {
    "reuseport", "prefork", "dispatch", "threads", "coro", "uring", "iterative", "single",
};
const int lab_nherd_models = (int)(sizeof lab_herd_models / sizeof lab_herd_models[0]);

/* The models whose master reloads on HUP and upgrades on USR2 (the reload
 * scenario); iterative and single have no master. */
const char *const lab_herd_reload_models[] = {
    "reuseport", "prefork", "dispatch", "threads", "coro", "uring",
};
const int lab_nherd_reload_models =
    (int)(sizeof lab_herd_reload_models / sizeof lab_herd_reload_models[0]);

const char *const lab_compare_servers[] = {"nginx", "h2o", "lighttpd"};
const int lab_ncompare_servers =
    (int)(sizeof lab_compare_servers / sizeof lab_compare_servers[0]);

static const char *bin_env(const char *kind)
{
    if (!strcmp(kind, "nginx"))
        return "NGINX_BIN";
    if (!strcmp(kind, "h2o"))
        return "H2O_BIN";
    if (!strcmp(kind, "lighttpd"))
        return "LIGHTTPD_BIN";
    return NULL;
}

static int executable(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
}

int lab_server_find(const char *kind, char *path, size_t n)
{
    const char *env = bin_env(kind);
    const char *given = env ? getenv(env) : NULL;
    if (given && *given) {
        if (strchr(given, '/')) {
            snprintf(path, n, "%s", given);
            return executable(path) ? 0 : -1;
        }
        kind = given;
    }
    /* Servers live in sbin, which a user's PATH often lacks. */
    const char *p = getenv("PATH");
    char dirs[4096];
    snprintf(dirs, sizeof dirs, "%s:/usr/local/sbin:/usr/sbin:/sbin", p ? p : "/usr/bin:/bin");
    char *save, *d = strtok_r(dirs, ":", &save);
    for (; d; d = strtok_r(NULL, ":", &save)) {
        if (!*d)
            continue;
        snprintf(path, n, "%s/%s", d, kind);
        if (executable(path))
            return 0;
    }
    return -1;
}

static int write_file(const char *path, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int write_file(const char *path, char *err, size_t errlen, const char *fmt, ...)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    if (fclose(f) != 0) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* Appends s to store and returns where it went. */
static char *keep(char **at, char *end, const char *s)
{
    size_t len = strlen(s) + 1;
    if (*at + len > end)
        return NULL;
    char *p = memcpy(*at, s, len);
    *at += len;
    return p;
}

int lab_server_command(struct lab_server *s, const char *herd_bin, const char *docroot,
                       const char *dir, int port, long nofile, char *store, size_t storelen,
                       char **argv, int maxargs, char *err, size_t errlen)
{
    char *at = store, *end = store + storelen;
    const char *args[24];
    int argc = 0;
    char listen[64], conf[700], prefix[700], errlog[700], portstr[16], workers[16];
    long maxconn = nofile - 100;
    snprintf(portstr, sizeof portstr, "%d", port);
    snprintf(errlog, sizeof errlog, "%s/error.log", dir);
    s->config[0] = 0;

    if (!strcmp(s->kind, "herd")) {
        snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
        snprintf(workers, sizeof workers, "%d", s->workers > 1 ? s->workers : 1);
        const char *a[] = {herd_bin, "serve", docroot, "--model", s->model, "--workers", workers,
                           "--keepalive-requests", "100000000", "--status-path", "/herd-status",
                           "--listen", listen};
        for (size_t i = 0; i < sizeof a / sizeof a[0]; i++)
            args[argc++] = a[i];
        if (s->pid_file[0]) {
            args[argc++] = "--pid-file";
            args[argc++] = s->pid_file;
        }
    } else if (!strcmp(s->kind, "nginx")) {
        snprintf(conf, sizeof conf, "%s/nginx.conf", dir);
        snprintf(prefix, sizeof prefix, "%s/nginx", dir);
        if (mkdir(prefix, 0755) < 0 && errno != EEXIST) {
            snprintf(err, errlen, "cannot create %s: %s", prefix, strerror(errno));
            return -1;
        }
        if (write_file(conf, err, errlen,
                       "%s"
                       "worker_processes %d;\n"
                       "daemon off;\n"
                       "pid %s/nginx.pid;\n"
                       "error_log %s warn;\n"
                       "worker_rlimit_nofile %ld;\n"
                       "events { worker_connections %ld; use epoll; }\n"
                       "http {\n"
                       "    include /etc/nginx/mime.types;\n"
                       "    default_type application/octet-stream;\n"
                       "    access_log off;\n"
                       "    sendfile on;\n"
                       "    tcp_nopush off;\n"
                       "    tcp_nodelay on;\n"
                       "    keepalive_timeout 65s;\n"
                       "    keepalive_requests 100000000;\n"
                       "    open_file_cache max=1024 inactive=60s;\n"
                       "    server {\n"
                       "        listen 127.0.0.1:%d;\n"
                       "        server_name localhost;\n"
                       "        root %s;\n"
                       "        location / { }\n"
                       "    }\n"
                       "}\n",
                       s->workers_as_root ? "user root;\n" : "", s->workers > 1 ? s->workers : 1,
                       dir, errlog, nofile, maxconn, port, docroot) < 0)
            return -1;
        const char *a[] = {s->bin, "-p", prefix, "-e", errlog, "-c", conf};
        for (size_t i = 0; i < sizeof a / sizeof a[0]; i++)
            args[argc++] = a[i];
        snprintf(s->config, sizeof s->config, "nginx.conf");
    } else if (!strcmp(s->kind, "h2o")) {
        snprintf(conf, sizeof conf, "%s/h2o.conf", dir);
        if (write_file(conf, err, errlen,
                       "%s"
                       "num-threads: 1\n"
                       "max-connections: %ld\n"
                       "http1-request-timeout: 65\n"
                       "error-log: %s\n"
                       "listen:\n"
                       "  host: 127.0.0.1\n"
                       "  port: %d\n"
                       "hosts:\n"
                       "  default:\n"
                       "    paths:\n"
                       "      /:\n"
                       "        file.dir: %s\n",
                       s->workers_as_root ? "user: root\n" : "", maxconn, errlog, port,
                       docroot) < 0)
            return -1;
        const char *a[] = {s->bin, "-m", "worker", "-c", conf};
        for (size_t i = 0; i < sizeof a / sizeof a[0]; i++)
            args[argc++] = a[i];
        snprintf(s->config, sizeof s->config, "h2o.conf");
    } else if (!strcmp(s->kind, "lighttpd")) {
        snprintf(conf, sizeof conf, "%s/lighttpd.conf", dir);
        /* lighttpd holds at most max-fds/2 connections. */
        long lmax = maxconn < nofile / 2 ? maxconn : nofile / 2;
        if (write_file(conf, err, errlen,
                       "server.document-root = \"%s\"\n"
                       "server.bind = \"127.0.0.1\"\n"
                       "server.port = %d\n"
                       "server.max-worker = 0\n"
                       "server.max-fds = %ld\n"
                       "server.max-connections = %ld\n"
                       "server.max-keep-alive-requests = 65535\n"
                       "server.max-keep-alive-idle = 65\n"
                       "server.max-read-idle = 65\n"
                       "server.network-backend = \"sendfile\"\n"
                       "server.errorlog = \"%s\"\n"
                       "server.pid-file = \"%s/lighttpd.pid\"\n"
                       "index-file.names = ( \"index.html\" )\n"
                       "mimetype.assign = ( \".html\" => \"text/html\", "
                       "\".bin\" => \"application/octet-stream\" )\n",
                       docroot, port, nofile, lmax, errlog, dir) < 0)
            return -1;
        const char *a[] = {s->bin, "-D", "-f", conf};
        for (size_t i = 0; i < sizeof a / sizeof a[0]; i++)
            args[argc++] = a[i];
        snprintf(s->config, sizeof s->config, "lighttpd.conf");
    } else {
        snprintf(err, errlen, "unknown server %s", s->kind);
        return -1;
    }
    if (argc >= maxargs) {
        snprintf(err, errlen, "command line too long");
        return -1;
    }
    size_t used = 0;
    s->command[0] = 0;
    for (int i = 0; i < argc; i++) {
        argv[i] = keep(&at, end, args[i]);
        if (!argv[i]) {
            snprintf(err, errlen, "command line too long");
            return -1;
        }
        int w = snprintf(s->command + used, sizeof s->command - used, "%s%s", i ? " " : "",
                         args[i]);
        if (w > 0 && used + (size_t)w < sizeof s->command)
            used += (size_t)w;
    }
    argv[argc] = NULL;
    return argc;
}

void lab_server_version(struct lab_server *s, const char *dir, int cpu)
{
    s->version[0] = 0;
    if (!strcmp(s->kind, "herd"))
        return;
    char out[700], err[256];
    snprintf(out, sizeof out, "%s/version.txt", dir);
    unlink(out);
    char *argv[] = {s->bin, strcmp(s->kind, "h2o") ? "-v" : "--version", NULL};
    pid_t pid = lproc_spawn(argv, cpu, out, err, sizeof err);
    if (pid < 0)
        return;
    if (lproc_wait(pid, 5000, NULL, NULL) != 0) {
        lproc_stop(pid, 500);
        return;
    }
    FILE *f = fopen(out, "r");
    if (!f)
        return;
    char line[256] = "";
    if (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        /* "nginx version: nginx/1.22.1", "h2o version 2.2.5", "lighttpd/1.4.69 (ssl) - ..." */
        const char *v = strstr(line, "version: ");
        v = v ? v + 9 : line;
        snprintf(s->version, sizeof s->version, "%.*s", (int)sizeof s->version - 1, v);
        char *dash = strstr(s->version, " - ");
        if (dash)
            *dash = 0;
        text_printable(s->version, strlen(s->version), 0);
    }
    fclose(f);
}

/* herd status without a URL: read the server's config file and pid file
 * instead of guessing 127.0.0.1:8080. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/status_find.h"
#include "proc/config.h"
#include "proc/daemon.h"

static int read_pid(const char *path, char *err, size_t errlen)
{
    pid_t pid = pidfile_read(path, err, errlen);
    if (pid < 0)
        return -1;
    if (kill(pid, 0) < 0 && errno == ESRCH) {
        snprintf(err, errlen, "pid file %s names pid %d, which is not running", path, (int)pid);
        return -1;
    }
    return (int)pid;
}

/* 1 when process pid holds the socket with this inode. */
static int pid_holds(int pid, unsigned long inode)
{
    char dir[64], want[64], link[64];
    snprintf(dir, sizeof dir, "/proc/%d/fd", pid);
    snprintf(want, sizeof want, "socket:[%lu]", inode);
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int found = 0;
    struct dirent *e;
    while (!found && (e = readdir(d))) {
        char path[320];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        ssize_t n = readlink(path, link, sizeof link - 1);
        if (n > 0) {
            link[n] = '\0';
            found = !strcmp(link, want);
        }
    }
    closedir(d);
    return found;
}

/* The first IPv4 TCP port process pid listens on (its address, with
 * 0.0.0.0 read as 127.0.0.1), as "HOST:PORT"; -1 when none. */
static int pid_listen_addr(int pid, char *hostport, size_t cap)
{
    FILE *f = fopen("/proc/net/tcp", "r");
    if (!f)
        return -1;
    char line[512];
    int rc = -1;
    while (rc < 0 && fgets(line, sizeof line, f)) {
        unsigned addr, port, state;
        unsigned long inode;
        if (sscanf(line, " %*d: %x:%x %*x:%*x %x %*x:%*x %*x:%*x %*x %*u %*u %lu", &addr, &port,
                   &state, &inode) != 4 || state != 0x0A || !pid_holds(pid, inode))
            continue;
        struct in_addr in = {.s_addr = addr ? addr : htonl(INADDR_LOOPBACK)};
        snprintf(hostport, cap, "%s:%u", inet_ntoa(in), port);
        rc = 0;
    }
    fclose(f);
    return rc;
}

/* "host:port" to reach a listen address from this machine: a wildcard
 * is asked on loopback. */
static void hostport_of(const struct listen_addr *l, char *out, size_t cap)
{
    char host[INET6_ADDRSTRLEN] = "127.0.0.1";
    unsigned port = 0;
    if (l->ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const void *)&l->ss;
        port = ntohs(a->sin6_port);
        if (IN6_IS_ADDR_UNSPECIFIED(&a->sin6_addr))
            snprintf(host, sizeof host, "::1");
        else
            inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
        snprintf(out, cap, "[%s]:%u", host, port);
        return;
    }
    const struct sockaddr_in *a = (const void *)&l->ss;
    port = ntohs(a->sin_port);
    if (a->sin_addr.s_addr != htonl(INADDR_ANY))
        inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
    snprintf(out, cap, "%s:%u", host, port);
}

int status_find(const char *config, const char *pid_file, char *url, size_t urlcap, char *err,
                size_t errlen)
{
    static struct serve_config cfg; /* large; one use per run */
    config_defaults(&cfg);
    const char *path = "/herd-status";
    if (config) {
        if (config_load(&cfg, config, err, errlen) < 0)
            return -1;
        if (!cfg.http.status_path[0]) {
            snprintf(err, errlen, "%s sets no status-path, so the server has no status page",
                     config);
            return -1;
        }
        path = cfg.http.status_path;
        if (!pid_file && cfg.pid_file[0])
            pid_file = cfg.pid_file;
    }
    char hostport[160] = "127.0.0.1:8080";
    if (pid_file) {
        int pid = read_pid(pid_file, err, errlen);
        if (pid < 0)
            return -1;
        if (pid_listen_addr(pid, hostport, sizeof hostport) < 0) {
            snprintf(err, errlen, "pid %d (from %s) listens on no IPv4 TCP port "
                     "(give its URL instead)", pid, pid_file);
            return -1;
        }
    } else if (config && cfg.nlisten > 0) {
        const struct listen_addr *l = &cfg.listen[0];
        if (l->family == AF_UNIX) {
            snprintf(url, urlcap, "%s:%s", l->text, path);
            return 0;
        }
        if (cfg.listen_tls[0]) {
            snprintf(err, errlen, "%s: the first listen address (%s) is TLS, and herd status "
                     "speaks plain HTTP (give the URL of a plain one)", config, l->text);
            return -1;
        }
        /* from the parsed address, not the text: "8080" and "*:8080" are
         * every address, as 0.0.0.0:8080 is */
        hostport_of(l, hostport, sizeof hostport);
    }
    snprintf(url, urlcap, "http://%s%s", hostport, path);
    return 0;
}

#include "proc/listeners.h"

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/log.h"
#include "net/listen.h"

int listeners_count(const struct listeners *ls, int l)
{
    return ls->shared[l] ? 1 : ls->nsockets;
}

/* Takes up to count inherited sockets for listen address l into ls->fds[l];
 * returns how many it got, with ls->shared[l] set when the model wants one
 * socket per worker but the inherited one cannot have siblings: then the
 * workers share it, as in prefork. */
static int take_inherited(struct listeners *ls, struct serve_config *cfg, struct inherited *in,
                          int l, int count, int upgraded)
{
    struct listen_addr *a = &cfg->listen[l];
    int got = 0;
    const struct inherited_fd *f, *first = NULL;
    while (got < count && (f = inherit_take(in, a))) {
        first = first ? first : f;
        ls->fds[l][got++] = f->fd;
    }
    if (!got)
        return 0;
    /* A herd master handing over after an upgrade passes the unix path with
     * the socket; systemd keeps its own. */
    ls->path_ours[l] = upgraded && first->path_ours;
    if (got == count)
        return got;
    int err = 0;
    if (first->reuseport) {
        for (; got < count; got++) {
            int fd = listen_open(a, cfg->backlog, 1);
            if (fd < 0) {
                err = -fd;
                break;
            }
            ls->fds[l][got] = fd;
        }
        if (got == count)
            return got;
    }
    log_msg(LOG_WARN, "%s: %s%s; its %d workers share the inherited socket (EPOLLEXCLUSIVE)",
            a->text,
            first->reuseport ? "cannot bind a socket per worker next to the inherited one: "
                             : "the inherited socket has no SO_REUSEPORT",
            err ? strerror(err) : "", ls->nsockets);
    while (got > 1)
        close(ls->fds[l][--got]);
    ls->shared[l] = 1;
    return 1;
}

/* Started by systemd with no --listen: serve what it passed. */
static int adopt_passed(struct listeners *ls, struct serve_config *cfg, struct inherited *in)
{
    if (!in->n || !cfg->listen_default)
        return 0;
    int n = inherit_addresses(in, cfg->listen, CONFIG_MAX_LISTEN);
    if (n > CONFIG_MAX_LISTEN) {
        /* serving some would close the rest: connections refused there */
        fprintf(stderr, "herd: LISTEN_FDS passes %d addresses; herd serves at most %d\n", n,
                CONFIG_MAX_LISTEN);
        return -1;
    }
    if (n <= 0)
        return 0;
    cfg->nlisten = n;
    for (int l = 0; l < n; l++)
        cfg->listen_proxy[l] = cfg->proxy_protocol;
    ls->passed = 1;
    return 0;
}

/* Address l: inherited sockets first, then bound ones. 0 or -errno. */
int listeners_open_one(struct listeners *ls, struct serve_config *cfg, struct inherited *in,
                    int l, int upgraded)
{
    struct listen_addr *a = &cfg->listen[l];
    ls->shared[l] = a->family == AF_UNIX || ls->nsockets == 1;
    int count = listeners_count(ls, l);
    int inherited = take_inherited(ls, cfg, in, l, count, upgraded);
    if (inherited)
        count = listeners_count(ls, l);
    else
        ls->path_ours[l] = 1;
    /* A reuseport group would join one that already serves a. */
    int probe = !inherited && !ls->shared[l] ? listen_probe(a) : 0;
    int err = probe < 0 ? probe : 0;
    for (int i = inherited; i < count && !err; i++) {
        /* The first bind resolves port 0; the others reuse that port. */
        int fd = listen_open(a, cfg->backlog, !ls->shared[l]);
        if (fd < 0)
            err = fd;
        else
            ls->fds[l][i] = fd;
    }
    if (probe > 0)
        close(probe);
    if (err)
        return err;
    for (int i = count; i < ls->nsockets; i++)
        ls->fds[l][i] = ls->fds[l][0];
    ls->inherited[l] = inherited > 0;
    return 0;
}

void listeners_announce(const struct listeners *ls, const struct serve_config *cfg, int l)
{
    char desc[160];
    listen_describe(&cfg->listen[l], desc, sizeof desc);
    log_msg(LOG_NOTICE, "listening on %s%s%s", desc, cfg->listen_tls[l] ? " (TLS)" : "",
            ls->inherited[l] ? " (inherited)" : "");
}

int listeners_open(struct listeners *ls, struct serve_config *cfg, struct inherited *in,
                   int upgraded)
{
    if (adopt_passed(ls, cfg, in) < 0)
        return -1;
    for (int l = 0; l < cfg->nlisten; l++) {
        int err = listeners_open_one(ls, cfg, in, l, upgraded);
        if (err) {
            fprintf(stderr, "herd: cannot listen on %s: %s\n", cfg->listen[l].text,
                    strerror(-err));
            /* the unix socket files made so far go: no server is behind
             * them (after an upgrade the old master still serves its) */
            if (!upgraded)
                listeners_unlink(ls, cfg);
            return -1;
        }
        ls->nlisten = l + 1;
    }
    int unused = inherit_close_unused(in);
    if (unused)
        log_msg(LOG_NOTICE, "closed %d inherited sockets that no listen address wants", unused);
    return 0;
}

void listeners_close(struct listeners *ls)
{
    for (int l = 0; l < ls->nlisten; l++) {
        int count = listeners_count(ls, l);
        for (int i = 0; i < count; i++)
            if (ls->fds[l][i] >= 0)
                close(ls->fds[l][i]);
        for (int i = 0; i < ls->nsockets; i++)
            ls->fds[l][i] = -1;
    }
}

void listeners_unlink(const struct listeners *ls, const struct serve_config *cfg)
{
    for (int l = 0; l < ls->nlisten; l++)
        if (ls->path_ours[l])
            listen_cleanup(&cfg->listen[l]);
}

/* The master's listen sockets: for each listen address either one socket
 * every worker shares, or a reuseport group of one socket per worker (or
 * per thread) bound to the same port. Sockets passed by systemd or by an
 * old master in a binary upgrade (net/inherit.h) are taken before anything
 * is bound; a reuseport group is never joined to one that already serves
 * the address (the busy-port probe). Workers and upgrades read the fds
 * from struct listeners directly. */
#ifndef HERD_PROC_LISTENERS_H
#define HERD_PROC_LISTENERS_H

#include <stdint.h>

#include "net/inherit.h"
#include "proc/config.h"

struct listeners {
    int nlisten;        /* listen addresses opened */
    int nsockets;       /* sockets per address the model wants (reuseport group size) */
    int fds[CONFIG_MAX_LISTEN][CONFIG_MAX_WORKERS]; /* [listen][i]; shared: all fds[l][0] */
    uint8_t shared[CONFIG_MAX_LISTEN];     /* 1: one socket for every worker */
    uint8_t path_ours[CONFIG_MAX_LISTEN];  /* a unix path to remove at exit */
    uint8_t inherited[CONFIG_MAX_LISTEN];  /* taken from systemd or an old master */
    uint8_t passed;     /* no listen address given: serving what LISTEN_FDS passed */
};

/* Opens cfg's listen addresses, nsockets each (set ls->nsockets first),
 * taking inherited sockets from in first; with no --listen and sockets in
 * `in`, cfg's addresses become the passed ones. upgraded: started by an
 * old master, whose unix paths we take over. Returns 0, or -1 after
 * printing "herd: cannot listen on ADDR: reason" to stderr. */
int listeners_open(struct listeners *ls, struct serve_config *cfg, struct inherited *in,
                   int upgraded);

/* Opens address l alone (inherited sockets from in first, then bound):
 * sets ls->fds[l], shared[l], path_ours[l] and inherited[l].
 * Returns 0 or -errno. */
int listeners_open_one(struct listeners *ls, struct serve_config *cfg, struct inherited *in,
                       int l, int upgraded);

/* Logs "listening on ADDR" for address l. Called once the start (or the
 * reload) can no longer be refused, so an operator never reads that herd
 * listens where a failed start bound for a moment. */
void listeners_announce(const struct listeners *ls, const struct serve_config *cfg, int l);

/* The distinct sockets of address l: 1 when shared, else nsockets. */
int listeners_count(const struct listeners *ls, int l);

/* Closes every socket (the master's copies; workers keep theirs). */
void listeners_close(struct listeners *ls);

/* Removes the unix socket paths this process made. */
void listeners_unlink(const struct listeners *ls, const struct serve_config *cfg);

#endif

/* Listen sockets handed over across exec, with the sd_listen_fds(3)
 * protocol that systemd socket activation uses and herd's binary upgrade
 * reuses: the sockets are fds 3 .. 3+LISTEN_FDS-1, they are ours only when
 * LISTEN_PID is our pid, and LISTEN_FDNAMES names them (colon-separated).
 *
 * herd names each socket it passes "TEXT#SLOT": TEXT is the --listen text
 * with ':', '%', '#' and unprintable bytes %-escaped (systemd forbids ':'
 * in names), SLOT the worker slot; "TEXT#SLOT#keep" when a unix socket's
 * path belongs to someone else (systemd) and must outlive us. A listen
 * address with port 0 finds its
 * socket again by that text; every other address is matched by the address
 * the socket is bound to (getsockname), so sockets from systemd match
 * whatever they are named. Functions return -errno on failure. */
#ifndef HERD_NET_INHERIT_H
#define HERD_NET_INHERIT_H

#include <stddef.h>
#include <sys/socket.h>

#include "net/listen.h"

#define INHERIT_FIRST_FD 3

struct inherited_fd {
    int fd;
    int taken;                     /* handed to a listen address */
    int reuseport;                 /* bound with SO_REUSEPORT */
    struct sockaddr_storage ss;    /* what it is bound to */
    socklen_t len;
    const char *name;              /* from LISTEN_FDNAMES, "" when none */
    int path_ours;                 /* named by herd, no "#keep": a unix path we may remove */
};

struct inherited {
    int n;
    struct inherited_fd *fds;
    char *names;                   /* the LISTEN_FDNAMES copy names point into */
};

/* Reads and unsets LISTEN_PID, LISTEN_FDS and LISTEN_FDNAMES (so children
 * do not see them). When they are meant for this process, every passed fd
 * must be an open, listening TCP or unix stream socket; they are made
 * non-blocking and close-on-exec. Returns how many were passed (0 when
 * nothing was passed to us), or -1 with a one-line reason in err when the
 * variables are malformed or a passed fd is missing or of another kind.
 * Call it before opening any fd of our own: until then, a gap at fd 3..
 * is not mistaken for one of ours, nor one of ours for a passed socket. */
int inherit_from_env(struct inherited *in, char *err, size_t errlen);

/* The next unused inherited socket for a, or NULL. The first one taken
 * for an address with port 0 fixes a's real port, so later calls for the
 * same address take only sockets bound to that port. */
const struct inherited_fd *inherit_take(struct inherited *in, struct listen_addr *a);

/* Fills out with one listen address per distinct bound address among the
 * inherited sockets (for "no --listen: serve on what was passed"), at most
 * max of them. Returns how many there are: more than max when some did not
 * fit. */
int inherit_addresses(const struct inherited *in, struct listen_addr *out, int max);

/* Closes the inherited sockets no address took; returns how many. */
int inherit_close_unused(struct inherited *in);

void inherit_free(struct inherited *in);

/* The name herd gives the socket of address a in slot (see above). */
void inherit_name(const struct listen_addr *a, int slot, int keep, char *buf, size_t n);

/* In a forked child about to exec: places fds[0..n-1] at 3..3+n-1 with
 * close-on-exec cleared, and extra[0..nextra-1] right after them; closes
 * every fd above those; sets LISTEN_FDS, LISTEN_PID (this pid, which exec
 * keeps) and LISTEN_FDNAMES from names. Returns the fd extra[0] now has
 * (3+n; 0 when nextra is 0), or -errno. */
int inherit_export(const int *fds, char *const *names, int n, const int *extra, int nextra);

#endif

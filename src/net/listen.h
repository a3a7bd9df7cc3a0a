/* Listen addresses: "HOST:PORT", "[V6]:PORT", "unix:/path". Parsing is
 * separate from binding so a bad flag fails before any socket exists.
 * Functions that can fail return -errno (or -1 with a message for parsing). */
#ifndef HERD_NET_LISTEN_H
#define HERD_NET_LISTEN_H

#include <stddef.h>
#include <sys/socket.h>

struct listen_addr {
    char text[128];                /* as the user wrote it */
    struct sockaddr_storage ss;    /* bound address once open (real port) */
    socklen_t len;
    int family;                    /* AF_INET, AF_INET6, AF_UNIX */
};

/* Returns 0, or -1 with a one-line reason in err. */
int listen_parse(const char *s, struct listen_addr *out, char *err, size_t errlen);

/* Binds and listens (non-blocking, close-on-exec). A unix socket path left
 * by a dead server is removed first; one with a live server is EADDRINUSE.
 * With reuseport, several sockets may bind the same address (one per
 * worker; the kernel spreads connections over them). Returns the fd or
 * -errno. */
int listen_open(struct listen_addr *a, int backlog, int reuseport);

/* Before binding a reuseport group on a TCP address: SO_REUSEPORT lets any
 * process of the same user join a listening group, so a second server on a
 * served address would start and silently take a share of its connections.
 * The probe is bound (not listening) without SO_REUSEPORT, which fails with
 * EADDRINUSE when anything listens on a. It has SO_REUSEADDR and does not
 * listen, so the group's own sockets bind next to it; keep it until they
 * listen, then close it (with port 0 it holds the port it picked, which it
 * writes into a, for the group). Returns the probe's fd or -errno. */
int listen_probe(struct listen_addr *a);

/* Makes a unix socket path free to bind: nothing there, or a dead
 * server's socket file (removed). -EADDRINUSE when a server answers
 * there, -EEXIST when something other than a socket is there. */
int listen_unix_path_free(const struct listen_addr *a);

/* Sets TCP_NODELAY on a TCP listener (a unix socket refuses it, harmlessly).
 * Linux copies a listener's options to the sockets accept4 returns, so the
 * accepted connections have it without a setsockopt each; listen_open and
 * inherited sockets (net/inherit.c) get it. */
void listen_nodelay(int fd);

/* Removes a unix socket path at exit. */
void listen_cleanup(const struct listen_addr *a);

/* "http://127.0.0.1:8080/", "http://[::1]:8080/" or "unix:/path". */
void listen_describe(const struct listen_addr *a, char *buf, size_t n);

#endif

/* Accepting connections: accept4(NONBLOCK|CLOEXEC) and the EMFILE defence.
 * TCP_NODELAY is not set here: accepted sockets inherit it from their
 * listener (listen_nodelay in net/listen.h), one setsockopt per listener
 * instead of one per connection.
 *
 * The defence is libuv's trick: a spare fd released to accept one
 * connection and close it, so a flood past the fd limit is refused instead
 * of sitting in the backlog. The spare is one per process, behind a mutex,
 * because a process's threads share one fd table: a spare per thread lets
 * another thread's accept4 take the number a thread just freed. That can
 * still happen to the one spare (any thread may open an fd meanwhile), so
 * a lost spare is taken back as soon as an fd is free, and until then
 * net_accept says -EMFILE: the caller stops accepting for
 * NET_ACCEPT_BACKOFF_MS (as nginx does on EMFILE) instead of spinning. */
#ifndef HERD_NET_ACCEPT_H
#define HERD_NET_ACCEPT_H

#include <sys/socket.h>

/* How long a caller stops accepting after -EMFILE. */
#define NET_ACCEPT_BACKOFF_MS 100

struct acceptor {
    long refused; /* connections this caller closed for lack of fds */
};

/* Takes a reference on the process's spare fd (opened by the first). */
void acceptor_init(struct acceptor *ac);
/* Drops it; the last one closes the spare. */
void acceptor_close(struct acceptor *ac);

/* Returns a connected fd (its address in *peer unless peer is NULL), or:
 * -EAGAIN        the backlog is empty;
 * -ECONNREFUSED  out of fds: one connection was accepted and closed at
 *                once (counted in ac->refused); call again;
 * -EMFILE        out of fds and no spare to refuse with: stop accepting
 *                for NET_ACCEPT_BACKOFF_MS, then try again;
 * another -errno from accept4. */
int net_accept(struct acceptor *ac, int lfd, struct sockaddr_storage *peer);

/* Whether a client waits in listen socket lfd's backlog: a look (a
 * zero-timeout poll), no accept. */
int net_backlog_waiting(int lfd);

#endif

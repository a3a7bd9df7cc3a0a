/* Accepting connections: accept4(NONBLOCK|CLOEXEC), TCP_NODELAY on TCP,
 * and the EMFILE trick (a spare fd released to accept and close, so a flood
 * past the fd limit drains the backlog instead of spinning the loop). */
#ifndef HERD_NET_ACCEPT_H
#define HERD_NET_ACCEPT_H

#include <sys/socket.h>

struct acceptor {
    int spare_fd;     /* /dev/null, given up on EMFILE */
    long emfile_hits; /* connections closed for lack of fds */
};

void acceptor_init(struct acceptor *ac);
void acceptor_close(struct acceptor *ac);

/* Returns a connected fd (its address in *peer unless peer is NULL), -EAGAIN when the backlog is empty, or another
 * -errno (connections closed at once for lack of fds give -EMFILE). */
int net_accept(struct acceptor *ac, int lfd, int tcp, struct sockaddr_storage *peer);

#endif

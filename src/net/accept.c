#include "net/accept.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

void acceptor_init(struct acceptor *ac)
{
    ac->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    ac->emfile_hits = 0;
}

void acceptor_close(struct acceptor *ac)
{
    if (ac->spare_fd >= 0)
        close(ac->spare_fd);
    ac->spare_fd = -1;
}

int net_accept(struct acceptor *ac, int lfd, int tcp, struct sockaddr_storage *peer)
{
    for (;;) {
        socklen_t plen = sizeof *peer;
        int fd = accept4(lfd, (struct sockaddr *)peer, peer ? &plen : NULL,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            if (tcp) {
                int one = 1;
                setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            }
            return fd;
        }
        int err = errno;
        if (err == EINTR || err == ECONNABORTED)
            continue;
        if ((err == EMFILE || err == ENFILE) && ac->spare_fd >= 0) {
            /* Free one fd, take the connection off the queue and refuse it. */
            close(ac->spare_fd);
            fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
            if (fd >= 0)
                close(fd);
            ac->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
            ac->emfile_hits++;
            if (fd < 0)
                return -EAGAIN;
            return -EMFILE;
        }
        return -err;
    }
}

#include "net/accept.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

/* The process's spare fd. fd is written under lock and read without it
 * (atomically) only to see whether a lost spare needs taking back. A
 * forked child inherits the spare and the count, which stay right: the
 * child's fd table holds its own copy of the fd. */
static struct {
    pthread_mutex_t lock;
    int fd;   /* /dev/null, or -1 while lost */
    int refs; /* live acceptors */
} spare = {PTHREAD_MUTEX_INITIALIZER, -1, 0};

static void spare_reopen_locked(void)
{
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    __atomic_store_n(&spare.fd, fd, __ATOMIC_RELAXED);
}

void acceptor_init(struct acceptor *ac)
{
    ac->refused = 0;
    pthread_mutex_lock(&spare.lock);
    spare.refs++;
    if (spare.fd < 0)
        spare_reopen_locked();
    pthread_mutex_unlock(&spare.lock);
}

void acceptor_close(struct acceptor *ac)
{
    (void)ac;
    pthread_mutex_lock(&spare.lock);
    if (spare.refs > 0 && --spare.refs == 0 && spare.fd >= 0) {
        close(spare.fd);
        __atomic_store_n(&spare.fd, -1, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&spare.lock);
}

/* A lost spare comes back with the first free fd, before a connection can
 * take that fd: otherwise the next flood finds nothing to refuse with. */
static void spare_take_back(void)
{
    pthread_mutex_lock(&spare.lock);
    if (spare.fd < 0 && spare.refs > 0)
        spare_reopen_locked();
    pthread_mutex_unlock(&spare.lock);
}

/* Out of fds: frees the spare to accept one connection and close it.
 * Returns -ECONNREFUSED when one was refused, -EAGAIN when the backlog
 * was empty, -EMFILE when there is no spare or another thread took the
 * freed number first (the spare is then lost until an fd frees up). */
static int refuse_one(int lfd)
{
    int rc = -EMFILE;
    pthread_mutex_lock(&spare.lock);
    if (spare.fd < 0)
        spare_reopen_locked();
    if (spare.fd >= 0) {
        close(spare.fd);
        int fd, err;
        do {
            fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
            err = errno;
        } while (fd < 0 && (err == EINTR || err == ECONNABORTED));
        if (fd >= 0) {
            close(fd);
            rc = -ECONNREFUSED;
        } else {
            rc = err == EAGAIN || err == EWOULDBLOCK ? -EAGAIN
                 : err == EMFILE || err == ENFILE     ? -EMFILE
                                                      : -err;
        }
        spare_reopen_locked();
    }
    pthread_mutex_unlock(&spare.lock);
    return rc;
}

int net_accept(struct acceptor *ac, int lfd, struct sockaddr_storage *peer)
{
    if (__atomic_load_n(&spare.fd, __ATOMIC_RELAXED) < 0)
        spare_take_back();
    for (;;) {
        socklen_t plen = sizeof *peer;
        int fd = accept4(lfd, (struct sockaddr *)peer, peer ? &plen : NULL,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            return fd;
        }
        int err = errno;
        if (err == EINTR || err == ECONNABORTED)
            continue;
        if (err == EMFILE || err == ENFILE) {
            int rc = refuse_one(lfd);
            if (rc == -ECONNREFUSED)
                ac->refused++;
            return rc;
        }
        return -err;
    }
}

int net_backlog_waiting(int lfd)
{
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

#include "proc/handover.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/log.h"

#define CHANNEL_BUF (4 << 20) /* many connections in flight on a big reload */

int handover_channel(int sv[2])
{
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return -errno;
    int size = CHANNEL_BUF;
    for (int i = 0; i < 2; i++) {
        /* capped at net.core.wmem_max; the default still holds hundreds */
        setsockopt(sv[i], SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
        setsockopt(sv[i], SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
    }
    return 0;
}

int handover_send(int ch, const struct handover_msg *m, const void *in, int fd)
{
    struct iovec iov[2] = {{(void *)m, sizeof *m}, {(void *)in, m->in_len}};
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } u;
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = m->in_len ? 2 : 1};
    if (fd >= 0) {
        msg.msg_control = u.buf;
        msg.msg_controllen = sizeof u.buf;
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    for (;;) {
        if (sendmsg(ch, &msg, MSG_DONTWAIT | MSG_NOSIGNAL) >= 0)
            return 0;
        if (errno != EINTR)
            return errno == ENOBUFS ? -EAGAIN : -errno;
    }
}

int handover_recv(int ch, struct handover_msg *m, void *in, size_t cap, int *fd)
{
    struct iovec iov[2] = {{m, sizeof *m}, {in, cap}};
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } u;
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = 2, .msg_control = u.buf,
                         .msg_controllen = sizeof u.buf};
    *fd = -1;
    ssize_t n;
    do
        n = recvmsg(ch, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return -errno;
    if (n == 0)
        return 0;
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
        c->cmsg_len >= CMSG_LEN(sizeof(int)))
        memcpy(fd, CMSG_DATA(c), sizeof(int));
    if (msg.msg_flags & MSG_CTRUNC)
        return -EMFILE;
    if ((size_t)n < sizeof *m || (m->state_len & ~HO_TLS_FRESH) > HANDOVER_STATE_MAX ||
        (size_t)n != sizeof *m + m->in_len || (msg.msg_flags & MSG_TRUNC))
        return -EMSGSIZE;
    return 1;
}

int handover_next(int ch, struct handover_msg *m, void *in, size_t cap, int *fd)
{
    for (;;) {
        int rc = handover_recv(ch, m, in, cap, fd);
        if (rc == -EAGAIN || rc == 0)
            return rc;
        if (rc > 0 && (m->kind == HO_ACK || *fd >= 0))
            return 1;
        log_msg(LOG_ERROR, "handover: %s", rc == -EMFILE
                ? "out of file descriptors: a connection was lost"
                : rc < 0 ? strerror(-rc) : "a message without its connection");
        if (*fd >= 0)
            close(*fd);
    }
}

/* A client socket whose buffer is full at the wrong moment, for tests
 * (LD_PRELOAD into herd):
 *   SHORT_SEND_PREFIX=TEXT SHORT_SEND_BYTES=N  a send(2) or sendmsg(2)
 *       whose bytes begin with TEXT takes only N of them (0: EAGAIN), as
 *       a nearly full socket buffer does, once per process;
 *   SHORT_WRITE_LEN=N  the first write(2) of exactly N bytes to a socket
 *       (a TLS record of known size) fails with EAGAIN, once per process.
 * Everything else passes through. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

static size_t cut_to(const void *buf, size_t len)
{
    static int done;
    const char *prefix = getenv("SHORT_SEND_PREFIX");
    const char *bytes = getenv("SHORT_SEND_BYTES");
    size_t plen = prefix ? strlen(prefix) : 0;
    if (done || !plen || !bytes || len < plen || memcmp(buf, prefix, plen))
        return len;
    done = 1;
    size_t n = (size_t)atol(bytes);
    return n < len ? n : len;
}

static ssize_t refused(void)
{
    errno = EAGAIN;
    return -1;
}

ssize_t send(int fd, const void *buf, size_t len, int flags)
{
    static ssize_t (*next)(int, const void *, size_t, int);
    if (!next)
        next = (ssize_t (*)(int, const void *, size_t, int))dlsym(RTLD_NEXT, "send");
    size_t n = cut_to(buf, len);
    return n ? next(fd, buf, n, flags) : refused();
}

ssize_t sendmsg(int fd, const struct msghdr *m, int flags)
{
    static ssize_t (*next)(int, const struct msghdr *, int);
    if (!next)
        next = (ssize_t (*)(int, const struct msghdr *, int))dlsym(RTLD_NEXT, "sendmsg");
    if (m->msg_iovlen < 1 || !m->msg_iov[0].iov_len)
        return next(fd, m, flags);
    size_t n = cut_to(m->msg_iov[0].iov_base, m->msg_iov[0].iov_len);
    if (n == m->msg_iov[0].iov_len)
        return next(fd, m, flags);
    if (!n)
        return refused();
    struct iovec first = {m->msg_iov[0].iov_base, n};
    struct msghdr cut = *m;
    cut.msg_iov = &first;
    cut.msg_iovlen = 1;
    return next(fd, &cut, flags);
}

ssize_t write(int fd, const void *buf, size_t len)
{
    static ssize_t (*next)(int, const void *, size_t);
    static int done;
    if (!next)
        next = (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    const char *want = getenv("SHORT_WRITE_LEN");
    int type;
    socklen_t tl = sizeof type;
    if (!done && want && (size_t)atol(want) == len &&
        getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) == 0) {
        done = 1;
        return refused();
    }
    return next(fd, buf, len);
}

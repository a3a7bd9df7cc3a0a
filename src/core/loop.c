#include "core/loop.h"

#include <errno.h>
#include <unistd.h>

int loop_init(struct loop *l)
{
    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    return l->epfd < 0 ? -errno : 0;
}

void loop_close(struct loop *l)
{
    if (l->epfd >= 0)
        close(l->epfd);
    l->epfd = -1;
}

int loop_add(struct loop *l, int fd, uint32_t events, uint64_t tag)
{
    struct epoll_event ev = {.events = events, .data.u64 = tag};
    return epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

int loop_del(struct loop *l, int fd)
{
    return epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL) < 0 ? -errno : 0;
}

int loop_wait(struct loop *l, struct epoll_event *ev, int max, int timeout_ms)
{
    int n = epoll_wait(l->epfd, ev, max, timeout_ms);
    return n < 0 ? -errno : n;
}

/* The event loop's poller: a thin layer over epoll so a second backend
 * (io_uring) can take its place later. Events carry a 64-bit tag chosen by
 * the owner of the fd. Calls return 0 or -errno. */
#ifndef HERD_LOOP_H
#define HERD_LOOP_H

#include <stdint.h>
#include <sys/epoll.h>

struct loop {
    int epfd;
};

enum {
    LOOP_IN = EPOLLIN | EPOLLRDHUP,
    LOOP_OUT = EPOLLOUT,
    LOOP_EDGE = EPOLLET,
    LOOP_EXCLUSIVE = EPOLLEXCLUSIVE,
};

int loop_init(struct loop *l);
void loop_close(struct loop *l);
int loop_add(struct loop *l, int fd, uint32_t events, uint64_t tag);
int loop_del(struct loop *l, int fd);
/* Waits up to timeout_ms (-1: no limit). Returns the number of events or -errno. */
int loop_wait(struct loop *l, struct epoll_event *ev, int max, int timeout_ms);

#endif

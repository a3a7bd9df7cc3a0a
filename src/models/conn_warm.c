/* Cold file windows on the event loop (models/file_window.h): a window
 * whose pages are not all in the page cache is read into them through
 * the loop's warm ring (models/warm_ring.h) before its sendfile, and the
 * connection waits meanwhile as it waits for room in its socket, with
 * its send timer running. The other connections of the loop go on. */
#include <errno.h>
#include <string.h>

#include "core/log.h"
#include "models/evloop_internal.h"
#include "models/file_window.h"

void conn_warm_setup(struct evloop *ev)
{
    if (warm_ring_start(&ev->warm) < 0)
        return; /* said why; cold files are sent as before */
    int rc = loop_add(&ev->loop, ev->warm.efd, LOOP_IN, TAG_WARM);
    if (rc < 0) {
        log_msg(LOG_WARN, "epoll_ctl of the page-cache reads' eventfd: %s", strerror(-rc));
        warm_ring_close(&ev->warm);
    }
}

int conn_warm_read(struct evloop *ev, struct conn *c)
{
    struct pending *p = c->out;
    int fd = conn_fd(ev, c);
    off_t stop = file_window_end(p->file_off, p->file_end);
    if (warm_ring_read(&ev->warm, p->file->fd, p->file_off, (size_t)(stop - p->file_off),
                       fd_tag(fd, c->gen)) < 0)
        return -1;
    log_debug("connection %d: reading %lld bytes of a file into the page cache", fd,
              (long long)(stop - p->file_off));
    c->warming = 1;
    SB_ADD(ev->slot->file_reads, 1);
    return 0;
}

struct conn *conn_warm_done(struct evloop *ev, uint64_t tag)
{
    uint32_t fd = (uint32_t)tag;
    if (fd >= (uint32_t)ev->max_fds)
        return NULL;
    struct conn *c = &ev->conns[fd];
    if (!c->open || c->gen != tag_gen(tag) || !c->warming || !c->out)
        return NULL;
    c->warming = 0;
    c->out->warm_end = file_window_end(c->out->file_off, c->out->file_end);
    conn_turn_start(ev);
    return c;
}

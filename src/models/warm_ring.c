#include "models/warm_ring.h"

#include <errno.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/log.h"
#include "models/file_window.h"
#include "models/uring_ring.h"

static void say_off(int err)
{
    static int said; /* once a process, not once a loop */
    if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
        log_msg(LOG_NOTICE, "files not in the page cache are sent by a sendfile that waits "
                "for the disk (no io_uring to read them in: %s)", strerror(err));
}

int warm_ring_start(struct warm_ring *w)
{
    memset(w, 0, sizeof *w);
    w->efd = -1;
    w->state = WARM_OFF;
    int rc = uring_refused_for_test() ? -EPERM : io_uring_queue_init(WARM_RING_ENTRIES, &w->ring, 0);
    if (rc < 0) {
        say_off(-rc);
        return rc;
    }
    /* mmap, not malloc: a read may outlive the ring's close (its exit
     * waits in the kernel, not here), so the sink is never given back to
     * a heap that would hand it out again; see warm_ring_close */
    void *sink = mmap(NULL, FILE_WINDOW, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    int err = 0;
    if (sink == MAP_FAILED)
        err = errno;
    else if ((w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0)
        err = errno;
    else if ((rc = io_uring_register_eventfd(&w->ring, w->efd)) < 0)
        err = -rc;
    if (err) {
        if (sink != MAP_FAILED)
            munmap(sink, FILE_WINDOW);
        if (w->efd >= 0)
            close(w->efd);
        w->efd = -1;
        io_uring_queue_exit(&w->ring);
        say_off(err);
        return -err;
    }
    w->sink = sink;
    w->state = WARM_ON;
    return 0;
}

int warm_ring_has_room(const struct warm_ring *w)
{
    return w->state != WARM_ON || w->inflight < WARM_RING_ENTRIES;
}

int warm_ring_window_ready(const struct warm_ring *w, struct fc_entry *f, off_t off, off_t stop,
                           unsigned char *cold)
{
    if (w->state != WARM_ON || w->inflight >= WARM_RING_ENTRIES)
        return 1; /* no ring, or no room in it */
    return file_window_ready(f, off, stop, cold);
}

int warm_ring_read(struct warm_ring *w, int fd, off_t off, size_t len, uint64_t tag)
{
    struct io_uring_sqe *sqe = w->state == WARM_ON ? io_uring_get_sqe(&w->ring) : NULL;
    if (!sqe)
        return -1;
    io_uring_prep_read(sqe, fd, w->sink, (unsigned)(len < FILE_WINDOW ? len : FILE_WINDOW),
                       (uint64_t)off);
    io_uring_sqe_set_data64(sqe, tag);
    int rc = io_uring_submit(&w->ring);
    if (rc != 1) {
        /* not taken (the SQE stays queued and is dropped with the ring) */
        log_msg(LOG_WARN, "io_uring_submit of a page-cache read: %s",
                strerror(rc < 0 ? -rc : EAGAIN));
        warm_ring_close(w);
        return -1;
    }
    w->inflight++;
    return 0;
}

int warm_ring_reap(struct warm_ring *w, warm_done_fn *done, void *arg)
{
    if (w->state != WARM_ON)
        return 0;
    uint64_t v;
    /* cleared first: a completion posted after this read signals again */
    if (read(w->efd, &v, sizeof v) < 0 && errno != EAGAIN)
        log_msg(LOG_WARN, "eventfd read: %s", strerror(errno));
    int n = 0;
    struct io_uring_cqe *cqe;
    while (w->state == WARM_ON && io_uring_peek_cqe(&w->ring, &cqe) == 0) {
        uint64_t tag = cqe->user_data;
        int res = cqe->res;
        io_uring_cqe_seen(&w->ring, cqe);
        w->inflight--;
        n++;
        done(arg, tag, res);
    }
    return n;
}

void warm_ring_close(struct warm_ring *w)
{
    if (w->state != WARM_ON)
        return;
    io_uring_queue_exit(&w->ring);
    close(w->efd);
    w->efd = -1;
    /* With reads still in flight the sink stays mapped: the kernel may
     * still be filling it. It is one window a loop, and the process ends
     * soon after (a loop closes its ring when it stops). */
    if (!w->inflight)
        munmap(w->sink, FILE_WINDOW);
    w->sink = NULL;
    w->state = WARM_OFF;
}

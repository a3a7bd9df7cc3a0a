#include "models/file_window.h"

#include <fcntl.h>
#include <liburing.h>

#include "core/clock.h"
#include "core/pagecache.h"

/* The check behind file_window_ready: 1 cached, 0 not, -1 no way to tell.
 * With the once-a-second memo a cached 100 KB file cost 0.8 µs of worker
 * CPU less per answer than with a cachestat each time (bench/RESULTS.md
 * section 24). */
static int cached(struct fc_entry *f, off_t off, off_t stop)
{
    if (f->size > FILE_WINDOW)
        return pagecache_resident(f->fd, off, stop - off);
    if (f->cached_checked == clock_cache.wall_sec)
        return 1;
    int r = pagecache_resident(f->fd, 0, f->size);
    if (r == 1)
        f->cached_checked = clock_cache.wall_sec;
    return r;
}

int file_window_ready(struct fc_entry *f, off_t off, off_t stop, unsigned char *cold)
{
    if (*cold == WINDOW_WARM && cached(f, off, stop))
        return 1;
    int present = *cold != WINDOW_WARM && pagecache_resident(f->fd, off, stop - off) == 1;
    *cold = present ? WINDOW_PRESENT : WINDOW_ABSENT;
    return 0;
}

off_t file_window_prep_read(struct io_uring *ring, int fd, off_t off, off_t stop, off_t end,
                            unsigned char cold, void *sink, uint64_t tag, uint64_t none_tag)
{
    off_t from = off;
    if (cold == WINDOW_PRESENT) {
        off_t last = (stop - 1) & ~(off_t)4095;
        from = last > off ? last : off;
    }
    /* first: a request is issued in order, and this one takes its file
     * now, so the caller may close it once submitted */
    struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
    io_uring_prep_read(sqe, fd, sink, (unsigned)(stop - from), (uint64_t)from);
    io_uring_sqe_set_data64(sqe, tag);
    if (stop < end) {
        /* runs in the kernel's worker thread, which takes the fd when it
         * gets to it: by then it may name another file or a socket, and
         * readahead of that does no harm */
        off_t next = file_window_end(stop, end);
        sqe = io_uring_get_sqe(ring);
        io_uring_prep_fadvise(sqe, fd, (uint64_t)stop, next - stop, POSIX_FADV_WILLNEED);
        io_uring_sqe_set_data64(sqe, none_tag);
    }
    return stop - from;
}

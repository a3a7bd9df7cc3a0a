/* A file answer goes out by sendfile a window at a time, and a window
 * whose pages are not all in the page cache is read in first, off the
 * loop: a sendfile of such pages waits for the disk inside the call, and
 * every other connection of the loop waits with it (non-blocking sockets
 * say nothing about files). Who reads it in differs: the uring model's
 * own ring (uring_send.c), a small ring beside the event loop
 * (conn_warm.c). What a window is and when it counts as cached is here,
 * once for both. */
#ifndef HERD_MODELS_FILE_WINDOW_H
#define HERD_MODELS_FILE_WINDOW_H

#include <stdint.h>
#include <sys/types.h>

#include "http/filecache.h"

/* 1 MiB: one read per window is little next to the disk's time for it,
 * and a slow client has at most a window read ahead of what it took. */
#define FILE_WINDOW (1 << 20)

/* Where the window that starts at off ends (end: the answer's end). */
static inline off_t file_window_end(off_t off, off_t end)
{
    return end - off > FILE_WINDOW ? off + FILE_WINDOW : end;
}

/* What an answer's *cold says of the window just asked about. */
enum {
    WINDOW_WARM = 0,    /* no window of the answer was found cold yet */
    WINDOW_ABSENT = 1,  /* pages of this window are not in the cache */
    WINDOW_PRESENT = 2, /* an earlier window was cold; this one's pages are
                         * all in the cache, perhaps not yet read */
};

/* Whether f[off, stop) needs no read first: 1 when it is in the page
 * cache, or when the kernel cannot tell (then sendfile as always); 0
 * when some page is not there. A file of one window is asked about whole,
 * and at most once a second while it stays cached, so a file served over
 * and over costs no cachestat per answer. Once a window of an answer was
 * cold, every later one needs a read too: the readahead that the reads
 * start puts the next pages in the cache before their data is there, and
 * a sendfile of them would wait all the same. *cold then says how much
 * (file_window_read_start). */
int file_window_ready(struct fc_entry *f, off_t off, off_t stop, unsigned char *cold);

/* Preps, on ring, the read that must come before f's window [off, stop)
 * of an answer that ends at end is sent (cold as file_window_ready left
 * it), into sink, tagged tag. A window with pages missing is read whole.
 * One whose pages are all there, put in by readahead and perhaps still
 * being read, needs only its last page read: that read ends once the
 * readahead that brings the page in does, and readahead is issued in
 * order. Then the next window is read ahead (IORING_OP_FADVISE,
 * POSIX_FADV_WILLNEED, tagged none_tag for the caller to skip), so it is
 * all there when its turn comes. That is what makes a cold download
 * cheap: a read of every window into the sink cost 40% of the worker's
 * CPU (bench/RESULTS.md section 27). The readahead is not linked to the
 * read: a linked request takes its fd when it starts, after the caller
 * may have closed it, and the read must take its file at submission.
 * Takes two SQEs, which the caller makes sure of. Returns the bytes it
 * reads (for the log). */
struct io_uring;
off_t file_window_prep_read(struct io_uring *ring, int fd, off_t off, off_t stop, off_t end,
                            unsigned char cold, void *sink, uint64_t tag, uint64_t none_tag);

#endif

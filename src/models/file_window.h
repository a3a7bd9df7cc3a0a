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

/* What an answer's *cold says of the window last asked about. */
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
 * cold, every later one needs a read too: the readahead of the reads
 * before it puts the next pages in the cache before their data is there,
 * and a sendfile of them would wait all the same. *cold then says how
 * much (file_window_read_start). */
int file_window_ready(struct fc_entry *f, off_t off, off_t stop, unsigned char *cold);

/* Where the read that must come before f[off, stop) is sent starts. A
 * window with pages missing is read whole. One whose pages are all there
 * (the readahead of the reads before it put them there, and has mostly
 * read them by now) needs only its last page read: that read ends once
 * the readahead that brings the page in does, and readahead is issued in
 * order. A read of every such window whole into the sink cost a cold
 * download twice the worker's CPU (bench/RESULTS.md section 27). */
static inline off_t file_window_read_start(off_t off, off_t stop, unsigned char cold)
{
    off_t last = (stop - 1) & ~(off_t)4095;
    return cold == WINDOW_PRESENT && last > off ? last : off;
}

#endif

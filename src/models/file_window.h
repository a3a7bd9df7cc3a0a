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

/* Whether f[off, stop) needs no read first: 1 when it is in the page
 * cache, or when the kernel cannot tell (then sendfile as always); 0
 * when some page is not there. A file of one window is asked about whole,
 * and at most once a second while it stays cached, so a file served over
 * and over costs no cachestat per answer. Once a window of an answer was
 * not cached (*cold), every later one counts as not cached either: the
 * readahead of the read before it puts the next pages in the cache before
 * their data is there, and a sendfile of them would wait all the same. */
int file_window_ready(struct fc_entry *f, off_t off, off_t stop, unsigned char *cold);

#endif

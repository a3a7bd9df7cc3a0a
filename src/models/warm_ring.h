/* Page-cache reads beside an event loop (models/file_window.h): a small
 * io_uring of the loop's own, used for nothing else, whose completions
 * are signalled on an eventfd that the loop's epoll watches. The kernel
 * reads without the loop waiting (async buffered reads, or its worker
 * threads), so the ring is the helper that nginx's `aio threads` pool is,
 * with no thread or lock of ours. Where io_uring is not permitted the
 * caller sendfiles as before. */
#ifndef HERD_MODELS_WARM_RING_H
#define HERD_MODELS_WARM_RING_H

#include <liburing.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Reads in flight at most: a connection has one at a time, so this many
 * cold answers at once; beyond it a window is sent as before (the SQ and
 * the CQ, twice as big, can never overflow). */
#define WARM_RING_ENTRIES 64

enum warm_state { WARM_UNSTARTED, WARM_ON, WARM_OFF };

struct warm_ring {
    struct io_uring ring;
    int efd;            /* the eventfd to watch, once WARM_ON */
    char *sink;         /* FILE_WINDOW bytes every read lands in: never read */
    unsigned inflight;
    uint8_t state;      /* enum warm_state */
};

/* Makes the ring. 0, or -errno with the reason logged once a process
 * (state becomes WARM_OFF; HERD_TEST_NO_URING=1 refuses it as EPERM). */
int warm_ring_start(struct warm_ring *w);

/* Whether another read may be submitted now. */
int warm_ring_has_room(const struct warm_ring *w);

/* Whether the file window f[off, stop) may be sent now: 1 when it is
 * cached (file_window_ready, which keeps *cold), or when it cannot be
 * read in (no ring, too many reads at once): then sendfile as before. */
struct fc_entry;
int warm_ring_window_ready(const struct warm_ring *w, struct fc_entry *f, off_t off, off_t stop,
                           unsigned char *cold);

/* Reads fd[off, off + len) into the sink, submitted at once: once this
 * returns the kernel holds the file, so the caller may close its fd.
 * tag comes back with the completion. 0, or -1 (the ring is then
 * WARM_OFF: the caller sendfiles as before). */
int warm_ring_read(struct warm_ring *w, int fd, off_t off, size_t len, uint64_t tag);

/* Calls done for every completed read (res: bytes read or -errno; a
 * completion may submit the next read). Returns how many. */
typedef void warm_done_fn(void *arg, uint64_t tag, int res);
int warm_ring_reap(struct warm_ring *w, warm_done_fn *done, void *arg);

void warm_ring_close(struct warm_ring *w);

#endif

/* Cold file windows on the coro model (models/file_window.h): a window
 * whose pages are not all in the page cache is read in before its
 * sendfile, which would otherwise wait for the disk and hold the kernel
 * thread, and every coroutine queued on it, for that time. Each kernel
 * thread has a warm ring (models/warm_ring.h) whose eventfd its netpoll
 * watches (sched_watch); the coroutine submits the read and parks until
 * the thread reaps its completion, its send timeout, or a stop, while the
 * thread runs its other coroutines. */
#ifndef HERD_MODELS_CORO_WARM_H
#define HERD_MODELS_CORO_WARM_H

#include <stdint.h>
#include <sys/types.h>

#include "coro/sched.h"
#include "http/filecache.h"
#include "models/warm_ring.h"
#include "proc/scoreboard.h"

struct coro_warm {
    struct warm_ring ring;
    /* One per read in flight, the ring's tag its index: busy from the
     * submission to the completion, even when its coroutine gave up. */
    struct coro_warm_read {
        struct coro_wake wake;
        uint8_t busy;
    } reads[WARM_RING_ENTRIES];
};

/* Before sched_start: thread i's ring and its watch. Where io_uring is
 * refused (said once), windows go as they are. */
void coro_warm_setup(struct coro_warm *w, struct sched *s, int i);

/* Inside a coroutine on the thread that owns w (pinned): reads f[off,
 * stop) in if it is not in the page cache (*cold: file_window_ready) and
 * waits for it until deadline. 0 once the window may be sent, -1 when the
 * wait gave up (send timeout, stop). fd, the client's, is for the log. */
int coro_warm_window(struct coro_warm *w, struct sb_slot *slot, int fd, struct fc_entry *f,
                     off_t off, off_t stop, unsigned char *cold, int64_t deadline);

/* After the threads ended. */
void coro_warm_close(struct coro_warm *w);

#endif

#include "models/coro_warm.h"

#include <errno.h>
#include <string.h>

#include "core/log.h"

/* In thread i's scheduler, when the eventfd says reads completed. */
static void read_done(void *arg, uint64_t tag, int res)
{
    struct coro_warm_read *r = &((struct coro_warm *)arg)->reads[tag];
    if (r->wake.waiter) /* else its coroutine gave up waiting */
        coro_wake_fire(&r->wake, res); /* the result goes with the wake */
    r->busy = 0;
}

static void reap(void *arg)
{
    struct coro_warm *w = arg;
    warm_ring_reap(&w->ring, read_done, w);
}

void coro_warm_setup(struct coro_warm *w, struct sched *s, int i)
{
    for (int k = 0; k < WARM_RING_ENTRIES; k++)
        w->reads[k].busy = 0;
    if (warm_ring_start(&w->ring) < 0)
        return; /* said why; cold files are sent as before */
    int rc = sched_watch(s, i, w->ring.efd, reap, w);
    if (rc < 0) {
        log_msg(LOG_WARN, "watching the page-cache reads' eventfd: %s", strerror(-rc));
        warm_ring_close(&w->ring);
    }
}

static struct coro_warm_read *free_record(struct coro_warm *w)
{
    for (int k = 0; k < WARM_RING_ENTRIES; k++)
        if (!w->reads[k].busy)
            return &w->reads[k];
    return NULL;
}

int coro_warm_window(struct coro_warm *w, struct sb_slot *slot, int fd, struct fc_entry *f,
                     off_t off, off_t stop, unsigned char *cold, int64_t deadline)
{
    if (warm_ring_window_ready(&w->ring, f, off, stop, cold))
        return 0;
    struct coro_warm_read *r = free_record(w);
    if (!r)
        return 0; /* cannot be: a record is busy exactly while its read is in flight */
    r->wake = (struct coro_wake){0};
    if (warm_ring_read(&w->ring, f->fd, off, (size_t)(stop - off), (uint64_t)(r - w->reads)) < 0)
        return 0; /* the ring is off now: sendfile as before */
    r->busy = 1;
    log_debug("connection %d: reading %lld bytes of a file into the page cache", fd,
              (long long)(stop - off));
    SB_ADD(slot->file_reads, 1);
    int rc = coro_wait_wake(&r->wake, deadline, 0);
    /* r may belong to another read by now: its completion freed it. Read
     * in, or not (an error): either way the window goes by sendfile now,
     * which reports a file error itself. */
    return rc == -ETIMEDOUT || rc == -ECANCELED ? -1 : 0;
}

void coro_warm_close(struct coro_warm *w)
{
    warm_ring_close(&w->ring);
}

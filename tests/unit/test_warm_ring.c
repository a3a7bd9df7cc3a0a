/* models/warm_ring.c: page-cache reads beside an event loop, against the
 * running kernel. A read of a file lands in the sink, its completion is
 * signalled on the eventfd (the event loop's epoll sees it) and reaped
 * with its tag and byte count; reads at the limit are refused, not lost;
 * where io_uring is refused the ring says so and stays off. Skipped where
 * io_uring is missing. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <unistd.h>

#include "models/file_window.h"
#include "models/warm_ring.h"
#include "unit.h"

static int reaped;
static uint64_t last_tag;
static int last_res;

static void done(void *arg, uint64_t tag, int res)
{
    (*(int *)arg)++;
    reaped++;
    last_tag = tag;
    last_res = res;
}

/* A temporary file of n bytes; its fd, or -1. */
static int temp_file(size_t n)
{
    char path[] = "/tmp/herd-warm-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return -1;
    unlink(path);
    char *buf = calloc(1, n);
    int ok = buf && write(fd, buf, n) == (ssize_t)n;
    free(buf);
    if (!ok) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Waits for the eventfd, then reaps; how many completions came. */
static int wait_and_reap(struct warm_ring *w, int *calls)
{
    struct pollfd p = {.fd = w->efd, .events = POLLIN};
    if (poll(&p, 1, 2000) != 1)
        return -1;
    return warm_ring_reap(w, done, calls);
}

TEST(a_read_lands_and_its_completion_is_signalled)
{
    struct warm_ring w;
    if (warm_ring_start(&w) < 0) {
        printf("  skipped: no io_uring here\n");
        return;
    }
    CHECK_EQ_INT(w.state, WARM_ON);
    int fd = temp_file(3 * 4096 + 100);
    if (!CHECK(fd >= 0))
        return;
    int calls = 0;
    CHECK_EQ_INT(warm_ring_read(&w, fd, 4096, FILE_WINDOW, 42), 0);
    close(fd); /* the kernel holds the file from the submission on */
    int n = 0;
    while (n < 1) {
        int r = wait_and_reap(&w, &calls);
        if (!CHECK(r >= 0))
            break;
        n += r;
    }
    CHECK_EQ_INT(calls, 1);
    CHECK_EQ_INT((long)last_tag, 42);
    CHECK_EQ_INT(last_res, 2 * 4096 + 100); /* from 4096 to the end */
    CHECK_EQ_INT(w.inflight, 0);
    /* nothing more: the eventfd was cleared */
    struct pollfd p = {.fd = w.efd, .events = POLLIN};
    CHECK_EQ_INT(poll(&p, 1, 0), 0);
    warm_ring_close(&w);
    CHECK_EQ_INT(w.state, WARM_OFF);
    CHECK_EQ_INT(warm_ring_read(&w, 0, 0, 1, 1), -1); /* closed: refused */
}

TEST(reads_past_the_limit_are_refused_until_some_complete)
{
    struct warm_ring w;
    if (warm_ring_start(&w) < 0) {
        printf("  skipped: no io_uring here\n");
        return;
    }
    int fd = temp_file(4096);
    if (!CHECK(fd >= 0))
        return;
    int queued = 0;
    while (warm_ring_has_room(&w) && queued < 1000) {
        if (!CHECK(warm_ring_read(&w, fd, 0, 4096, (uint64_t)queued) == 0))
            break;
        queued++;
    }
    CHECK(queued > 0 && queued < 1000);
    CHECK(!warm_ring_has_room(&w));
    int calls = 0;
    while (calls < queued) {
        if (!CHECK(wait_and_reap(&w, &calls) >= 0))
            break;
    }
    CHECK_EQ_INT(calls, queued);
    CHECK(warm_ring_has_room(&w));
    close(fd);
    warm_ring_close(&w);
}

TEST(refused_io_uring_leaves_the_ring_off)
{
    setenv("HERD_TEST_NO_URING", "1", 1);
    struct warm_ring w;
    CHECK_EQ_INT(warm_ring_start(&w), -EPERM);
    CHECK_EQ_INT(w.state, WARM_OFF);
    CHECK(warm_ring_has_room(&w)); /* off: the caller sends as before */
    CHECK_EQ_INT(warm_ring_read(&w, 0, 0, 1, 1), -1);
    CHECK_EQ_INT(warm_ring_reap(&w, done, &reaped), 0);
    warm_ring_close(&w);
    unsetenv("HERD_TEST_NO_URING");
}

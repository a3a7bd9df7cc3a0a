#include "models/uring_ring.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int uring_refused_for_test(void)
{
    const char *v = getenv("HERD_TEST_NO_URING");
    return v && !strcmp(v, "1");
}

/* kernel.io_uring_disabled: 0 all may, 1 only a group (or root), 2 none. */
static int sysctl_disabled(void)
{
    FILE *f = fopen("/proc/sys/kernel/io_uring_disabled", "re");
    if (!f)
        return 0;
    int v = 0;
    if (fscanf(f, "%d", &v) != 1)
        v = 0;
    fclose(f);
    return v;
}

int uring_ring_init(struct io_uring *ring, unsigned entries)
{
    if (uring_refused_for_test())
        return -EPERM;
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    /* One thread submits and reaps, and task work runs only when it waits:
     * fewer interruptions of the worker (6.1+; older kernels say EINVAL). */
    p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_CQSIZE;
    p.cq_entries = entries * 8;
    int rc = io_uring_queue_init_params(entries, ring, &p);
    if (rc == -EINVAL) {
        memset(&p, 0, sizeof p);
        p.flags = IORING_SETUP_CQSIZE;
        p.cq_entries = entries * 8;
        rc = io_uring_queue_init_params(entries, ring, &p);
    }
    /* Enter by the ring's registered index: each io_uring_enter then skips
     * the fget/fput of the ring's fd (0.3-0.7% of a keep-alive worker's
     * CPU in a profile; RESULTS §33). Without a free slot it enters by fd. */
    if (rc == 0)
        (void)io_uring_register_ring_fd(ring);
    return rc;
}

int uring_probe(char *err, size_t errlen)
{
    if (sysctl_disabled() == 2) {
        snprintf(err, errlen, "kernel.io_uring_disabled is 2");
        return -1;
    }
    struct io_uring ring;
    int rc = uring_ring_init(&ring, 8);
    if (rc < 0) {
        snprintf(err, errlen, "io_uring_queue_init: %s", strerror(-rc));
        return -1;
    }
    io_uring_queue_exit(&ring);
    return 0;
}

struct io_uring_sqe *uring_sqe(struct io_uring *ring)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
    while (!sqe) {
        io_uring_submit(ring);
        sqe = io_uring_get_sqe(ring);
    }
    return sqe;
}

int uring_bufs_init(struct uring_bufs *b, struct io_uring *ring, int bgid, unsigned count,
                    unsigned size)
{
    memset(b, 0, sizeof *b);
    size_t ring_bytes = count * sizeof(struct io_uring_buf);
    void *mem = mmap(NULL, ring_bytes, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE,
                     -1, 0);
    if (mem == MAP_FAILED)
        return -errno;
    b->br = mem;
    b->base = malloc((size_t)count * size);
    if (!b->base) {
        munmap(mem, ring_bytes);
        b->br = NULL;
        return -ENOMEM;
    }
    b->count = count;
    b->size = size;
    b->bgid = bgid;
    io_uring_buf_ring_init(b->br);
    struct io_uring_buf_reg reg = {.ring_addr = (uint64_t)(uintptr_t)mem,
                                   .ring_entries = count, .bgid = (uint16_t)bgid};
    int rc = io_uring_register_buf_ring(ring, &reg, 0);
    if (rc < 0) {
        uring_bufs_destroy(b, NULL);
        return rc;
    }
    for (unsigned i = 0; i < count; i++)
        uring_buf_return(b, i);
    uring_bufs_publish(b);
    return 0;
}

void uring_bufs_destroy(struct uring_bufs *b, struct io_uring *ring)
{
    if (!b->br)
        return;
    if (ring)
        io_uring_unregister_buf_ring(ring, b->bgid);
    munmap(b->br, b->count * sizeof(struct io_uring_buf));
    free(b->base);
    b->br = NULL;
    b->base = NULL;
}

void uring_buf_return(struct uring_bufs *b, unsigned bid)
{
    io_uring_buf_ring_add(b->br, uring_buf(b, bid), b->size, (unsigned short)bid,
                          io_uring_buf_ring_mask(b->count), b->added++);
}

void uring_bufs_publish(struct uring_bufs *b)
{
    if (b->added) {
        io_uring_buf_ring_advance(b->br, b->added);
        b->added = 0;
    }
}

void uring_prep_recv_bounded(struct io_uring_sqe *sqe, int fd, const struct uring_bufs *b,
                             uint32_t cap)
{
    /* The kernel ends a multishot receive once its total reaches
     * sqe->optlen, checked after each receive of up to sqe->len bytes (0:
     * a whole buffer), so it may go one receive past optlen: ask one
     * receive short of cap. optlen shares its place with file_index, the
     * name liburing 2.3 knows. */
    uint32_t each = cap && cap < b->size ? cap : 0;
    io_uring_prep_recv_multishot(sqe, fd, NULL, each, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = (uint16_t)b->bgid;
    if (cap)
        sqe->file_index = cap - (each ? each : b->size) + 1;
}

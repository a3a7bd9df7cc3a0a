/* models/uring_ring.c: a bounded multishot receive, against the running
 * kernel. With far more waiting in the socket than the bound, the receive
 * must end (a completion without IORING_CQE_F_MORE) having taken no more
 * than its bound, and the rest must still be in the socket. The kernel
 * checks its bound only after each receive, so the helper asks one
 * receive short: bounds around the buffer size are where an off-by-one
 * shows. Skipped where io_uring or the bound is missing. */
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include "models/uring_ring.h"
#include "unit.h"

#define BUF_SIZE 4096
#define WAITING 60000

/* What one bounded receive takes from a socket with WAITING bytes in it:
 * the total, or -errno of its refusal; *left is what it left behind. */
static long receive_bounded(struct io_uring *ring, struct uring_bufs *b, uint32_t cap,
                            long *left)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
        return -errno;
    int snd = 1 << 20;
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &snd, sizeof snd);
    static char out[WAITING];
    memset(out, 'x', sizeof out);
    long sent = 0;
    while (sent < WAITING) {
        ssize_t n = send(sv[0], out + sent, (size_t)(WAITING - sent), MSG_DONTWAIT);
        if (n <= 0)
            break;
        sent += n;
    }
    struct io_uring_sqe *sqe = uring_sqe(ring);
    uring_prep_recv_bounded(sqe, sv[1], b, cap);
    io_uring_sqe_set_data64(sqe, 1);
    io_uring_submit(ring);
    long total = 0;
    for (;;) {
        struct io_uring_cqe *cqe;
        struct __kernel_timespec ts = {.tv_sec = 2};
        if (io_uring_wait_cqe_timeout(ring, &cqe, &ts) < 0) {
            total = -ETIME;
            break;
        }
        int res = cqe->res;
        uint32_t flags = cqe->flags;
        io_uring_cqe_seen(ring, cqe);
        if (res < 0) {
            total = res;
            break;
        }
        total += res;
        if (flags & IORING_CQE_F_BUFFER)
            uring_buf_return(b, flags >> IORING_CQE_BUFFER_SHIFT);
        uring_bufs_publish(b);
        if (!(flags & IORING_CQE_F_MORE) || (!cap && total == sent))
            break; /* unbounded, it stays armed: the ring goes next */
    }
    static char rest[WAITING];
    ssize_t n = recv(sv[1], rest, sizeof rest, MSG_DONTWAIT);
    *left = n < 0 ? 0 : n;
    if (sent != WAITING)
        total = -EAGAIN;
    close(sv[0]);
    close(sv[1]);
    return total;
}

TEST(a_bounded_receive_takes_no_more_than_its_bound)
{
    struct io_uring ring;
    if (uring_ring_init(&ring, 8) < 0) {
        printf("  skipped: no io_uring here\n");
        return;
    }
    struct uring_bufs b;
    if (!CHECK(uring_bufs_init(&b, &ring, 0, 64, BUF_SIZE) == 0)) {
        io_uring_queue_exit(&ring);
        return;
    }
    static const uint32_t caps[] = {1,    100,  4095, 4096, 4097,  8191,
                                    8192, 8193, 9000, 16384, 17408};
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
        long left = 0;
        long took = receive_bounded(&ring, &b, caps[i], &left);
        if (took == -EINVAL) {
            printf("  skipped: this kernel has no bounded multishot receive\n");
            break;
        }
        if (!CHECK(took > 0)) {
            printf("  cap %u: %ld\n", caps[i], took);
            continue;
        }
        if (!CHECK(took <= (long)caps[i]))
            printf("  cap %u: took %ld\n", caps[i], took);
        /* it stops one receive short at most, never sooner */
        CHECK(took > (long)caps[i] - BUF_SIZE);
        CHECK_EQ_INT(took + left, WAITING);
    }
    long left = 0;
    CHECK_EQ_INT(receive_bounded(&ring, &b, 0, &left), WAITING); /* 0: no bound */
    CHECK_EQ_INT(left, 0);
    uring_bufs_destroy(&b, &ring);
    io_uring_queue_exit(&ring);
}

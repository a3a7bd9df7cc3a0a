/* The io_uring plumbing of the uring model: making the ring (or saying
 * clearly why it cannot be made), the provided-buffer ring that multishot
 * receives fill, SQEs that never run out, and the tags that tell a
 * completion's kind and owner. No HTTP here. */
#ifndef HERD_MODELS_URING_RING_H
#define HERD_MODELS_URING_RING_H

#include <liburing.h>
#include <stddef.h>
#include <stdint.h>

/* 0 when this process may use io_uring; else -1 with the reason in err
 * ("io_uring_disabled is 2", "Operation not permitted"...). The test-only
 * environment variable HERD_TEST_NO_URING=1 makes it fail as EPERM. */
int uring_probe(char *err, size_t errlen);

/* Test-only: HERD_TEST_NO_URING=1 stands for a seccomp filter or sysctl
 * that refuses io_uring, which a test cannot set up unprivileged. */
int uring_refused_for_test(void);

/* A ring of `entries` SQEs, single issuer with deferred task work where the
 * kernel has it. Returns 0 or -errno (HERD_TEST_NO_URING: -EPERM). */
int uring_ring_init(struct io_uring *ring, unsigned entries);

/* An SQE, submitting the queued ones first when the SQ is full. */
struct io_uring_sqe *uring_sqe(struct io_uring *ring);

/* The provided buffers multishot receives pick from (buffer group bgid):
 * count buffers of size bytes; a buffer goes back once its bytes are used
 * (copied or answered), and the returns of a round are published at once. */
struct uring_bufs {
    struct io_uring_buf_ring *br;
    char *base;
    unsigned count, size;
    int bgid;
    int added;          /* returned this round, not yet published */
};

int uring_bufs_init(struct uring_bufs *b, struct io_uring *ring, int bgid, unsigned count,
                    unsigned size);
void uring_bufs_destroy(struct uring_bufs *b, struct io_uring *ring);
static inline char *uring_buf(const struct uring_bufs *b, unsigned bid)
{
    return b->base + (size_t)bid * b->size;
}
void uring_buf_return(struct uring_bufs *b, unsigned bid);
void uring_bufs_publish(struct uring_bufs *b);

/* A multishot receive on fd into b's buffers that ends (a completion
 * without IORING_CQE_F_MORE) before it has taken more than cap bytes in
 * all; what comes after waits in the socket. cap 0: no bound. Kernels
 * without the bound (a 2025 addition; 6.18 has it) fail the receive with
 * EINVAL. */
void uring_prep_recv_bounded(struct io_uring_sqe *sqe, int fd, const struct uring_bufs *b,
                             uint32_t cap);

/* A completion's user_data: its kind in the top 4 bits, then the owner's
 * generation (28 bits) and fd or index (32 bits), so a completion for an fd
 * closed and reused meanwhile is told apart (evloop's fd_tag idea). */
enum uring_kind {
    UK_NONE,     /* cancels, whose results nobody needs */
    UK_ACCEPT,   /* low bits: listener index */
    UK_RECV,
    UK_SEND,
    UK_POLLOUT,  /* room in the send buffer for sendfile */
    UK_SIGNAL,
    UK_TIMEOUT,  /* low 60 bits: its deadline in ms */
    UK_EPOLL,    /* the proxy's epoll set (upstream sockets, clients in an exchange) */
    UK_HANDOVER, /* the reload's handover channel is readable */
    UK_WARM,     /* a read that brings a file's next bytes into the page cache */
    UK_BACKLOG,  /* a listener has a client waiting (at --max-connections); low bits: its index */
};

#define UR_GEN_MASK 0x0fffffffu

static inline uint64_t uring_tag(enum uring_kind k, uint32_t gen, uint32_t id)
{
    return (uint64_t)k << 60 | (uint64_t)(gen & UR_GEN_MASK) << 32 | id;
}
static inline enum uring_kind uring_tag_kind(uint64_t t) { return (enum uring_kind)(t >> 60); }
static inline uint32_t uring_tag_gen(uint64_t t) { return (uint32_t)(t >> 32) & UR_GEN_MASK; }
static inline uint32_t uring_tag_id(uint64_t t) { return (uint32_t)t; }

#endif

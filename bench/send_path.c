/* What a file body costs its sender over loopback TCP, by send path: the
 * question behind issue 15's "zero-copy send only above a size where it
 * measures better". For each body size, the sender (CPU 0) sends a file
 * as back-to-back bodies of that size, TOTAL_MIB in all, over one
 * connection to a receiver (CPU 1) that reads and discards; the figure is
 * the sender thread's CPU per MiB (its syscalls and the softirq work they
 * run, which over loopback includes delivery into the receiver's socket),
 * then the receiver's, then MB/s. Paths:
 *   copy      send(2) from the file's pages (mmap): one copy into the skb
 *   sendfile  sendfile(2): page-cache pages referenced, no copy
 *   zerocopy  send(2) with MSG_ZEROCOPY, completions drained each send
 *   uring     IORING_OP_SEND from the mmap (a copy, as copy)
 *   uring_zc  IORING_OP_SEND_ZC from the mmap, notifications reaped
 * Over loopback a zero-copy skb is copied anyway when it is delivered
 * (the receiver must not see pages the sender may still change), so the
 * zero-copy paths pay the copy plus their bookkeeping: this measures that
 * cost, not what they save on a NIC.
 * Usage: build/bench/send_path [ROUNDS]   (make bench-send-path) */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define TOTAL_MIB 512
#define FILE_SIZE (16u << 20)

enum path { P_COPY, P_SENDFILE, P_ZEROCOPY, P_URING, P_URING_ZC, P_COUNT };
static const char *const path_names[] = {"copy", "sendfile", "zerocopy", "uring", "uring_zc"};
static const size_t sizes[] = {4096, 16384, 65536, 262144, 1 << 20, 16 << 20};
#define NSIZES (sizeof sizes / sizeof sizes[0])

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static void pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set); /* best effort */
}

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct receiver {
    int fd;
    uint64_t want;
    double cpu;
};

static void *receive_all(void *arg)
{
    struct receiver *r = arg;
    pin(1);
    static char buf[1 << 18];
    double c0 = thread_cpu_s();
    uint64_t got = 0;
    while (got < r->want) {
        ssize_t n = recv(r->fd, buf, sizeof buf, 0);
        if (n <= 0)
            die("recv");
        got += (uint64_t)n;
    }
    r->cpu = thread_cpu_s() - c0;
    return NULL;
}

/* A connected loopback pair: *snd for the sender, *rcv for the receiver. */
static void connect_pair(int *snd, int *rcv)
{
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 1) < 0 ||
        getsockname(l, (struct sockaddr *)&a, &al) < 0)
        die("listen");
    *snd = socket(AF_INET, SOCK_STREAM, 0);
    if (*snd < 0 || connect(*snd, (struct sockaddr *)&a, sizeof a) < 0)
        die("connect");
    *rcv = accept(l, NULL, NULL);
    if (*rcv < 0)
        die("accept");
    close(l);
}

static void send_whole(int fd, const char *p, size_t len, int flags)
{
    while (len) {
        ssize_t n = send(fd, p, len, flags);
        if (n < 0 && errno == ENOBUFS) { /* zerocopy: completions pile up */
            sched_yield();
            continue;
        }
        if (n <= 0)
            die("send");
        p += n;
        len -= (size_t)n;
    }
}

/* MSG_ZEROCOPY completions arrive on the error queue; unread, they fill
 * the socket's option memory and sends fail. */
static void drain_zerocopy(int fd)
{
    char control[128];
    for (;;) {
        struct msghdr m = {.msg_control = control, .msg_controllen = sizeof control};
        if (recvmsg(fd, &m, MSG_ERRQUEUE | MSG_DONTWAIT) < 0)
            return;
    }
}

struct uring_sender {
    struct io_uring ring;
    unsigned notifs; /* SEND_ZC notifications still to come */
};

/* One body through the ring, whole: resubmits the rest of a short send. */
static void uring_send_whole(struct uring_sender *u, int fd, const char *p, size_t len, int zc)
{
    while (len) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
        if (zc)
            io_uring_prep_send_zc(sqe, fd, p, len, 0, 0);
        else
            io_uring_prep_send(sqe, fd, p, len, 0);
        io_uring_submit(&u->ring);
        int sent = -1;
        while (sent < 0) {
            struct io_uring_cqe *cqe;
            if (io_uring_wait_cqe(&u->ring, &cqe) < 0)
                die("io_uring_wait_cqe");
            if (cqe->flags & IORING_CQE_F_NOTIF) {
                u->notifs--;
            } else {
                if (cqe->res < 0) {
                    errno = -cqe->res;
                    die("io_uring send");
                }
                sent = cqe->res;
                if (cqe->flags & IORING_CQE_F_MORE)
                    u->notifs++;
            }
            io_uring_cqe_seen(&u->ring, cqe);
        }
        p += sent;
        len -= (size_t)sent;
    }
}

static void uring_settle(struct uring_sender *u)
{
    while (u->notifs) {
        struct io_uring_cqe *cqe;
        if (io_uring_wait_cqe(&u->ring, &cqe) < 0)
            die("io_uring_wait_cqe");
        if (cqe->flags & IORING_CQE_F_NOTIF)
            u->notifs--;
        io_uring_cqe_seen(&u->ring, cqe);
    }
}

struct cell {
    double snd_us_per_mib, rcv_us_per_mib, mb_per_s;
};

static struct cell run(enum path p, size_t size, int file_fd, const char *map)
{
    int snd, rcv;
    connect_pair(&snd, &rcv);
    uint64_t total = (uint64_t)TOTAL_MIB << 20;
    uint64_t bodies = total / size;
    struct receiver r = {.fd = rcv, .want = bodies * size};
    struct uring_sender u = {0};
    if ((p == P_URING || p == P_URING_ZC) && io_uring_queue_init(8, &u.ring, 0) < 0)
        die("io_uring_queue_init");
    int one = 1;
    if (p == P_ZEROCOPY && setsockopt(snd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof one) < 0)
        die("SO_ZEROCOPY");
    pthread_t t;
    pthread_create(&t, NULL, receive_all, &r);
    double w0 = wall_s(), c0 = thread_cpu_s();
    off_t at = 0;
    for (uint64_t i = 0; i < bodies; i++) {
        if (at + (off_t)size > (off_t)FILE_SIZE)
            at = 0;
        switch (p) {
        case P_COPY:
            send_whole(snd, map + at, size, 0);
            break;
        case P_SENDFILE: {
            off_t off = at;
            size_t left = size;
            while (left) {
                ssize_t n = sendfile(snd, file_fd, &off, left);
                if (n <= 0)
                    die("sendfile");
                left -= (size_t)n;
            }
            break;
        }
        case P_ZEROCOPY:
            send_whole(snd, map + at, size, MSG_ZEROCOPY);
            drain_zerocopy(snd);
            break;
        case P_URING:
        case P_URING_ZC:
            uring_send_whole(&u, snd, map + at, size, p == P_URING_ZC);
            break;
        default:
            break;
        }
        at += (off_t)size;
    }
    if (p == P_URING || p == P_URING_ZC)
        uring_settle(&u);
    double snd_cpu = thread_cpu_s() - c0;
    pthread_join(t, NULL);
    double wall = wall_s() - w0;
    if (p == P_URING || p == P_URING_ZC)
        io_uring_queue_exit(&u.ring);
    close(snd);
    close(rcv);
    double mib = (double)r.want / (1 << 20);
    return (struct cell){snd_cpu * 1e6 / mib, r.cpu * 1e6 / mib, (double)r.want / wall / 1e6};
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 3;
    pin(0);
    char path[] = "/tmp/send_path.XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        die("mkstemp");
    unlink(path);
    static char chunk[1 << 16];
    for (size_t i = 0; i < sizeof chunk; i++)
        chunk[i] = (char)(i * 7 + 3);
    for (size_t done = 0; done < FILE_SIZE; done += sizeof chunk)
        if (write(fd, chunk, sizeof chunk) != (ssize_t)sizeof chunk)
            die("write");
    const char *map = mmap(NULL, FILE_SIZE, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED)
        die("mmap");
    printf("round size path sender_us_per_mib receiver_us_per_mib mb_per_s\n");
    for (int round = 1; round <= rounds; round++)
        for (size_t s = 0; s < NSIZES; s++)
            for (int p = 0; p < P_COUNT; p++) {
                struct cell c = run((enum path)p, sizes[s], fd, map);
                printf("%d %zu %s %.1f %.1f %.0f\n", round, sizes[s], path_names[p],
                       c.snd_us_per_mib, c.rcv_us_per_mib, c.mb_per_s);
                fflush(stdout);
            }
    return 0;
}

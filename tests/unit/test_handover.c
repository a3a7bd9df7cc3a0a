/* proc/handover.c: one message per connection over a SOCK_SEQPACKET
 * channel, with the fd, the step state and the unparsed bytes whole; the
 * refusals a receiver must tell apart (EOF, EAGAIN, too big, no fd room). */
#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proc/handover.h"
#include "unit.h"

static int same_file(int a, int b)
{
    struct stat x, y;
    return fstat(a, &x) == 0 && fstat(b, &y) == 0 && x.st_ino == y.st_ino &&
           x.st_dev == y.st_dev;
}

TEST(a_connection_arrives_whole)
{
    int ch[2], conn[2];
    if (!CHECK(handover_channel(ch) == 0) || !CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, conn) == 0))
        return;
    struct handover_msg m = {.kind = HO_CONN, .tcp = 1, .state_len = 72, .in_len = 5};
    memset(m.state, 0xab, 72);
    CHECK_EQ_INT(handover_send(ch[1], &m, "GET /", conn[0]), 0);
    struct handover_msg r;
    char in[64];
    int fd;
    CHECK_EQ_INT(handover_recv(ch[0], &r, in, sizeof in, &fd), 1);
    CHECK_EQ_INT(r.kind, HO_CONN);
    CHECK_EQ_INT(r.tcp, 1);
    CHECK_EQ_INT(r.in_len, 5);
    CHECK(memcmp(in, "GET /", 5) == 0);
    CHECK(memcmp(r.state, m.state, 72) == 0);
    CHECK(fd >= 0 && same_file(fd, conn[0]));
    CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    close(fd);
    /* nothing more queued; then the peer's close reads as EOF */
    CHECK_EQ_INT(handover_recv(ch[0], &r, in, sizeof in, &fd), -EAGAIN);
    close(ch[1]);
    CHECK_EQ_INT(handover_recv(ch[0], &r, in, sizeof in, &fd), 0);
    close(ch[0]);
    close(conn[0]);
    close(conn[1]);
}

/* What master_handover_event relies on: a worker that exits with an
 * acknowledgement of the master's unread makes the channel report a reset
 * first, and the connections it handed over on its way out after it, then
 * the EOF. Closing at the reset would lose those connections. */
TEST(a_reset_comes_before_the_connections_still_queued)
{
    int ch[2], conn[2];
    if (!CHECK(handover_channel(ch) == 0) || !CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, conn) == 0))
        return;
    struct handover_msg m = {.kind = HO_CONN, .tcp = 1, .state_len = 8, .in_len = 0};
    CHECK_EQ_INT(handover_send(ch[1], &m, NULL, conn[0]), 0); /* the worker hands over */
    struct handover_msg ack = {.kind = HO_ACK, .count = 1};
    CHECK_EQ_INT(handover_send(ch[0], &ack, NULL, -1), 0);    /* the master's ack, unread */
    close(ch[1]);                                             /* the worker exits */
    struct handover_msg r;
    char in[64];
    int fd = -1;
    CHECK_EQ_INT(handover_recv(ch[0], &r, in, sizeof in, &fd), -ECONNRESET);
    CHECK_EQ_INT(handover_recv(ch[0], &r, in, sizeof in, &fd), 1);
    CHECK(r.kind == HO_CONN && fd >= 0 && same_file(fd, conn[0]));
    if (fd >= 0)
        close(fd);
    CHECK_EQ_INT(handover_recv(ch[0], &r, in, sizeof in, &fd), 0);
    close(ch[0]);
    close(conn[0]);
    close(conn[1]);
}

TEST(an_ack_carries_no_fd)
{
    int ch[2];
    if (!CHECK(handover_channel(ch) == 0))
        return;
    struct handover_msg m = {.kind = HO_ACK, .count = 17};
    CHECK_EQ_INT(handover_send(ch[0], &m, NULL, -1), 0);
    struct handover_msg r;
    char in[8];
    int fd;
    CHECK_EQ_INT(handover_recv(ch[1], &r, in, sizeof in, &fd), 1);
    CHECK_EQ_INT(r.kind, HO_ACK);
    CHECK_EQ_INT(r.count, 17);
    CHECK_EQ_INT(fd, -1);
    close(ch[0]);
    close(ch[1]);
}

TEST(bytes_larger_than_the_buffer_are_refused_with_the_fd)
{
    int ch[2], conn[2];
    if (!CHECK(handover_channel(ch) == 0) || !CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, conn) == 0))
        return;
    static char big[4096];
    struct handover_msg m = {.kind = HO_CONN, .in_len = sizeof big};
    CHECK_EQ_INT(handover_send(ch[1], &m, big, conn[0]), 0);
    struct handover_msg r;
    char in[100];
    int fd;
    CHECK_EQ_INT(handover_recv(ch[0], &r, in, sizeof in, &fd), -EMSGSIZE);
    CHECK(fd >= 0); /* the caller closes it: no fd leaks */
    if (fd >= 0)
        close(fd);
    close(ch[0]);
    close(ch[1]);
    close(conn[0]);
    close(conn[1]);
}

TEST(no_room_for_the_fd_is_told_apart)
{
    int ch[2], conn[2];
    if (!CHECK(handover_channel(ch) == 0) || !CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, conn) == 0))
        return;
    struct handover_msg m = {.kind = HO_CONN};
    CHECK_EQ_INT(handover_send(ch[1], &m, NULL, conn[0]), 0);
    struct rlimit old, tight;
    getrlimit(RLIMIT_NOFILE, &old);
    /* no fd free: the kernel drops the passed one (MSG_CTRUNC) */
    int top = ch[0] > conn[1] ? ch[0] : conn[1];
    for (int i = 0; i <= top; i++)
        if (fcntl(i, F_GETFD) < 0)
            dup2(ch[0] == 0 ? 1 : 0, i); /* fill the gaps below */
    tight = old;
    tight.rlim_cur = (rlim_t)top + 1;
    setrlimit(RLIMIT_NOFILE, &tight);
    struct handover_msg r;
    char in[8];
    int fd;
    int rc = handover_recv(ch[0], &r, in, sizeof in, &fd);
    setrlimit(RLIMIT_NOFILE, &old);
    CHECK_EQ_INT(rc, -EMFILE);
    CHECK_EQ_INT(fd, -1);
    close(ch[0]);
    close(ch[1]);
    close(conn[0]);
    close(conn[1]);
}

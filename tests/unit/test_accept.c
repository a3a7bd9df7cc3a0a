/* net_accept out of fds: the spare fd refuses connections, a lost spare
 * comes back with the first free fd, and threads share one spare without
 * losing it for good or leaking fds. Each scenario runs in a forked child
 * with a tiny RLIMIT_NOFILE (the child exits 0 when all is well, else with
 * the number of the first failed step), under alarm() as a watchdog. */
#include "unit.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "net/accept.h"
#include "net/listen.h"

#define FAIL(step, ...)                                                       \
    do {                                                                      \
        fprintf(stderr, "test_accept: step %d: ", step);                     \
        fprintf(stderr, __VA_ARGS__);                                         \
        fputc('\n', stderr);                                                  \
        _exit(step);                                                          \
    } while (0)

static int listener(uint16_t *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 1024) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) < 0)
        return -1;
    *port = ntohs(a.sin_port);
    return fd;
}

static int connect_to(uint16_t port, int nonblock)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) < 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    return fd;
}

static void set_nofile(rlim_t n)
{
    struct rlimit rl = {n, n};
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
        FAIL(90, "setrlimit: %s", strerror(errno));
}

/* Opens /dev/null until the fd table is full; returns how many. */
static int fill_fds(int *fds, int cap)
{
    int n = 0;
    while (n < cap && (fds[n] = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0)
        n++;
    return n;
}

static int open_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    while (readdir(d))
        n++;
    closedir(d);
    return n - 3; /* ".", ".." and the DIR's own fd */
}

/* Whether the peer closed c (EOF or reset), waiting up to ms. */
static int closed_by_peer(int c, int ms)
{
    struct pollfd p = {.fd = c, .events = POLLIN};
    if (poll(&p, 1, ms) <= 0)
        return 0;
    char b;
    ssize_t r = recv(c, &b, 1, MSG_DONTWAIT);
    return r == 0 || (r < 0 && (errno == ECONNRESET || errno == EPIPE));
}

static int child_status(pid_t pid)
{
    int st;
    if (waitpid(pid, &st, 0) != pid)
        return -1;
    if (WIFSIGNALED(st)) {
        fprintf(stderr, "test_accept: child killed by signal %d (a spin hits the alarm)\n",
                WTERMSIG(st));
        return 100 + WTERMSIG(st);
    }
    return WEXITSTATUS(st);
}

/* The spare could not be opened (the fd table was full, as after another
 * thread took its number): once one fd is free again, net_accept takes the
 * spare back and refuses the queued connections, down to an empty backlog.
 * Without that, the lost spare leaves -EMFILE forever and a full backlog. */
static void lost_spare_child(void)
{
    alarm(10);
    set_nofile(32);
    uint16_t port;
    int lfd = listener(&port);
    if (lfd < 0)
        FAIL(1, "listen: %s", strerror(errno));
    enum { QUEUED = 4 };
    int clients[QUEUED];
    for (int i = 0; i < QUEUED; i++)
        if ((clients[i] = connect_to(port, 0)) < 0)
            FAIL(2, "connect: %s", strerror(errno));
    int fill[64];
    int nfill = fill_fds(fill, 64);
    struct acceptor ac;
    acceptor_init(&ac); /* no fd for the spare */
    int r = net_accept(&ac, lfd, NULL);
    if (r != -EMFILE)
        FAIL(3, "no fd and no spare: got %d, want -EMFILE (back off)", r);
    close(fill[--nfill]);
    int refused = 0, calls = 0;
    while ((r = net_accept(&ac, lfd, NULL)) != -EAGAIN && ++calls < 64) {
        if (r == -ECONNREFUSED)
            refused++;
        else
            FAIL(4, "call %d with an fd free: got %d, want -ECONNREFUSED", calls, r);
    }
    if (r != -EAGAIN || refused != QUEUED)
        FAIL(5, "after %d calls: last %d, %d refused (want -EAGAIN and %d)", calls, r, refused,
             QUEUED);
    for (int i = 0; i < QUEUED; i++)
        if (!closed_by_peer(clients[i], 1000))
            FAIL(6, "queued connection %d was not closed", i);
    _exit(0);
}

TEST(a_lost_spare_comes_back)
{
    pid_t pid = fork();
    if (pid == 0)
        lost_spare_child();
    CHECK_EQ_INT(child_status(pid), 0);
}

/* Two threads accept from one listener in a process out of fds, each
 * keeping a few connections open (closing the oldest, as finished
 * requests do) and backing off on -EMFILE as the event loop does. */
struct taker {
    pthread_t tid;
    int lfd;
    int stop_fd;
    int held[8];
    int nheld;
    long accepted, refused, backoffs;
};

static void *taker_main(void *arg)
{
    struct taker *t = arg;
    struct acceptor ac;
    acceptor_init(&ac);
    for (;;) {
        int fd = net_accept(&ac, t->lfd, NULL);
        if (fd >= 0) {
            t->accepted++;
            if (t->nheld == 8) {
                close(t->held[0]);
                memmove(t->held, t->held + 1, 7 * sizeof(int));
                t->nheld--;
            }
            t->held[t->nheld++] = fd;
        } else if (fd == -ECONNREFUSED) {
            t->refused++;
        } else if (fd == -EMFILE) {
            t->backoffs++;
            if (t->nheld)
                close(t->held[--t->nheld]);
            poll(NULL, 0, 1);
        } else {
            /* The backlog is empty: keep what we hold while the burst goes
             * on (closing at once let threads that outran a slow client,
             * on a loaded machine, never fill the table); after 100 ms
             * with no new connection, those held are done. */
            struct pollfd p[2] = {{.fd = t->lfd, .events = POLLIN},
                                  {.fd = t->stop_fd, .events = POLLIN}};
            int n = poll(p, 2, 100);
            if (p[1].revents)
                break;
            if (n == 0)
                while (t->nheld)
                    close(t->held[--t->nheld]);
        }
    }
    while (t->nheld)
        close(t->held[--t->nheld]);
    acceptor_close(&ac);
    return NULL;
}

static void two_threads_child(int lfd, int ready_fd, int stop_fd)
{
    alarm(20);
    int before = open_fds();
    set_nofile((rlim_t)before + 24);
    int fill[64];
    int nfill = fill_fds(fill, 64);
    /* 6 fds for the spare and the connections: fewer than one thread
     * wants to hold, so the table fills up. */
    for (int i = 0; i < 6 && nfill; i++)
        close(fill[--nfill]);
    struct taker t[2];
    memset(t, 0, sizeof t);
    for (int i = 0; i < 2; i++) {
        t[i].lfd = lfd;
        t[i].stop_fd = stop_fd;
        if (pthread_create(&t[i].tid, NULL, taker_main, &t[i]) != 0)
            FAIL(10, "pthread_create");
    }
    if (write(ready_fd, "r", 1) != 1)
        FAIL(11, "ready: %s", strerror(errno));
    for (int i = 0; i < 2; i++)
        pthread_join(t[i].tid, NULL);
    long acc = t[0].accepted + t[1].accepted, ref = t[0].refused + t[1].refused;
    fprintf(stderr, "test_accept: two threads: %ld accepted, %ld refused, %ld back-offs\n",
            acc, ref, t[0].backoffs + t[1].backoffs);
    if (ref == 0)
        FAIL(12, "no connection was refused: the fd table never filled up");
    while (nfill)
        close(fill[--nfill]);
    int after = open_fds();
    if (after != before)
        FAIL(13, "%d fds open after the run, %d before (a leak or a double close)", after,
             before);
    if (fcntl(lfd, F_GETFD) < 0)
        FAIL(14, "the listener was closed by someone");
    _exit(0);
}

TEST(two_threads_share_the_spare)
{
    uint16_t port;
    int lfd = listener(&port);
    int ready[2], stop[2];
    if (!CHECK(lfd >= 0 && pipe(ready) == 0 && pipe(stop) == 0))
        return;
    pid_t pid = fork();
    if (pid == 0) {
        close(ready[0]);
        close(stop[1]);
        two_threads_child(lfd, ready[1], stop[0]);
    }
    close(ready[1]);
    close(stop[0]);
    close(lfd);
    char b;
    CHECK_EQ_INT(read(ready[0], &b, 1), 1);
    /* Bursts of connections; each must be closed by the server (refused,
     * or accepted and later closed) within the deadline. */
    enum { BURST = 200, ROUNDS = 5 };
    int resolved = 0;
    for (int round = 0; round < ROUNDS; round++) {
        int c[BURST];
        for (int i = 0; i < BURST; i++)
            c[i] = connect_to(port, 1);
        for (int i = 0; i < BURST; i++) {
            if (c[i] >= 0 && closed_by_peer(c[i], 5000))
                resolved++;
            if (c[i] >= 0)
                close(c[i]);
        }
    }
    CHECK_EQ_INT(resolved, BURST * ROUNDS);
    CHECK_EQ_INT(write(stop[1], "s", 1), 1);
    CHECK_EQ_INT(child_status(pid), 0);
    close(ready[0]);
    close(stop[1]);
}

static int nodelay_of(int fd)
{
    int v = -1;
    socklen_t len = sizeof v;
    return getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, &len) < 0 ? -1 : v;
}

/* net_accept sets no TCP_NODELAY of its own: a connection from a
 * listen_open TCP listener has it from the listener; a unix listener
 * opens and accepts as before. */
TEST(accepted_connections_have_nodelay_from_the_listener)
{
    char err[200];
    struct listen_addr a;
    if (!CHECK(listen_parse("127.0.0.1:0", &a, err, sizeof err) == 0))
        return;
    int lfd = listen_open(&a, 16, 0);
    if (!CHECK(lfd >= 0))
        return;
    CHECK_EQ_INT(nodelay_of(lfd), 1);
    struct acceptor ac;
    acceptor_init(&ac);
    int c = connect_to(ntohs(((struct sockaddr_in *)&a.ss)->sin_port), 0);
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    poll(&p, 1, 2000);
    struct sockaddr_storage peer;
    int fd = net_accept(&ac, lfd, &peer);
    if (CHECK(c >= 0 && fd >= 0))
        CHECK_EQ_INT(nodelay_of(fd), 1);
    if (fd >= 0)
        close(fd);
    if (c >= 0)
        close(c);
    close(lfd);

    char path[] = "unix:/tmp/herd-accept-XXXXXX";
    int tmp = mkstemp(path + 5);
    if (!CHECK(tmp >= 0))
        return;
    close(tmp);
    unlink(path + 5);
    struct listen_addr u;
    if (!CHECK(listen_parse(path, &u, err, sizeof err) == 0))
        return;
    lfd = listen_open(&u, 16, 0);
    if (!CHECK(lfd >= 0))
        return;
    c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(c >= 0 && connect(c, (struct sockaddr *)&u.ss, u.len) == 0);
    fd = net_accept(&ac, lfd, NULL);
    CHECK(fd >= 0);
    if (fd >= 0)
        close(fd);
    close(c);
    close(lfd);
    listen_cleanup(&u);
    acceptor_close(&ac);
}

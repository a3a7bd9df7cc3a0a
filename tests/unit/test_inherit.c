/* net/inherit: the names herd gives passed sockets, and a round trip
 * through inherit_export and inherit_from_env in a forked child (the
 * export moves fds to 3.., which this process may be using). */
#include "unit.h"

#include <stdlib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "net/inherit.h"

static struct listen_addr parse(const char *text)
{
    struct listen_addr a;
    char err[160];
    if (listen_parse(text, &a, err, sizeof err) < 0) {
        fprintf(stderr, "%s\n", err);
        exit(2);
    }
    return a;
}

TEST(names_escape_colons_and_say_the_slot)
{
    char buf[512];
    struct listen_addr a = parse("127.0.0.1:0");
    inherit_name(&a, 3, 0, buf, sizeof buf);
    CHECK_STR(buf, strlen(buf), "127.0.0.1%3A0#3");
    a = parse("[::1]:8080");
    inherit_name(&a, 0, 1, buf, sizeof buf);
    CHECK_STR(buf, strlen(buf), "[%3A%3A1]%3A8080#0#keep");
    a = parse("unix:/tmp/a b#%.sock");
    inherit_name(&a, 0, 0, buf, sizeof buf);
    CHECK_STR(buf, strlen(buf), "unix%3A/tmp/a%20b%23%25.sock#0");
}

static int same_port(const struct listen_addr *a, const struct listen_addr *b)
{
    return ((const struct sockaddr_in *)&a->ss)->sin_port ==
               ((const struct sockaddr_in *)&b->ss)->sin_port &&
           ((const struct sockaddr_in *)&a->ss)->sin_port != 0;
}

/* In the child: exit status = the first failed step (0: all fine). */
static int round_trip(const char *dir)
{
    struct listen_addr tcp = parse("127.0.0.1:0"), tcp2 = parse("127.0.0.1:0");
    char upath[200];
    snprintf(upath, sizeof upath, "unix:%s/s.sock", dir);
    struct listen_addr un = parse(upath);
    int fds[4];
    fds[0] = listen_open(&tcp, 16, 1);
    fds[1] = listen_open(&tcp, 16, 1); /* a reuseport sibling, same port */
    fds[2] = listen_open(&tcp2, 16, 0);
    fds[3] = listen_open(&un, 16, 0);
    for (int i = 0; i < 4; i++)
        if (fds[i] < 0)
            return 1;
    struct listen_addr orig_tcp = parse("127.0.0.1:0"), orig_tcp2 = parse("127.0.0.1:0");
    char n0[256], n1[256], n2[256], n3[256];
    inherit_name(&orig_tcp, 0, 0, n0, sizeof n0);
    inherit_name(&orig_tcp, 1, 0, n1, sizeof n1);
    inherit_name(&orig_tcp2, 0, 0, n2, sizeof n2);
    inherit_name(&un, 0, 1, n3, sizeof n3);
    char *names[] = {n0, n1, n2, n3};
    /* as systemd passes it: without TCP_NODELAY, which the import sets */
    int zero = 0;
    setsockopt(fds[2], IPPROTO_TCP, TCP_NODELAY, &zero, sizeof zero);
    int pipefd[2];
    if (pipe(pipefd) < 0)
        return 2;
    int extra = inherit_export(fds, names, 4, &pipefd[1], 1);
    if (extra != 7)
        return 3;
    struct inherited in;
    char err[256];
    if (inherit_from_env(&in, err, sizeof err) != 4 || getenv("LISTEN_FDS") || getenv("LISTEN_PID") ||
        getenv("LISTEN_FDNAMES"))
        return 4;
    /* port 0 finds its two sockets by name, and they fix the real port */
    const struct inherited_fd *f = inherit_take(&in, &orig_tcp);
    if (!f || f->fd != 3 || !f->reuseport || !f->path_ours)
        return 5;
    f = inherit_take(&in, &orig_tcp);
    if (!f || f->fd != 4 || !same_port(&orig_tcp, &tcp))
        return 6;
    if (inherit_take(&in, &orig_tcp))
        return 7;
    f = inherit_take(&in, &orig_tcp2);
    if (!f || f->fd != 5 || f->reuseport)
        return 8;
    int v = 0;
    socklen_t vlen = sizeof v;
    if (getsockopt(5, IPPROTO_TCP, TCP_NODELAY, &v, &vlen) < 0 || !v)
        return 11; /* accepted connections would wait on Nagle */
    struct listen_addr un2 = parse(upath);
    f = inherit_take(&in, &un2);
    if (!f || f->fd != 6 || f->path_ours) /* "#keep" */
        return 9;
    if (inherit_close_unused(&in) != 0)
        return 10;
    inherit_free(&in);
    listen_cleanup(&un);
    return 0;
}

TEST(export_and_import_round_trip)
{
    char dir[] = "/tmp/herd-inherit-XXXXXX";
    if (!CHECK(mkdtemp(dir)))
        return;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0)
        _exit(round_trip(dir));
    int status = -1;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status));
    CHECK_EQ_INT(WEXITSTATUS(status), 0);
    rmdir(dir);
}

TEST(sockets_for_another_pid_are_left_alone)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        char num[24];
        snprintf(num, sizeof num, "%ld", (long)getpid() + 1);
        setenv("LISTEN_PID", num, 1);
        setenv("LISTEN_FDS", "1", 1);
        struct inherited in;
        char err[256];
        int n = inherit_from_env(&in, err, sizeof err);
        _exit(n != 0 || getenv("LISTEN_PID") || getenv("LISTEN_FDS") ? 1 : 0);
    }
    int status = -1;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

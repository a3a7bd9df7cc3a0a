/* A port taken between herd lab's pick and the server's bind, for tests
 * (LD_PRELOAD): the first bind() of a `herd serve` process fails with
 * EADDRINUSE, once in all: the process that creates $TAKEN_PORT_ONCE (a
 * path) first is the one that fails. Other processes (the lab itself, herd
 * load) bind as usual. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int is_herd_serve(void)
{
    char buf[256];
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    size_t first = strlen(buf) + 1; /* argv[1] follows argv[0]'s NUL */
    return first < (size_t)n && !strcmp(buf + first, "serve");
}

int bind(int fd, const struct sockaddr *addr, socklen_t len)
{
    static int (*next)(int, const struct sockaddr *, socklen_t);
    if (!next)
        next = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "bind");
    const char *once = getenv("TAKEN_PORT_ONCE");
    if (once && is_herd_serve()) {
        int mark = open(once, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (mark >= 0) {
            close(mark);
            errno = EADDRINUSE;
            return -1;
        }
    }
    return next(fd, addr, len);
}

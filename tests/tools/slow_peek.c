/* A slow first look at a socket, for tests (LD_PRELOAD): a recv with
 * MSG_PEEK that finds nothing to read returns after $SLOW_PEEK_MS ms, so
 * bytes the client sends meanwhile are there for whatever herd does next.
 * That widens, from microseconds to a sure thing, the window in which a
 * loaded machine let a request arrive between herd's peek and its read. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

ssize_t recv(int fd, void *buf, size_t len, int flags)
{
    static ssize_t (*next)(int, void *, size_t, int);
    if (!next)
        next = (ssize_t (*)(int, void *, size_t, int))dlsym(RTLD_NEXT, "recv");
    ssize_t n = next(fd, buf, len, flags);
    const char *ms = getenv("SLOW_PEEK_MS");
    if (n < 0 && errno == EAGAIN && (flags & MSG_PEEK) && ms) {
        struct timespec t = {.tv_sec = atoi(ms) / 1000, .tv_nsec = atoi(ms) % 1000 * 1000000L};
        nanosleep(&t, NULL);
        errno = EAGAIN;
    }
    return n;
}

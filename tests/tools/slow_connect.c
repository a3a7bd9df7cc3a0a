/* A slow start, for tests (LD_PRELOAD): the first connect() of each
 * process waits $SLOW_CONNECT_MS ms before it goes. herd load connects
 * once before it fixes its run's start, so under this shim it starts that
 * much later than whoever spawned it expects: what a loaded machine did to
 * herd lab's reload signals (0.44 s early), made a sure thing. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
    static int (*next)(int, const struct sockaddr *, socklen_t);
    static int done;
    if (!next)
        next = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "connect");
    const char *ms = getenv("SLOW_CONNECT_MS");
    if (!__atomic_exchange_n(&done, 1, __ATOMIC_RELAXED) && ms) {
        struct timespec t = {.tv_sec = atoi(ms) / 1000, .tv_nsec = atoi(ms) % 1000 * 1000000L};
        nanosleep(&t, NULL);
    }
    return next(fd, addr, len);
}

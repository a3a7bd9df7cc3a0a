/* Socket buffers as a small net.core.wmem_max/rmem_max leaves them, for
 * tests (LD_PRELOAD): SO_SNDBUF and SO_RCVBUF requests above
 * $SOCKBUF_CAP bytes are lowered to it, so herd's channels fill after a
 * few messages (the kernel's own floor is 4608). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/socket.h>

int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
    static int (*next)(int, int, int, const void *, socklen_t);
    if (!next)
        next = (int (*)(int, int, int, const void *, socklen_t))dlsym(RTLD_NEXT, "setsockopt");
    const char *cap = getenv("SOCKBUF_CAP");
    if (cap && level == SOL_SOCKET && (name == SO_SNDBUF || name == SO_RCVBUF) &&
        len == sizeof(int) && *(const int *)val > atoi(cap)) {
        int lowered = atoi(cap);
        return next(fd, level, name, &lowered, len);
    }
    return next(fd, level, name, val, len);
}

/* openat2 confined below a directory: see core/beneath.h. */
#include "core/beneath.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

/* A walk through ".." under RESOLVE_BENEATH fails with EAGAIN when any
 * rename (or mount) happened on the machine meanwhile: rename_lock is
 * global, so a symlink "../shared/f" below the docroot gave a 404 for
 * half the requests while another process renamed files in a loop, a
 * log rotation or a deploy elsewhere (red-team pass 22). openat2(2) says
 * to retry; a walk is microseconds, so a few tries get through any load
 * short of renames back to back, and the bound keeps a worker from
 * spinning. */
#define BENEATH_TRIES 64

int open_beneath(int dirfd, const char *rel, int flags)
{
    struct open_how how = {
        .flags = (unsigned)flags | O_CLOEXEC,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
    };
    for (int i = 0; i < BENEATH_TRIES; i++) {
        int fd = (int)syscall(SYS_openat2, dirfd, rel, &how, sizeof how);
        if (fd >= 0)
            return fd;
        if (errno != EAGAIN)
            return -errno;
    }
    return -EAGAIN;
}

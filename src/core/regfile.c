/* Reading and replacing named files safely: see core/regfile.h. */
#include "core/regfile.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

FILE *regfile_open(const char *path)
{
    /* O_NONBLOCK: opening a FIFO with no writer returns at once */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return NULL;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        errno = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
        return NULL;
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0)
        (void)fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    FILE *f = fdopen(fd, "re");
    if (!f) {
        int e = errno;
        close(fd);
        errno = e;
    }
    return f;
}

const char *regfile_strerror(int err)
{
    return err == EINVAL ? "not a regular file" : strerror(err);
}

int regfile_replace(const char *path, const char *suffix, const char *data, size_t len)
{
    char tmp[4200];
    size_t pl = strlen(path), sl = strlen(suffix);
    if (pl + sl >= sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(tmp, path, pl);
    memcpy(tmp + pl, suffix, sl + 1);
    if (unlink(tmp) < 0 && errno != ENOENT)
        return -1;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    size_t done = 0;
    while (done < len) {
        ssize_t n = write(fd, data + done, len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int e = n < 0 ? errno : EIO;
            close(fd);
            unlink(tmp);
            errno = e;
            return -1;
        }
        done += (size_t)n;
    }
    if (close(fd) < 0 || rename(tmp, path) < 0) {
        int e = errno;
        unlink(tmp);
        errno = e;
        return -1;
    }
    return 0;
}

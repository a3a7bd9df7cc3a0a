#include "core/readfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

char *read_file_bounded(const char *path, size_t max, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n > max) { /* one byte past the bound is enough to know */
            free(buf);
            buf = NULL;
            errno = EFBIG;
            break;
        }
        if (n + 1 == cap) {
            char *bigger = realloc(buf, cap * 2);
            if (!bigger) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = bigger;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            free(buf);
            buf = NULL;
        } else if (r == 0) {
            buf[n] = '\0';
            break;
        } else {
            n += (size_t)r;
        }
    }
    int saved = errno;
    close(fd);
    errno = saved;
    if (buf && len)
        *len = n;
    return buf;
}

char *read_file_whole(const char *path, size_t *len)
{
    return read_file_bounded(path, SIZE_MAX, len);
}

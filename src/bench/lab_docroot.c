/* The lab's docroot: the files every server serves, made once per lab. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/lab_internal.h"

int lab_mkdir_p(const char *path)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(buf, 0755) < 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if (mkdir(buf, 0755) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

static int write_bytes(const char *path, const char *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, data + off, len - off);
        if (w < 0) {
            int e = errno;
            close(fd);
            return -e;
        }
        off += (size_t)w;
    }
    fchmod(fd, 0644);
    return close(fd) < 0 ? -errno : 0;
}

/* The docroot: a 64-byte index.html (the anchors' file), 4k.bin, 1m.bin. */
int lab_make_docroot(struct lab *lab, char *err, size_t errlen)
{
    static const char index_html[] = "<html><body>anchor: 64-byte index.html, HTTP test</body></html>\n";
    _Static_assert(sizeof index_html - 1 == 64, "index.html is 64 bytes");
    int rc = lab_mkdir_p(lab->docroot);
    if (rc < 0) {
        snprintf(err, errlen, "cannot create %.200s: %s", lab->docroot, strerror(-rc));
        return -1;
    }
    chmod(lab->docroot, 0755);
    char path[700];
    char *big = malloc(1 << 20);
    if (!big) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    uint32_t x = 2463534242u; /* xorshift: incompressible, repeatable */
    for (size_t i = 0; i < (1 << 20); i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        big[i] = (char)x;
    }
    struct { const char *name; const char *data; size_t len; } files[] = {
        {"index.html", index_html, 64}, {"4k.bin", big, 4096}, {"1m.bin", big, 1 << 20},
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", lab->docroot, files[i].name);
        rc = write_bytes(path, files[i].data, files[i].len);
        if (rc < 0) {
            snprintf(err, errlen, "cannot write %.200s: %s", path, strerror(-rc));
            free(big);
            return -1;
        }
    }
    free(big);
    struct stat st;
    snprintf(path, sizeof path, "%s%s", lab->docroot, lab->cfg->path);
    lab->body_bytes = stat(path, &st) == 0 && S_ISREG(st.st_mode) ? (int)st.st_size : -1;
    return 0;
}

/* Run as root, nginx and h2o serve from a worker running as nobody: every
 * directory above the docroot must let others through. */
void lab_check_docroot_reach(struct lab *lab)
{
    if (geteuid() != 0 || lab->nnotes >= 8)
        return;
    char buf[700];
    snprintf(buf, sizeof buf, "%s", lab->docroot);
    for (char *p = buf + strlen(buf); p > buf; p--) {
        if (*p != '/')
            continue;
        *p = 0;
        struct stat st;
        if (*buf && stat(buf, &st) == 0 && !(st.st_mode & S_IXOTH)) {
            lab->docroot_private = 1;
            snprintf(lab->notes[lab->nnotes++], sizeof lab->notes[0],
                     "%.150s is not searchable by other users, so nginx and h2o run their "
                     "worker as root (`user root`) instead of dropping to nobody; no effect "
                     "on speed", buf);
            return;
        }
    }
}

#include "models/pending.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "models/plan_write.h"

static int copied(const struct iovec *v, const char *lo, const char *hi)
{
    const char *p = v->iov_base;
    return p >= lo && p < hi;
}

/* The part of iov[i] left after skipping `*skip` bytes of the batch. */
static int left_of(const struct iovec *iov, int i, size_t *skip, struct iovec *out)
{
    size_t l = iov[i].iov_len;
    if (*skip >= l) {
        *skip -= l;
        return 0;
    }
    *out = (struct iovec){(char *)iov[i].iov_base + *skip, l - *skip};
    *skip = 0;
    return 1;
}

static void release(struct fc_entry **refs, int nrefs, struct fc_entry *file)
{
    for (int i = 0; i < nrefs; i++)
        fc_release(refs[i]);
    if (file)
        fc_release(file);
}

struct pending *pending_new(const struct iovec *iov, int niov, size_t done,
                            const char *copy_lo, const char *copy_hi,
                            struct fc_entry **refs, int nrefs,
                            struct fc_entry *file, off_t file_off, off_t file_end)
{
    size_t skip = done, bytes = 0;
    int n = 0;
    struct iovec v;
    for (int i = 0; i < niov; i++) {
        if (!left_of(iov, i, &skip, &v))
            continue;
        n++;
        if (copied(&iov[i], copy_lo, copy_hi))
            bytes += v.iov_len;
    }
    struct pending *p = malloc(sizeof *p + (size_t)n * sizeof *p->iov +
                               (size_t)nrefs * sizeof *p->refs + bytes);
    if (!p) {
        release(refs, nrefs, file);
        return NULL;
    }
    p->iov = (struct iovec *)(p + 1);
    p->refs = (struct fc_entry **)(p->iov + n);
    char *mem = (char *)(p->refs + nrefs);
    p->niov = n;
    p->cur = 0;
    p->nrefs = nrefs;
    memcpy(p->refs, refs, (size_t)nrefs * sizeof *refs);
    p->file = file;
    p->file_off = file_off;
    p->file_end = file_end;
    p->warm_end = file_off;
    p->cold = 0;
    skip = done;
    n = 0;
    for (int i = 0; i < niov; i++) {
        if (!left_of(iov, i, &skip, &v))
            continue;
        if (copied(&iov[i], copy_lo, copy_hi)) {
            memcpy(mem, v.iov_base, v.iov_len);
            v.iov_base = mem;
            mem += v.iov_len;
        }
        p->iov[n++] = v;
    }
    return p;
}

/* Drops the first n written bytes from p's iovecs. */
static void advance(struct pending *p, size_t n)
{
    while (n && p->cur < p->niov) {
        struct iovec *v = &p->iov[p->cur];
        if (n < v->iov_len) {
            v->iov_base = (char *)v->iov_base + n;
            v->iov_len -= n;
            return;
        }
        n -= v->iov_len;
        p->cur++;
    }
}

int pending_write(struct pending *p, int fd, SSL *ssl, uint64_t *sent)
{
    *sent = 0;
    off_t stop = p->warm_end < p->file_end ? p->warm_end : p->file_end;
    int more = p->file && p->file_off < stop;
    while (p->cur < p->niov) {
        int k = p->niov - p->cur;
        struct msghdr m = {.msg_iov = p->iov + p->cur,
                           .msg_iovlen = (size_t)(k > IOV_MAX ? IOV_MAX : k)};
        ssize_t n = ssl ? tls_writev(ssl, m.msg_iov, (int)m.msg_iovlen)
                        : sendmsg(fd, &m, MSG_NOSIGNAL | (more ? MSG_MORE : 0));
        if (n < 0 && !ssl)
            n = -errno;
        if (n < 0) {
            if (n == -EINTR)
                continue;
            return (int)n;
        }
        *sent += (uint64_t)n;
        advance(p, (size_t)n);
    }
    if (!more)
        return 0;
    return plan_send_file(fd, ssl, p->file, &p->file_off, stop, sent);
}

void pending_free(struct pending *p)
{
    release(p->refs, p->nrefs, p->file);
    free(p);
}

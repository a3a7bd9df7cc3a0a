#include "models/plan_write.h"

#include <errno.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include "core/log.h"
#include "core/printable.h"
#include "http/filecache.h"
#include "models/file_window.h"
#include "models/linger.h"

int plan_sendfile(int fd, int file_fd, off_t *off, off_t end, uint64_t *sent)
{
    while (*off < end) {
        size_t chunk = end - *off > (1 << 30) ? (size_t)1 << 30 : (size_t)(end - *off);
        off_t before = *off;
        ssize_t n = sendfile(fd, file_fd, off, chunk);
        if (n > 0) {
            *sent += (uint64_t)(*off - before);
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        return n == 0 ? -EIO : -errno;
    }
    return 0;
}

/* The file ended before the range sent from it: the Content-Length that
 * went out is a promise broken, and the connection closes. Said in the
 * error log, as nginx's 'sendfile() reported that "F" was truncated at
 * N', or the operator sees only clients that fail (red-team pass 22). */
static void report_short(const struct fc_entry *f, off_t off)
{
    char name[256];
    size_t n = f->path_len < sizeof name - 1 ? f->path_len : sizeof name - 1;
    memcpy(name, f->path, n);
    name[n] = '\0';
    text_printable(name, n, 0); /* a file's name is anyone's bytes */
    struct stat st;
    if (fstat(f->fd, &st) == 0 && st.st_size <= off)
        log_msg(LOG_ERROR, "\"%s\" was truncated at %lld while it was sent (it had %lld "
                "bytes): connection closed", name, (long long)off, (long long)f->size);
    else
        log_msg(LOG_ERROR, "reading \"%s\" at %lld: %s: connection closed", name,
                (long long)off, strerror(EIO));
}

/* The answer was cut and every driver closes the connection next, at
 * once: no lingering close, which only an answer that ended gets. What
 * the client sent meanwhile (its next requests) is read off first, or the
 * close finds it unread and the kernel resets the connection, and the
 * reset drops the part of the answer the client had not read yet: it kept
 * less of the file than was sent (red-team pass 31). Bounded: input that
 * goes on coming draws the reset all the same, as after any close. */
static void drop_waiting_input(int fd)
{
    char sink[512];
    for (int i = 0; i < LINGER_READS_MAX; i++)
        if (recv(fd, sink, sizeof sink, MSG_DONTWAIT) <= 0)
            return;
}

int plan_send_file(int fd, SSL *ssl, struct fc_entry *f, off_t *off, off_t end,
                   uint64_t *sent)
{
    int rc = ssl ? tls_sendfile(ssl, f->fd, off, end, sent)
                 : plan_sendfile(fd, f->fd, off, end, sent);
    if (rc == -EIO) {
        report_short(f, *off);
        drop_waiting_input(fd);
        /* looked at again on its next request, not once its second is
         * over: every answer from it till then would be cut the same way */
        f->checked = 0;
    }
    return rc;
}

int plan_inline_body(struct http_out *out, struct http_plan *plan)
{
    const char *p = plan->body;
    size_t len = plan->body_len;
    if (plan->file) {
        if (len || !plan->file->data)
            return 0;
        p = plan->file->data + plan->file_off;
        len = (size_t)plan->file_len;
    }
    if (!p || len > PLAN_INLINE_MAX || plan->head_off + plan->head_len != out->len ||
        out->cap - out->len < len)
        return 0;
    memcpy(out->buf + out->len, p, len);
    out->len += len;
    plan->head_len += (uint32_t)len;
    plan->body = NULL;
    plan->body_len = 0;
    if (plan->file)
        fc_release(plan->file);
    plan->file = NULL;
    plan->file_off = plan->file_len = 0;
    return 1;
}

/* Writes all of iov[0..niov), MSG_MORE when a file range or a close follows. */
static int send_all(int fd, SSL *ssl, struct iovec *iov, int niov, int more,
                    const struct plan_waits *w, uint64_t *sent)
{
    while (niov) {
        struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)niov};
        int flags = MSG_NOSIGNAL | MSG_DONTWAIT | (more ? MSG_MORE : 0);
        ssize_t n = ssl         ? tls_writev(ssl, iov, niov)
                    : niov == 1 ? send(fd, iov->iov_base, iov->iov_len, flags)
                                : sendmsg(fd, &m, flags);
        if (n < 0 && ssl)
            errno = (int)-n;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN) {
            if (w->room(w->arg, fd) < 0)
                return -1;
            continue;
        }
        if (n <= 0)
            return -1;
        *sent += (uint64_t)n;
        size_t done = (size_t)n;
        while (niov && done >= iov->iov_len) {
            done -= iov->iov_len;
            iov++;
            niov--;
        }
        if (niov) {
            iov->iov_base = (char *)iov->iov_base + done;
            iov->iov_len -= done;
        }
    }
    return 0;
}

/* The last answer went with MSG_MORE: shutting the write side sends it
 * with the FIN before the driver's close, which could otherwise find
 * unread input, reset the connection and drop the corked bytes. */
static int finished(int fd, SSL *ssl, const struct http_plan *plan)
{
    if (plan->close && !ssl)
        shutdown(fd, SHUT_WR);
    return 0;
}

int plan_write(int fd, SSL *ssl, const struct http_out *out, const struct http_plan *plan,
               const struct plan_waits *w, uint64_t *sent)
{
    struct iovec iov[3];
    int niov = 0;
    iov[niov++] = (struct iovec){out->buf + plan->head_off, plan->head_len};
    if (plan->body_len)
        iov[niov++] = (struct iovec){(void *)plan->body, plan->body_len};
    if (plan->file && plan->file->data && plan->file_len)
        iov[niov++] = (struct iovec){(char *)plan->file->data + plan->file_off,
                                     (size_t)plan->file_len};
    int by_sendfile = plan->file && !plan->file->data;
    if (send_all(fd, ssl, iov, niov, by_sendfile || plan->close, w, sent) < 0)
        return -1;
    if (!by_sendfile)
        return finished(fd, ssl, plan);
    off_t off = plan->file_off, end = plan->file_off + plan->file_len;
    off_t window = off; /* where the window being sent ends */
    unsigned char cold = 0;
    for (;;) {
        if (off >= window) {
            window = w->turn ? file_window_end(off, end) : end;
            if (w->turn && w->warm && w->warm(w->arg, plan->file, off, window, &cold) < 0)
                return -1;
        }
        int rc = plan_send_file(fd, ssl, plan->file, &off, window, sent);
        if (rc == 0 && off >= end)
            return finished(fd, ssl, plan);
        if (rc == 0)
            w->turn(w->arg); /* a window went: the others go first */
        else if (rc != -EAGAIN || w->room(w->arg, fd) < 0)
            return -1;
    }
}

/* The uring model's output: the answers of one input round go out in one
 * IORING_OP_SEND (one buffer) or IORING_OP_SENDMSG (several), queued with every other SQE of the completion round
 * and submitted by the loop's one io_uring_submit_and_wait. A file too big
 * for the cache follows with a plain non-blocking sendfile(2), and when the
 * socket is full, an IORING_OP_POLL_ADD for room: simpler than a splice
 * through a pipe per connection, and the same copy count. A sendfile of
 * pages that are not in the page cache would block the loop on the disk
 * (non-blocking sockets say nothing about files), so the file goes a window
 * at a time, and a window not all cached (cachestat) is first read in by
 * an IORING_OP_READ, which the kernel does without the loop waiting: the
 * ring is the helper, as nginx's thread pool is for its sendfile. */
#include <errno.h>
#include <poll.h>
#include <string.h>

#include "core/log.h"
#include "http/filecache.h"
#include "models/file_window.h"
#include "models/plan_write.h"
#include "models/uring_internal.h"

/* As the event loop's batch (models/conn.c): a pipelining client that does
 * not read costs this much queued output at most, plus one answer. */
#define OUT_BUDGET (256 * 1024)

struct uout *uout_get(struct uring_loop *u, struct uconn *c)
{
    struct uout *o = (struct uout *)(void *)bufpool_get(&u->outbufs);
    if (!o)
        return NULL;
    o->next = NULL;
    o->fd = uconn_fd(u, c);
    o->gen = c->gen;
    o->niov = 0;
    o->bytes = 0;
    o->nrefs = 0;
    o->file = NULL;
    o->warm_end = 0;
    o->cold = 0;
    o->peer_shut = 0;
    u->out = (struct http_out){.buf = o->data, .len = 0, .cap = u->out_cap};
    return o;
}

void uout_free(struct uring_loop *u, struct uout *o)
{
    for (int i = 0; i < o->nrefs; i++)
        fc_release(o->refs[i]);
    if (o->file)
        fc_release(o->file);
    bufpool_put(&u->outbufs, (char *)o);
}

int uout_room(const struct uring_loop *u, const struct uout *o)
{
    const struct http_config *hc = &u->cfg->http;
    return !o->file && o->niov <= UOUT_IOV - 4 && o->bytes < OUT_BUDGET &&
           u->out.cap - u->out.len >= HTTP_HEAD_RESERVE + HTTP_STATUS_MAX + hc->max_header_size;
}

static void add_iov(struct uout *o, const char *p, size_t len)
{
    if (!len)
        return;
    struct iovec *last = o->niov ? &o->iov[o->niov - 1] : NULL;
    if (last && (const char *)last->iov_base + last->iov_len == p)
        last->iov_len += len; /* heads of consecutive answers are adjacent */
    else
        o->iov[o->niov++] = (struct iovec){(void *)p, len};
    o->bytes += len;
}

int uout_add(struct uring_loop *u, struct uout *o, struct http_plan *plan)
{
    plan_inline_body(&u->out, plan);
    add_iov(o, u->out.buf + plan->head_off, plan->head_len);
    add_iov(o, plan->body, plan->body_len);
    if (plan->file && plan->file->data) {
        add_iov(o, plan->file->data + plan->file_off, (size_t)plan->file_len);
        o->refs[o->nrefs++] = plan->file;
    } else if (plan->file) {
        o->file = plan->file;
        o->off = plan->file_off;
        o->end = plan->file_off + plan->file_len;
        o->warm_end = o->off;
    }
    return !uout_room(u, o);
}

static void queue_send(struct uring_loop *u, struct uconn *c)
{
    struct uout *o = c->out;
    o->msg = (struct msghdr){.msg_iov = o->iov, .msg_iovlen = (size_t)o->niov};
    struct io_uring_sqe *sqe = uring_sqe(&u->ring);
    /* MSG_MORE: the head and the file's first bytes share a segment, and
     * the last answer before a close shares one with the FIN
     * (models/plan_write.h). */
    int more = o->file || c->st.closing;
    int flags = MSG_NOSIGNAL | (more ? MSG_MORE : 0);
    if (o->niov == 1)
        io_uring_prep_send(sqe, o->fd, o->iov[0].iov_base, o->iov[0].iov_len, flags);
    else
        io_uring_prep_sendmsg(sqe, o->fd, &o->msg, flags);
    io_uring_sqe_set_data64(sqe, uring_tag(UK_SEND, o->gen, (uint32_t)o->fd));
    c->sending = 1;
    /* Counted when queued and corrected at completion: counted there
     * only, a client could read the answer and see the status page before
     * this worker reaps the completion. */
    SB_ADD(u->slot->bytes_out, o->bytes);
}

static enum uout_next output_finished(struct uring_loop *u, struct uconn *c)
{
    uout_free(u, c->out);
    c->out = NULL;
    return UOUT_DONE;
}

/* Where the file window that starts at o->off ends. */
static off_t window_end(const struct uout *o)
{
    return file_window_end(o->off, o->end);
}

/* Reads file[off, stop) into the sink, which brings it into the page
 * cache; 1 if it is on its way (models/file_window.h). */
static int warm(struct uring_loop *u, struct uconn *c, off_t stop)
{
    struct uout *o = c->out;
    if (file_window_ready(o->file, o->off, stop, &o->cold))
        return 0; /* cached, or no way to tell: sendfile at once as before */
    log_debug("connection %d: reading %lld bytes of a file into the page cache",
              o->fd, (long long)(stop - o->off));
    struct io_uring_sqe *sqe = uring_sqe(&u->ring);
    io_uring_prep_read(sqe, o->file->fd, u->warm_sink, (unsigned)(stop - o->off),
                       (uint64_t)o->off);
    io_uring_sqe_set_data64(sqe, uring_tag(UK_WARM, c->gen, (uint32_t)o->fd));
    c->warming = 1;
    SB_ADD(u->slot->file_reads, 1);
    return 1;
}

/* io_uring's poll always reports POLLRDHUP (io_uring/poll.c adds it to
 * every poll's events): once the peer has half-closed, a poll for room
 * completes at once whether there is room or not. Polled again, a
 * download to a client that sent its request and shut its side spun the
 * loop at full speed for as long as the answer lasted, and a client that
 * then read nothing held it for good: each turn counted as progress and
 * restarted the send timeout (red-team pass 31). Such a peer's room is
 * looked for after a pause instead. */
#define PEER_SHUT_PAUSE_MS 10

static void wait_for_room(struct uring_loop *u, struct uconn *c)
{
    static struct __kernel_timespec pause = {.tv_nsec = PEER_SHUT_PAUSE_MS * 1000000L};
    struct uout *o = c->out;
    struct io_uring_sqe *sqe = uring_sqe(&u->ring);
    if (o->peer_shut)
        io_uring_prep_timeout(sqe, &pause, 0, 0); /* ends with -ETIME */
    else
        io_uring_prep_poll_add(sqe, o->fd, POLLOUT);
    io_uring_sqe_set_data64(sqe, uring_tag(UK_POLLOUT, c->gen, (uint32_t)o->fd));
    c->polling = 1;
}

/* sendfile a window at a time until done, each window in the page cache
 * first (warm), and one window a turn: then the worker's other
 * completions go first (as the event loop's turns, conn_turn.c). A full
 * socket, or a turn that ended, waits for room through the ring: the poll
 * of a socket that has room completes in the next round. */
static enum uout_next send_file(struct uring_loop *u, struct uconn *c)
{
    struct uout *o = c->out;
    c->waited = 1; /* a file's body: more than one step, and time for input */
    off_t turn_start = o->off;
    int rc = 0;
    while (o->off < o->end) {
        off_t stop = window_end(o);
        if (o->warm_end < stop) {
            if (o->off - turn_start >= FILE_WINDOW) {
                rc = -EAGAIN;
                break;
            }
            if (warm(u, c, stop))
                return UOUT_WAIT;
            o->warm_end = stop;
        }
        uint64_t sent = 0;
        rc = plan_send_file(o->fd, NULL, o->file, &o->off, stop, &sent);
        SB_ADD(u->slot->bytes_out, sent);
        if (rc < 0)
            break;
    }
    if (rc == 0)
        return output_finished(u, c);
    if (rc != -EAGAIN)
        return UOUT_CLOSE;
    wait_for_room(u, c);
    return UOUT_WAIT; /* progress restarts the send timeout */
}

enum uout_next uout_start(struct uring_loop *u, struct uconn *c)
{
    if (!c->out->bytes)
        return send_file(u, c);
    queue_send(u, c);
    return UOUT_WAIT;
}

/* Drops iov's first n bytes after a short send. */
static void advance(struct uout *o, size_t n)
{
    int i = 0;
    while (i < o->niov && n >= o->iov[i].iov_len)
        n -= o->iov[i++].iov_len;
    if (i < o->niov) {
        o->iov[i].iov_base = (char *)o->iov[i].iov_base + n;
        o->iov[i].iov_len -= n;
    }
    memmove(o->iov, o->iov + i, (size_t)(o->niov - i) * sizeof o->iov[0]);
    o->niov -= i;
}

/* A sendmsg (or a page-cache read) of a connection that closed meanwhile:
 * its buffer (and file) was kept until now because the kernel may have
 * been reading it. */
static void free_orphan(struct uring_loop *u, int fd, uint32_t gen, int res)
{
    for (struct uout **p = &u->orphans; *p; p = &(*p)->next) {
        if ((*p)->fd == fd && (*p)->gen == gen) {
            struct uout *o = *p;
            *p = o->next;
            size_t sent = res > 0 ? (size_t)res : 0;
            SB_ADD(u->slot->bytes_out, -(uint64_t)(o->bytes - (sent < o->bytes ? sent : o->bytes)));
            uout_free(u, o);
            return;
        }
    }
}

/* The connection whose sendmsg (UK_SEND) or page-cache read (UK_WARM)
 * completed, marked as no longer waiting for it; NULL when it closed
 * meanwhile, and the output it left is freed. */
static struct uconn *completed_for(struct uring_loop *u, uint64_t tag, int res)
{
    int fd = (int)uring_tag_id(tag);
    uint32_t gen = uring_tag_gen(tag);
    struct uconn *c = fd < u->max_fds ? &u->conns[fd] : NULL;
    uint8_t *waits = !c ? NULL : uring_tag_kind(tag) == UK_SEND ? &c->sending : &c->warming;
    if (!c || !c->open || c->gen != gen || !*waits) {
        free_orphan(u, fd, gen, res);
        return NULL;
    }
    *waits = 0;
    return c;
}

enum uout_next uout_on_send(struct uring_loop *u, uint64_t tag, int res, struct uconn **cp)
{
    struct uconn *c = completed_for(u, tag, res);
    if (!c)
        return UOUT_NONE;
    *cp = c;
    struct uout *o = c->out;
    if (res < 0) {
        SB_ADD(u->slot->bytes_out, -(uint64_t)o->bytes);
        return UOUT_CLOSE; /* EPIPE, ECONNRESET: quietly */
    }
    if ((size_t)res < o->bytes) {
        c->waited = 1; /* the client's socket was full: input may have come meanwhile */
        SB_ADD(u->slot->bytes_out, -(uint64_t)(o->bytes - (size_t)res));
        o->bytes -= (size_t)res;
        advance(o, (size_t)res);
        queue_send(u, c);
        return UOUT_WAIT;
    }
    o->bytes = 0;
    return o->file ? send_file(u, c) : output_finished(u, c);
}

enum uout_next uout_on_pollout(struct uring_loop *u, struct uconn *c, int res)
{
    c->polling = 0;
    struct uout *o = c->out;
    if (res != -ETIME) { /* a poll, not the pause after a half-close */
        if (res < 0 || (res & (POLLERR | POLLHUP)))
            return UOUT_CLOSE;
        if (res & POLLRDHUP)
            o->peer_shut = 1;
    }
    off_t before = o->off;
    enum uout_next next = send_file(u, c);
    /* a pause or poll that ended without room is no progress: the send
     * timeout keeps running for a peer that reads nothing */
    if (next == UOUT_WAIT && o->peer_shut && c->out == o && o->off == before)
        return UOUT_NONE;
    return next;
}

enum uout_next uout_on_warm(struct uring_loop *u, uint64_t tag, int res, struct uconn **cp)
{
    struct uconn *c = completed_for(u, tag, res);
    if (!c)
        return UOUT_NONE;
    *cp = c;
    /* Read in, or not (an error, evicted again): either way the window
     * goes by sendfile now, which reports a file error itself. */
    c->out->warm_end = window_end(c->out);
    return send_file(u, c);
}

static void cancel(struct uring_loop *u, uint64_t tag)
{
    struct io_uring_sqe *sqe = uring_sqe(&u->ring);
    io_uring_prep_cancel64(sqe, tag, 0);
    io_uring_sqe_set_data64(sqe, uring_tag(UK_NONE, 0, 0));
}

void uout_abandon(struct uring_loop *u, struct uconn *c)
{
    struct uout *o = c->out;
    c->out = NULL;
    if (c->polling)
        cancel(u, uring_tag(UK_POLLOUT, c->gen, (uint32_t)o->fd));
    c->polling = 0;
    if (!c->sending && !c->warming) {
        uout_free(u, o);
        return;
    }
    /* Kept, with its file, until the operation's completion: till the
     * read is submitted, a file closed by its release could give its fd
     * number to a new socket, whose input the read would take. */
    cancel(u, uring_tag(c->sending ? UK_SEND : UK_WARM, c->gen, (uint32_t)o->fd));
    c->sending = 0;
    c->warming = 0;
    o->next = u->orphans;
    u->orphans = o;
}

/* Writing a response plan (http/response.h) to a socket, once for every
 * driver: the head and any in-memory body in one sendmsg, then a file
 * range with sendfile. The event loop batches plans and keeps what a full
 * socket did not take (models/pending.c); the coro and iterative drivers
 * wait for room instead, each in its own way. */
#ifndef HERD_MODELS_PLAN_WRITE_H
#define HERD_MODELS_PLAN_WRITE_H

#include <stdint.h>
#include <sys/types.h>

#include "http/response.h"
#include "net/tls.h"

/* sendfile from file_fd[*off, end) until done or the socket is full.
 * Returns 0 when all went, -EAGAIN when the socket is full, -EIO when the
 * file shrank under us (Content-Length was a promise), else -errno. *off
 * advances past what went; *sent adds it. */
int plan_sendfile(int fd, int file_fd, off_t *off, off_t end, uint64_t *sent);

struct fc_entry;

/* f[*off, end) by plan_sendfile, or through ssl when there is one, as
 * plan_sendfile returns; a file that shrank (-EIO) is said in the error
 * log with its name, and f is looked at again by the open-file cache on
 * its next request. Call it in the loop that owns f's cache. */
int plan_send_file(int fd, SSL *ssl, struct fc_entry *f, off_t *off, off_t end,
                   uint64_t *sent);

/* Every driver copies a body this small behind its head (but not into
 * TLS, which copies into records anyway): an answer, or a batch of small
 * answers, is then one buffer, which goes by send (IORING_OP_SEND) where
 * two buffers take a sendmsg, and the kernel skips the msghdr and iovec
 * copy and checks (bench/RESULTS.md section 30). A copy of 1 KiB costs
 * less than those. */
#define PLAN_INLINE_MAX 1024

/* Moves plan's body (static bytes or a cached file's) behind its head in
 * out when the head is the last thing there, the body is at most
 * PLAN_INLINE_MAX bytes and it fits; the head then covers it, and the
 * plan keeps no body and no file (its reference released). 1 if moved. */
int plan_inline_body(struct http_out *out, struct http_plan *plan);

/* How a driver waits, for plan_write's callers that wait in place (coro,
 * iterative); the event loop keeps what must wait instead
 * (models/pending.c). */
struct plan_waits {
    /* Room in fd's send buffer: 0 when it may write again, -1 to give up
     * (send timeout, stop). */
    int (*room)(void *arg, int fd);
    /* Lets the driver's other connections go first after a file window
     * (turns: models/evloop_internal.h); NULL: it has none, and the file
     * goes in one sendfile. */
    void (*turn)(void *arg);
    /* Has f[off, stop) read into the page cache before its sendfile if it
     * is not there (models/file_window.h): 0 once it is, or when it may
     * go as it is; -1 to give up. NULL: windows go as they are. Called
     * only with turn. */
    int (*warm)(void *arg, struct fc_entry *f, off_t off, off_t stop, unsigned char *cold);
    void *arg;
};

/* MSG_MORE before a close: the last answer of a connection is sent with
 * MSG_MORE, so its last segment waits in the socket until the
 * shutdown(SHUT_WR) that follows at once tacks the FIN onto it
 * (tcp_send_fin). The peer's stack then takes one segment and sends one
 * ACK where it took two and sent two: with Connection: close that is
 * 10-25% of the server's CPU per connection over loopback
 * (bench/RESULTS.md section 20). It must be shutdown, not close: a close
 * that finds unread input resets the connection and drops what is still
 * corked. Every driver shuts down right after the last byte went (here
 * for plan_write's callers), so nothing stays corked.
 *
 * Writes all of plan, waiting through w when the socket is full, a file
 * window is not in the page cache, and after each window; through ssl
 * (net/tls.h) when it is not NULL. Returns 0, or -1 when the peer is gone,
 * a wait gave up or the file shrank. *sent adds the bytes written. */
int plan_write(int fd, SSL *ssl, const struct http_out *out, const struct http_plan *plan,
               const struct plan_waits *w, uint64_t *sent);

#endif

/* Private to the uring model (uring.c, uring_conn.c, uring_send.c): the
 * worker's state and the per-connection state, in an array indexed by fd. */
#ifndef HERD_MODELS_URING_INTERNAL_H
#define HERD_MODELS_URING_INTERNAL_H

#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "core/bufpool.h"
#include "core/timerq.h"
#include "http/handler.h"
#include "models/file_window.h"
#include "models/step.h"
#include "models/uring_ring.h"
#include "proc/accesslog.h"
#include "proc/scoreboard.h"

enum uq { UQ_NONE, UQ_HEADER, UQ_KEEPALIVE, UQ_SEND, UQ_LINGER, UQ_BODY };

#define UOUT_IOV 64
/* Receive buffers a busy connection may hold where the kernel cannot
 * bound a receive (uring_prep_recv_bounded): a multishot receive goes on
 * delivering for a while after its cancel (up to what the socket holds,
 * some 32 buffers a wakeup), and a client that sends without reading is
 * cut beyond this. Bounded, input never outgrows the connection's own
 * buffer and nothing is held. */
#define URING_HELD_MAX 64
#define URING_RECV_BOUND_REFUSED 2

/* The receive buffers a connection holds, oldest first (a FIFO). */
struct uheld {
    uint16_t bid[URING_HELD_MAX], len[URING_HELD_MAX];
    uint8_t head;
};

/* A connection's output while a send is in flight: the heads of its batch
 * (step_next writes them straight into data[]), the iovecs of one sendmsg,
 * the file-cache entries they point into, and a file range to sendfile
 * after them. Taken from a pool per answer round, so an idle connection
 * holds none; the kernel reads it until the send completes. */
struct uout {
    struct uout *next;          /* orphans: the connection closed mid-send */
    int fd;
    uint32_t gen;
    struct msghdr msg;
    struct iovec iov[UOUT_IOV];
    int niov;
    size_t bytes;               /* in iov, still to send */
    struct fc_entry *refs[UOUT_IOV];
    int nrefs;
    struct fc_entry *file;      /* sendfile file[off, end) after iov */
    off_t off, end;
    off_t warm_end;             /* file[off, warm_end) is in the page cache, or was
                                 * read in for this answer: sendfile will not block */
    unsigned char cold;         /* a window of this answer was not cached */
    unsigned char peer_shut;    /* the peer half-closed: room is waited for by a
                                 * pause, not a poll (uring_send.c) */
    char data[];                /* http_out.buf */
};

struct uconn {
    struct tq_node timer;
    char *in;                   /* own input, only while bytes are left over */
    struct uout *out;           /* only while an answer is on its way */
    struct step_conn st;
    uint32_t in_len;
    uint32_t gen;
    struct uheld *held;         /* from a pool, only while holding */
    uint16_t held_off;          /* bytes of the oldest held buffer taken */
    uint8_t nheld;
    uint8_t open, tcp, queue;
    uint8_t recv_on;            /* a multishot receive is armed */
    uint8_t recv_bounded;       /* ... with a bound (arm_recv) */
    uint8_t sending;            /* a sendmsg is in flight (c->out) */
    uint8_t polling;            /* waiting for room to sendfile */
    uint8_t warming;            /* waiting for a file's next bytes to be read in */
    uint8_t eof;                /* the peer sent FIN */
    uint8_t lingering;          /* write side shut, draining until EOF */
    uint8_t waited;             /* the answer just ended took a wait (a short send, a
                                 * file's body, an exchange): look for input at a close */
    uint8_t cancelling;         /* the receive's cancel is on its way */
    uint8_t handing;            /* idle on a reload: goes to the new generation once
                                 * its receive has ended (uring_handover.c) */
    uint8_t drain;              /* a reload could not move it: it stays till its next
                                 * request (answered with close) or its timeout */
    uint8_t kick;               /* an exchange just started: move it once input is stored */
    uint8_t resuming;           /* its exchange ended this round: the ring takes the socket
                                 * back after it (uproxy_after_round); what lands till then
                                 * is stored, as in an exchange, not served */
    struct xfer *xfer;          /* proxying: the exchange owns the socket (upstream_uring.c) */
};

struct uring_loop {
    const struct serve_config *cfg;
    struct io_uring ring;
    struct uring_bufs bufs;
    struct uconn *conns;        /* indexed by fd */
    int max_fds;
    uint32_t nconns, max_conns;
    struct timerq q_header, q_keepalive, q_send, q_linger, q_body;
    struct bufpool inbufs;      /* in_cap bytes each */
    struct bufpool outbufs;     /* sizeof(struct uout) + out_cap each */
    struct bufpool heldbufs;    /* struct uheld each */
    size_t in_cap, out_cap;
    struct uout *orphans;
    uint32_t held, held_max;    /* receive buffers held by busy connections */
    char *warm_sink;            /* FILE_WINDOW bytes the reads that fill the page
                                 * cache land in, all at once: never read */
    struct http_ctx http;
    struct http_out out;        /* points into the current connection's uout */
    struct http_request req;
    struct step_ctx step;
    struct sb_slot *slot;
    struct alog *alog;
    struct uring_proxy *proxy;  /* NULL: no proxy routes */
    /* upstream_uring.c's entry points, set by uring.c: that file calls
     * this one, so these calls go through pointers (test_layers: no call
     * circles between files) */
    struct {
        long (*start)(struct uring_loop *u, struct uconn *c, int route,
                      const struct http_request *req, const char *head, size_t head_len,
                      const char *body, size_t body_len);
        void (*kick)(struct uring_loop *u, struct uconn *c);
        void (*abort)(struct uring_loop *u, struct uconn *c);
        void (*client_ready)(struct uring_loop *u, struct uconn *c);
        int (*reads_body)(struct uring_loop *u, struct uconn *c);
    } px;
    /* uring_handover.c's, likewise: an idle connection to move on a
     * reload, and one whose receive has ended while it was being moved */
    struct {
        void (*idle)(struct uring_loop *u, struct uconn *c);
        void (*recv_ended)(struct uring_loop *u, struct uconn *c);
    } ho;
    int ho_fd;                  /* the handover channel (proc/handover.h), or -1 */
    uint8_t recv_bounded;       /* the kernel bounds receives (recent kernels); cleared on EINVAL,
                                 * URING_RECV_BOUND_REFUSED: a test makes it say EINVAL */
    uint8_t handing_over;       /* stopping for a reload: idle connections move on */
    uint8_t stopping;
};

/* A stopping worker answers c with close, unless it is reloading and c
 * can move on to the new generation once idle: the rule for static and
 * proxied answers alike. */
static inline int uconn_answers_close(const struct uring_loop *u, const struct uconn *c)
{
    return u->stopping && (!u->handing_over || c->drain);
}

/* uring_conn.c */
void uconn_open(struct uring_loop *u, int fd, int tcp, int pp,
                const struct sockaddr_storage *peer);
void uconn_close(struct uring_loop *u, struct uconn *c);
void uconn_on_recv(struct uring_loop *u, struct uconn *c, int res, uint32_t flags);
void uconn_timeout(struct uring_loop *u, struct uconn *c);
/* At --max-connections: the keep-alive connection idle the longest with
 * no request waiting in its socket (a peek each, a few at most) and idle
 * for IDLE_VICTIM_MIN_MS (models/linger.h), or NULL; then *from says when
 * the oldest will have been idle that long (0: none to wait for). */
struct uconn *uconn_idle_victim(struct uring_loop *u, int64_t *from);
/* Up to n bytes of c's buffered input (c->in, then held receive buffers),
 * taken off the front; 0 when there is none. */
size_t uconn_take_input(struct uring_loop *u, struct uconn *c, char *buf, size_t n);
/* The exchange that owned c ended: serve what waits, receive again. */
void uconn_resume(struct uring_loop *u, struct uconn *c);
/* Stops c's receive (the end comes as a completion). */
void uconn_stop_recv(struct uring_loop *u, struct uconn *c);
/* A connection from the handover channel, with its step state and
 * unparsed bytes: served from here on as if accepted. */
void uconn_adopt(struct uring_loop *u, int fd, int tcp, const void *state, const char *in,
                 size_t in_len, int drain, uint32_t waited_ms);
/* c could not move: it stays, receiving, until its next request. */
void uconn_keep(struct uring_loop *u, struct uconn *c);
/* What the connection does after a step of its output. The send side
 * says it and the connection side (uconn_after_output) does it, so calls
 * go one way only: uring_conn -> uring_send. */
enum uout_next {
    UOUT_NONE,      /* a send of a connection closed meanwhile: nothing */
    UOUT_WAIT,      /* on its way: (re)arm the send timeout */
    UOUT_DONE,      /* all out: close, or serve what waits */
    UOUT_CLOSE,     /* the peer is gone */
};

/* Does what the send side said (enum uout_next). */
void uconn_after_output(struct uring_loop *u, struct uconn *c, enum uout_next next);
void uconn_arm(struct uring_loop *u, struct uconn *c, enum uq q);
void uconn_disarm(struct uring_loop *u, struct uconn *c);
/* How long c has waited in its header or keep-alive timeout (0 in any
 * other): a connection handed over at a reload keeps its deadline, or
 * reloads more often than the timeout would keep it open for good. */
uint32_t uconn_waited_ms(struct uring_loop *u, const struct uconn *c);

/* uring_handover.c (calls into uring_conn.c only) */
void uring_handover_setup(struct uring_loop *u, int ho_fd);
/* A reload: hands the idle connections over, and those that turn idle
 * from here on. */
void uring_handover_begin(struct uring_loop *u);
/* The channel is readable (a UK_HANDOVER completion). */
void uring_handover_on_poll(struct uring_loop *u, uint32_t cqe_flags);
/* Everything sent was placed or bounced back: the worker may leave. */
int uring_handover_settled(void);

/* uring_send.c */
struct uout *uout_get(struct uring_loop *u, struct uconn *c);
/* Adds an answer to the batch. 1 when the batch must go out now (a file
 * to sendfile follows it, or it is full). */
int uout_add(struct uring_loop *u, struct uout *o, struct http_plan *plan);
/* Whether o has room for one more answer. */
int uout_room(const struct uring_loop *u, const struct uout *o);
/* Sends c->out (queues a sendmsg, or sendfiles a file that follows). */
enum uout_next uout_start(struct uring_loop *u, struct uconn *c);
/* A sendmsg completed; *cp is set to its connection unless UOUT_NONE. */
enum uout_next uout_on_send(struct uring_loop *u, uint64_t tag, int res, struct uconn **cp);
enum uout_next uout_on_pollout(struct uring_loop *u, struct uconn *c, int res);
/* The read that brought a connection's next file bytes into the page
 * cache ended; *cp is set to its connection unless UOUT_NONE. */
enum uout_next uout_on_warm(struct uring_loop *u, uint64_t tag, int res, struct uconn **cp);
/* Gives back o's references and buffer. */
void uout_free(struct uring_loop *u, struct uout *o);
/* c closes: its output is dropped (kept as an orphan while the kernel
 * still reads it). */
void uout_abandon(struct uring_loop *u, struct uconn *c);

static inline int uconn_fd(const struct uring_loop *u, const struct uconn *c)
{
    return (int)(c - u->conns);
}

#endif

/* Private to models/evloop.c and models/conn.c: the loop's state and the
 * per-connection state, kept in an array indexed by fd. */
#ifndef HERD_MODELS_EVLOOP_INTERNAL_H
#define HERD_MODELS_EVLOOP_INTERNAL_H

#include <stdint.h>
#include <sys/uio.h>

#include "core/bufpool.h"
#include "core/loop.h"
#include "core/timerq.h"
#include "http/body.h"
#include "http/handler.h"
#include "models/body_clock.h"
#include "models/evloop.h"
#include "models/step.h"
#include "models/file_window.h"
#include "models/pending.h"
#include "models/warm_ring.h"
#include "net/accept.h"
#include "net/tls.h"
#include "proc/accesslog.h"
#include "proc/scoreboard.h"

/* Q_BODY: a request body is being read (models/body_clock.h). */
enum conn_queue { Q_NONE, Q_HEADER, Q_KEEPALIVE, Q_SEND, Q_LINGER, Q_BODY };

struct xfer;
struct proxy;

struct ev_resume {           /* a client whose proxy exchange ended */
    int fd;
    uint32_t gen;
};

/* One per fd. Small on purpose: an idle keep-alive connection owns nothing
 * else (no buffer), which is what keeps 10,000 idle connections cheap. */
struct conn {
    struct tq_node timer;
    char *in;                /* own input buffer, only while input is left over */
    struct pending *out;     /* only while a write is blocked */
    struct step_conn st;     /* the request step's state: body, peer, counts */
    struct xfer *xfer;       /* the proxy exchange this client is in, or NULL */
    SSL *ssl;                /* TLS listener: the transport, else NULL (plain syscalls) */
    uint32_t in_len;
    uint32_t gen;            /* tells events for an earlier user of this fd */
    uint8_t open;
    uint8_t queue;           /* enum conn_queue */
    uint8_t want_read;       /* readable while output was blocked */
    uint8_t lingering;       /* write side shut, draining input until EOF */
    uint8_t tcp;
    uint8_t drain;           /* a reload could not hand it over: DRAIN_* */
    uint8_t handshaking;     /* TLS: no request bytes before the handshake ends */
    uint8_t warming;         /* out's next file window is being read in (conn_warm.c) */
    uint8_t yielding;        /* its turn ended with file left to send (conn_turn.c) */
    uint8_t resuming;        /* its proxy exchange ended; input waits for the resume */
};

enum { DRAIN_NO, DRAIN_RETRY /* the channel was full */, DRAIN_KEEP /* bounced */ };

#define BATCH_IOV 256

/* An epoll tag: fd in the low 32 bits, the fd's generation above it (its
 * own bits, below the tag kinds), so an event for an fd closed earlier in
 * the batch is told from its reuse. */
#define GEN_MASK 0x0fffffffu /* = UP_GEN_MASK (models/upstream.h) */
#define TAG_LISTEN (1ULL << 63)
#define TAG_SIGNAL (1ULL << 62)
#define TAG_CHANNEL (1ULL << 61)
#define TAG_UPSTREAM (1ULL << 60) /* an upstream connection (models/upstream_pool.c) */
/* the gen bits of conn tags leave no bit free for these */
#define TAG_HANDOVER (TAG_CHANNEL | 1)
#define TAG_WARM (TAG_CHANNEL | 2) /* the page-cache reads' eventfd (conn_warm.c) */
static inline uint64_t fd_tag(int fd, uint32_t gen)
{
    return (uint64_t)(uint32_t)fd | (uint64_t)(gen & GEN_MASK) << 32;
}
static inline uint32_t tag_gen(uint64_t tag) { return (uint32_t)(tag >> 32) & GEN_MASK; }

struct evloop;

/* What a connection asks of the pieces above it. evloop.c fills these at
 * start, so conn.c calls neither the loop nor the proxy by name and the
 * dependencies stay one-way: evloop -> conn, evloop -> proxy -> conn. */
struct conn_hooks {
    void (*slot_freed)(struct evloop *ev); /* a connection closed: accept again */
    /* hand req (head at head[0..head_len), then body bytes) to the proxy;
     * returns the body bytes taken, or -1 (close the client) */
    long (*proxy_start)(struct evloop *ev, struct conn *c, int route,
                        const struct http_request *req, const char *head, size_t head_len,
                        const char *body, size_t body_len);
    void (*proxy_kick)(struct evloop *ev, struct conn *c);
    void (*proxy_client_event)(struct evloop *ev, struct conn *c, uint32_t events);
    void (*proxy_abort)(struct evloop *ev, struct conn *c);
    /* a reload: pass an idle connection to the next generation
     * (conn_hand_over in conn_handover.c, which calls back into conn.c) */
    int (*hand_over)(struct evloop *ev, struct conn *c);
};

struct evloop {
    const struct serve_config *cfg;
    struct conn_hooks hooks;
    struct loop loop;
    struct http_ctx http;
    struct conn *conns;      /* indexed by fd */
    int max_fds;
    int loops, loop_index;       /* this loop among the process's (threads model) */
    uint32_t nconns, max_conns;
    struct timerq q_header, q_keepalive, q_send, q_linger, q_body;
    struct bufpool inbufs;   /* input buffers, each in_cap bytes */
    size_t in_cap;
    char *rbuf;              /* shared read buffer of in_cap bytes */
    struct http_out out;     /* response heads of the current batch */
    struct iovec iov[BATCH_IOV];
    int niov;
    struct fc_entry *refs[BATCH_IOV]; /* cache entries the batch points into */
    int nrefs;
    struct http_request req;
    struct step_ctx step;    /* the request step's view of this loop */
    struct sb_slot *slot;    /* counters, in shared memory */
    struct alog *alog;
    struct proxy *proxy;     /* NULL without proxy routes */
    void *tls_ctx;           /* SSL_CTX * of TLS listeners, or NULL */
    struct ev_resume *resumes; /* clients to hand back after this batch */
    int nresumes, cap_resumes;
    size_t batch_bytes;      /* bytes in iov */
    uint8_t stopping;
    uint8_t accept_paused;
    uint8_t accept_resume;   /* a slot freed while paused: accept after this batch */
    int64_t victim_at;       /* paused: an idle connection may give its place then */
    uint8_t handing_over;    /* stopping for a reload: idle connections move on */
    uint8_t read_skip;       /* new connections to open unread (evloop.c accept_from) */
    int ho_fd;               /* handover channel (proc/handover.h), or -1 */
    struct warm_ring warm;   /* reads cold file windows in (conn_warm.c) */
    struct ev_resume *yields; /* connections whose turn ended: go on next round */
    int nyields, cap_yields;
    off_t turn_bytes;        /* bytes the connection now served sent this turn */
};

/* A stopping worker answers c with close, unless it is reloading and c
 * can move on to the new generation once idle: the rule for static and
 * proxied answers alike. */
static inline int conn_answers_close(const struct evloop *ev, const struct conn *c)
{
    return ev->stopping && (!ev->handing_over || c->drain);
}

/* proxy: the connection must start with a PROXY protocol header; tls: it
 * speaks TLS (through ev->tls_ctx). Returns 0, or -1 when fd was closed
 * (beyond the table, or no epoll). */
int conn_open(struct evloop *ev, int fd, int tcp, int proxy, int tls,
              const struct sockaddr_storage *peer);
/* A plain (not TLS) connection just accepted: reads at once, and runs the
 * request step on what came; the connection joins epoll only if that read
 * would block or the connection lives on after its answer. A Connection:
 * close request answered in full costs no epoll_ctl. The fd is closed on
 * failure. Returns 0 when the read found nothing (the request was not
 * there yet), else 1. */
int conn_open_read(struct evloop *ev, int fd, int tcp, int proxy,
                    const struct sockaddr_storage *peer);
void conn_close(struct evloop *ev, struct conn *c);
/* Handles an epoll event for c. */
void conn_event(struct evloop *ev, struct conn *c, uint32_t events);
/* At --max-connections, the connection a new client may replace: the one
 * idle the longest between requests that has no request waiting in its
 * socket (nginx likewise reuses idle keep-alive connections when
 * worker_connections run out, rather than leave new clients in the
 * backlog until a keep-alive timeout) and idle for IDLE_VICTIM_MIN_MS
 * (models/linger.h), or NULL; then ev->victim_at says when the oldest
 * will have been idle that long (0: none to wait for). */
struct conn *conn_idle_victim(struct evloop *ev);
/* A timer of c's queue expired. */
void conn_timeout(struct evloop *ev, struct conn *c);

/* Arms c's timer on queue q (Q_NONE: disarms), keeping the idle count.
 * Q_BODY starts the body clock; count the body's bytes in c->body. */
void conn_set_timer(struct evloop *ev, struct conn *c, enum conn_queue q);
/* How long c has waited in its header or keep-alive timeout (0 in any
 * other), and arming one as if c had waited that long already: a
 * connection handed over at a reload keeps its deadline, or reloads more
 * often than the timeout would keep it open for good. */
uint32_t conn_waited_ms(struct evloop *ev, const struct conn *c);
void conn_set_timer_waited(struct evloop *ev, struct conn *c, enum conn_queue q,
                           uint32_t waited_ms);
/* One access-log record for a request of c (req NULL when unparsed). */
void conn_log(struct evloop *ev, const struct conn *c, const struct http_request *req,
              unsigned status, uint64_t bytes);
/* A proxy exchange of c ended: serve its next requests (or close it). */
void conn_proxy_resume(struct evloop *ev, struct conn *c);
/* c may write what it owes again (the socket has room, or its next file
 * window is in the page cache now); then it goes on as conn_proxy_resume. */
void conn_writable(struct evloop *ev, struct conn *c);

/* conn_warm.c: cold file windows (models/file_window.h), read in through
 * ev->warm. Made with the loop, not on first need: what a worker holds
 * for its life it holds from its start, so its fd count is steady (a
 * test that counts fds before and after abuse is not fooled by a ring
 * that a cold file made meanwhile), and a refused io_uring is said at
 * start. */
void conn_warm_setup(struct evloop *ev);
/* Starts the read of c->out's next window; 0, or -1 when it cannot be
 * read in (send it as before). */
int conn_warm_read(struct evloop *ev, struct conn *c);
/* A read of ev->warm completed (tag: the connection's fd_tag): the
 * connection to write again (conn_writable), its window now counted as
 * cached whether the read worked or not (a sendfile reports a file error
 * itself), or NULL when it closed meanwhile: it let go of its file at
 * once, since the kernel held its own reference from the submission on. */
struct conn *conn_warm_done(struct evloop *ev, uint64_t tag);

/* conn_turn.c: a connection sends about TURN_BYTES a turn (a file window,
 * or pipelined answers), then the loop's other connections go first:
 * nginx's sendfile_max_chunk. Without it a client that reads as fast as
 * the loop sends (over loopback, or a fast LAN) holds the loop for its
 * whole file: a cached 1 GiB download kept small files waiting 50-250 ms
 * (bench/RESULTS.md section 26). */
#define TURN_BYTES FILE_WINDOW
/* A connection's turn starts: it has TURN_BYTES to send. */
static inline void conn_turn_start(struct evloop *ev) { ev->turn_bytes = 0; }
/* Whether the turn's file bytes are spent. */
static inline int conn_turn_spent(const struct evloop *ev) { return ev->turn_bytes >= TURN_BYTES; }
/* c's turn ended with output or requests left: it goes on after the next
 * round of events (a wait that does not sleep). 0, or -1 when it cannot
 * be queued (out of memory). */
int conn_yield(struct evloop *ev, struct conn *c);
/* The connection at ev->yields[i] with a new turn, to write again
 * (conn_writable), or NULL when it closed meanwhile. */
struct conn *conn_yield_take(struct evloop *ev, int i);
/* Drops the first n of ev->yields (those run this round). */
void conn_yields_drop(struct evloop *ev, int n);
void conn_yields_free(struct evloop *ev);


/* conn_handover.c (issue 13). Passes an idle connection to the master
 * for the new generation: 0 (c is closed here, the socket lives on), or -1
 * when it cannot move now (busy, or the channel is full). */
int conn_hand_over(struct evloop *ev, struct conn *c);
/* Every connection handed over is placed (or came back): the process may
 * leave. Counts the process's threads together. */
int conn_handover_settled(void);
/* Takes the connections (and acknowledgements) queued on ev->ho_fd. */
void conn_handover_receive(struct evloop *ev);
/* While handing over: retries the idle connections the full channel
 * refused; returns the ms until the next retry, or -1. */
int conn_handover_retry(struct evloop *ev);

static inline int conn_fd(const struct evloop *ev, const struct conn *c)
{
    return (int)(c - ev->conns);
}

#endif

/* Private to the reverse proxy's driver (models/upstream_pool.c and
 * models/upstream_pump.c): the pool's and the exchange's state. */
#ifndef HERD_MODELS_UPSTREAM_INTERNAL_H
#define HERD_MODELS_UPSTREAM_INTERNAL_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "core/timerq.h"
#include "http/body.h"
#include "http/fcgi_route.h"
#include "http/reframe.h"
#include "http/upstream_codec.h"
#include "models/upstream.h"
#include "net/tls.h"
#include "proc/config.h"
#include "proc/scoreboard.h"

#define DBUF_SIZE 65536          /* upstream -> client */
#define UBUF_EXTRA 65536         /* client -> upstream, beyond head and one read */
#define UP_HEAD_MAX 16384        /* an upstream response head */
#define HBUF_SIZE (UP_HEAD_MAX + 512)
#define XFER_CACHE 64            /* finished exchanges kept for reuse (~180 KiB each):
                                  * freeing them made glibc trim with brk per request */

/* up_conn->queue: which timer runs. */
enum { QU_NONE, QU_CONNECT, QU_READ, QU_SEND };

/* One per upstream fd, in an array indexed by fd (the clients' struct conn
 * is another array): its events come tagged TAG_UPSTREAM. While it is
 * pooled it belongs to no exchange, and its events mean the server closed
 * it. 64 bytes. */
struct up_conn {
    struct tq_node timer;        /* on the proxy's connect, read or send queue */
    struct tq_node stall;        /* on q_stall while a sent request waits for a byte */
    struct xfer *xfer;           /* the exchange using it; NULL while pooled */
    uint32_t gen;                /* tells events for an earlier user of this fd */
    uint16_t up_id;              /* group * MAX_SERVERS + server */
    uint8_t open;
    uint8_t queue;               /* QU_* */
};

struct up_server {
    int64_t down_until;          /* skipped until then (after a failure) */
    uint32_t active;             /* exchanges using it now */
    uint32_t nidle;
    int *idle;                   /* pooled connections, most recent last */
    /* What upstream_stall.c learned: a server that answers one connection
     * at a time gets no pool (idle_cap 0) until relearn_at. */
    uint32_t idle_cap;
    int64_t relearn_at;
    struct sb_answer_run answers; /* where the scoreboard has no room for it */
    uint32_t index;              /* in the scoreboard's upstream table */
};

struct up_group {
    const struct upstream_group *cfg;
    const struct upstream_codec *codec; /* how its servers are spoken to */
    struct up_server *servers;
    uint32_t next;               /* round-robin position */
};

struct proxy {
    struct up_group groups[CONFIG_MAX_UPSTREAMS];
    int ngroups;
    uint32_t keepalive;
    uint8_t least;
    struct timerq q_connect, q_read, q_send;
    struct timerq q_stall;       /* --upstream-stall: requests sent, no byte back yet */
    int64_t stall_ms;            /* 0: off */
    struct scoreboard *sb;       /* shared stall state, or NULL */
    struct up_conn *ups;         /* indexed by fd */
    const struct serve_config *cfg;
    struct step_ctx *step;
    const uint8_t *stopping;
    char *rbuf;                  /* the driver's scratch buffer of in_cap bytes */
    size_t in_cap;
    int max_fds;
    const struct up_driver *drv;
    void *drv_arg;
    struct xfer *cache[XFER_CACHE];
    int ncache;
    size_t ucap;
    char *path;                  /* scratch for the normalised request path */
    size_t path_cap;
    size_t uslack;               /* room past ucap for framing the codecs add */
    /* FastCGI (models/upstream_fcgi.c) */
    int root_fd;                 /* the docroot (O_PATH), -1 without fastcgi routes */
    char *docroot;               /* its absolute path, for SCRIPT_FILENAME */
    struct fcgi_kinds *kinds;    /* what the scripts' paths are, this second */
    struct fcgi_target ft;       /* the last script resolved... */
    const char *ft_path;         /* ...for the request path at this address */
    size_t ft_path_len, ft_norm_len; /* (its length; px->path's, normalised) */
    char *spath;                 /* the path sent upstream when a route strips its prefix */
    size_t spath_cap;
};

struct xfer {
    void *client;                /* the driver's */
    struct step_conn *st;        /* the client's step state */
    int client_fd;
    SSL *client_ssl;         /* the client's TLS transport, or NULL */
    uint8_t client_timer;        /* UT_* */
    uint32_t loghead_len;        /* bytes of loghead in use; 0: no copy */
    int group, server, up_fd;
    int tries;                   /* fresh connections that failed */
    uint16_t status;
    uint8_t connecting, reused, counted;
    uint8_t client_minor, client_keepalive, head_request;
    uint8_t req_done;            /* the whole request body is in ubuf (or sent) */
    uint8_t udiscarded;          /* ubuf no longer holds the whole request: no retry */
    uint8_t got_bytes;           /* the upstream answered something */
    uint8_t head_done;           /* hbuf holds the client's head (or an error page) */
    uint8_t resp_done;           /* the whole response body is in dbuf (or sent) */
    uint8_t errored;             /* an error page replaced the response */
    uint8_t up_reusable;
    uint8_t up_progress, client_progress;
    uint8_t up_wdead;            /* the upstream stopped taking the request (it may answer) */
    uint8_t up_readable;         /* the upstream raised an input edge not yet read to EAGAIN */
    uint8_t up_unread;           /* an event said the upstream had a close, or bytes past the
                                  * answer, that the exchange does not read: look before pooling */
    uint8_t up_read_full;        /* the last read filled what it asked for: more may wait
                                  * in the socket, announced by an edge already used up */
    uint8_t may_retry;           /* idempotent: may go again on another connection */
    uint8_t dspill_len;
    uint8_t busy;                /* a server's listen queue was full (503) */
    uint8_t continue_left;       /* bytes of CONTINUE_LINE not yet taken by the client's socket */
    int64_t sent_ms;             /* when the whole request was sent (stall checks) */
    uint8_t stall_counted;       /* in the scoreboard's upstream_stalled */
    const struct upstream_codec *codec;
    struct upstream_framing req_body, resp_body; /* framed anew by the codec */
    uint64_t body_sent;          /* response body bytes the client took */
    char tag[128];               /* FastCGI: the script, for STDERR log lines */
    size_t ulen, uoff, dlen, doff, hlen, hoff;
    char *ubuf;                  /* ucap bytes, and REFRAME_SLACK for herd's chunk heads */
    /* A copy of the request head, for the access log. Like ubuf it stays
     * with the exchange when the cache keeps it, so a warm proxied request
     * allocates nothing; it grows to the largest head it held. */
    char *loghead;
    uint32_t loghead_cap;
    char dbuf[DBUF_SIZE];
    char hbuf[HBUF_SIZE];
    /* Chunk framing herd wrote beyond a full dbuf; it moves into dbuf once
     * the client took all of it. Reads then stop exactly when dbuf is full,
     * as for a Content-Length body. */
    char dspill[REFRAME_SLACK];
};

/* Frees an exchange and the buffers it keeps (the pump's cache and the
 * pool's teardown both do). */
static inline void xfer_free(struct xfer *x)
{
    free(x->loghead);
    free(x->ubuf);
    free(x);
}

/* ---- the pool and server choice (models/upstream_pool.c) ---- */

struct up_server *server_of(struct proxy *px, const struct xfer *x);
/* Marks x's server down for the fail timeout and logs why. */
void mark_down(struct proxy *px, struct xfer *x, const char *why);
/* Arms the upstream connection's timer on queue q (QU_*). */
void up_arm(struct proxy *px, struct up_conn *uc, int q);
/* Stops uc's timer. */
void up_disarm(struct up_conn *uc);
/* Gives the upstream connection back: to the pool when it can carry
 * another request, else closed. */
void up_release(struct proxy *px, struct xfer *x, int reuse);
/* Opens (or takes from the pool) a connection to a server of x's group.
 * Returns 0, or -1 when no server can be reached now. */
int up_connect(struct proxy *px, struct xfer *x);
/* A pooled connection closed or timed out: out of the pool, closed. */
void up_idle_closed(struct proxy *px, struct up_conn *uc);
/* Closes every pooled connection to srv. */
void up_close_idle(struct proxy *px, struct up_server *srv);
/* Runs the stall checks that are due (upstream_stall.c judges). */
void up_stall_expire(struct proxy *px);
/* The scoreboard's pool counters of srv, after a change. */
void up_publish(struct proxy *px, struct up_server *srv);

/* ---- servers that answer one connection at a time (upstream_stall.c) ---- */

/* The whole request of x went up: start waiting for its first byte. */
void stall_arm(struct proxy *px, struct xfer *x);
/* x got the first byte of its response. */
void stall_answered(struct proxy *px, struct xfer *x);
/* uc's stall timer stops (the exchange ended or answered). */
void stall_disarm(struct up_conn *uc);
/* x leaves its connection (x->up_fd is still set): it stalls no more. */
void stall_forget(struct proxy *px, struct xfer *x);
/* uc was pooled: it is checked every stall time for a server that another
 * worker waits on. */
void stall_watch_idle(struct proxy *px, struct up_conn *uc);
/* x's request got no byte within the stall time: is the pool to blame?
 * 1 when its server serves one connection at a time (the caller closes
 * its idle connections), else 0. */
int stall_judge(struct proxy *px, struct xfer *x);
/* A pooled connection's check came: 1 when it is to close (a request to
 * its server is stalled in some worker, or the server has no pool now: it
 * may be waiting on this one), else 0 (watch it again). */
int stall_idle_suspect(struct proxy *px, struct up_conn *uc);
/* How many idle connections srv may keep now. */
uint32_t stall_idle_cap(struct proxy *px, struct up_server *srv);

/* ---- FastCGI routes and parameters (models/upstream_fcgi.c) ---- */

/* Opens the docroot when the config has fastcgi routes (start-up). */
void upstream_fcgi_init(struct proxy *px);
void upstream_fcgi_destroy(struct proxy *px);
/* The fastcgi route of req, whose path px->path[0..len) holds normalised
 * (the script in px->ft), or -1. */
int upstream_fcgi_route(struct proxy *px, const struct http_request *req, size_t len);
/* The request head (BEGIN_REQUEST, PARAMS) for x into buf[0..cap): its
 * length, -1 when it does not fit, -2 when the script is gone (404), -3
 * for a chunked body (411: PHP reads a body only by its CONTENT_LENGTH,
 * and herd streams bodies rather than buffer them to count). */
long upstream_fcgi_head(struct proxy *px, struct xfer *x, const struct http_request *req,
                        char *buf, size_t cap);

/* Whether an upstream connection's socket is silent now: no bytes and no
 * close waiting (a peek). */
static inline int up_fd_silent(int fd)
{
    char c;
    return recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) < 0 && errno == EAGAIN;
}

#endif

/* Private to load_run.c and load_conn.c: one load thread and its
 * connections. A thread owns everything here; nothing is shared between
 * threads but the stop flag and the progress counters. */
#ifndef HERD_BENCH_LOAD_INTERNAL_H
#define HERD_BENCH_LOAD_INTERNAL_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "bench/load_reqs.h"
#include "bench/load_tls.h"
#include "bench/load_run.h"
#include "bench/load_timeline.h"
#include "bench/rate.h"
#include "bench/load_resp.h"
#include "core/bufpool.h"
#include "core/loop.h"

enum lconn_state {
    LC_IDLE,        /* no socket: waiting to connect (retry_ns, or the rate schedule) */
    LC_CONNECTING,
    LC_HANDSHAKE,   /* https: connected, the TLS handshake under way */
    LC_OPEN,
    LC_CLOSING,     /* the last response said close: waiting for the server's FIN */
};

struct lconn {
    int fd;
    uint32_t gen;           /* bumped on close, so stale events are dropped */
    uint32_t index;         /* in its thread */
    uint8_t state;
    uint16_t outstanding;   /* requests sent (or being sent) without a response */
    uint8_t reused;         /* a response came on this connection already */
    uint16_t ring_head;     /* oldest entry of starts[] */
    uint32_t wr_off, wr_len;/* the request bytes being written */
    int64_t *starts;        /* per outstanding request: when its latency starts */
    int64_t deadline_ns;    /* connect or response timeout, or the FIN wait; 0 = none */
    int64_t retry_ns;       /* LC_IDLE: reconnect at; 0 = not waiting to retry */
    int64_t connect_ns;     /* when the current connect began */
    struct load_resp rp;
    char *stash;            /* an incomplete response head, when one is left over */
    uint32_t stash_len;
    uint32_t lowat;         /* SO_RCVLOWAT set while skipping a large body; 0 = default */
    int32_t heap_pos;       /* in the thread's rate heap, or -1 */
    int64_t heap_key;
    struct rate rate;
    SSL *ssl;               /* https only; NULL: plain send and recv */
    unsigned char tls_drained; /* https: the last read from the socket was short */
};

struct load_stats {
    uint64_t requests, bytes, connects, tls_resumed;
    uint64_t errors[LOAD_NERR];
    char why[LOAD_NERR][160];
    struct hdr *latency;
};

struct load_thread {
    const struct load_config *cfg;
    uint32_t id;
    pthread_t tid;
    struct loop loop;
    struct lconn *conns;
    uint32_t nconns;
    int preflight_fd;       /* an already connected socket for conns[0], or -1 */
    const struct load_reqs *reqs; /* what is sent, in turn (bench/load_reqs.h) */
    uint32_t next_req;      /* this thread's next request in reqs */
    int head_method;
    SSL_CTX *tls_ctx;       /* https: shared by all threads; NULL for http */
    SSL_SESSION *tls_session; /* offered on connect: the last resumable one a connection had */
    int tcp;                /* MSG_TRUNC discards TCP data; unix sockets do not support it */
    char *rbuf;
    size_t rbuf_size;
    struct bufpool stash_pool;
    uint32_t *heap;         /* open loop: connections waiting for a due time */
    uint32_t heap_n;
    int64_t *starts;        /* nconns * pipeline slots, a run of them per connection */
    int64_t timeout_ns;
    int64_t start_ns;       /* when the run started: request 0 of the rate schedule */
    int64_t measure_ns;     /* when warm-up ends and counting starts */
    int64_t end_ns;         /* when no more requests are started */
    int64_t last_done_ns;   /* the last response counted */
    int64_t stop_ns;        /* when the thread stopped starting requests */
    int measuring, stopping;
    const int *stop_flag;   /* set by the main thread on a signal */
    int *threads_done;      /* incremented by each thread as it ends */
    uint64_t all_requests;  /* responses, warm-up included */
    struct load_stats st;
    struct load_timeline tl;   /* --timeline; tl.s NULL: none */
    uint64_t live_requests, live_errors; /* for the progress line; relaxed atomics */
    char fatal[160];        /* why the thread could not start, else empty */
    /* wrk's Req/Sec row: this thread's request rate, sampled every
     * LOAD_RPS_INTERVAL_NS while measuring (samples past the cap are
     * dropped: 10 minutes at 100 ms). */
    float rps[6000];
    uint32_t nrps;
    uint64_t rps_reqs;      /* st.requests at the last sample */
    int64_t rps_at;         /* when the last sample (or measuring) began */
};

#define LOAD_RPS_INTERVAL_NS 100000000

static inline int64_t load_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline uint64_t lconn_tag(const struct lconn *c)
{
    return (uint64_t)c->index | (uint64_t)c->gen << 32;
}

/* load_conn.c: the per-connection state machine. */
void lconn_init(struct load_thread *t, struct lconn *c, uint32_t index, uint32_t global_index);
/* Opens the connection (or adopts fd when >= 0) and, once open, sends. */
void lconn_start(struct load_thread *t, struct lconn *c, int64_t now, int adopt_fd);
void lconn_event(struct load_thread *t, struct lconn *c, uint32_t events);
/* Timeouts and retries; called every tick. */
void lconn_tick(struct load_thread *t, struct lconn *c, int64_t now);
/* Open loop: the connection's next request is due. */
void lconn_due(struct load_thread *t, struct lconn *c, int64_t now);
/* The run is over: close what is not in flight, let the rest drain. */
void lconn_stop(struct load_thread *t, struct lconn *c);
/* A request in flight, or a connection still being set up (TCP connect,
 * TLS handshake): the end of the run waits for it, up to --timeout. */
static inline int lconn_in_flight(const struct lconn *c)
{
    return (c->state == LC_OPEN && c->outstanding) || c->state == LC_CONNECTING ||
           c->state == LC_HANDSHAKE;
}
/* Counts a failure of kind on c (described by what, and errnum when not 0),
 * closes it and arranges the reconnect. */
void lconn_fail(struct load_thread *t, struct lconn *c, enum load_err kind, int errnum,
                const char *what);

/* load_run.c: the open-loop heap of connections keyed by due time. */
void load_heap_push(struct load_thread *t, struct lconn *c, int64_t key);
void load_heap_remove(struct load_thread *t, struct lconn *c);

#endif

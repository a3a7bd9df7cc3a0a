/* The worker's side of the access log. Records are formatted in the worker
 * (Combined Log Format or JSON), batched in a buffer, and sent once per loop
 * iteration, or as soon as the buffer is full, as one datagram of whole
 * lines to the logger process. The socket is non-blocking: when the logger
 * falls behind, records wait in the buffer up to its size, and past it they
 * are dropped and counted in the worker's scoreboard slot. A worker never
 * blocks on logging.
 *
 * A record is one line of at most ALOG_RECORD_MAX bytes, whatever the
 * request: the fields a client writes (method, target, Referer,
 * User-Agent) are escaped, and each is cut at its share of the record,
 * ending in "..." (BW_CUT_MARK). */
#ifndef HERD_PROC_ACCESSLOG_H
#define HERD_PROC_ACCESSLOG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

#include "http/parser.h"
#include "proc/config.h"
#include "proc/scoreboard.h"

#define ALOG_BUF 65536
#define ALOG_RECORD_MAX 8192

struct alog {
    int fd;                   /* datagram socket to the logger, -1: off */
    enum log_format fmt;
    struct sb_slot *slot;     /* log_dropped lives here */
    size_t len;
    time_t stamp_sec;
    char stamp[40];           /* "22/Nov/2026:01:58:48 +0000" or ISO 8601 */
    char buf[ALOG_BUF];
};

void alog_init(struct alog *a, int fd, enum log_format fmt, struct sb_slot *slot);

static inline int alog_on(const struct alog *a) { return a->fd >= 0; }

/* One record. peer may be NULL (unix socket clients log "-"); req may be
 * NULL for a request that failed to parse. */
void alog_record(struct alog *a, const struct sockaddr_storage *peer,
                 const struct http_request *req, unsigned status, uint64_t body_bytes);

/* Sends what is buffered; keeps it if the logger is not keeping up. */
void alog_flush(struct alog *a);

#endif

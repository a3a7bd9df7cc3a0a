/* The worker's side of the access log. A record is a compact binary copy
 * of what the line needs (alog_wire.h): the worker copies the raw fields,
 * cut to what the line can show, and does no escaping, no formatting and
 * no address or time text; the logger process does that (alog_text.h).
 * Records are batched in a buffer and sent as one datagram of whole
 * records to the logger when the batch is half full, when its oldest
 * record has waited ALOG_DELAY_MS, or as soon as the buffer is full: a
 * busy worker sends a few hundred records per datagram, so the send and the
 * logger's wakeup, not the record, were the cost (one datagram per loop
 * iteration was about 20 records under load). The socket is non-blocking: when the logger falls behind,
 * records wait in the buffer up to its size, and past it they are dropped
 * and counted in the worker's scoreboard slot, and said in the error log
 * (at once, then at most once ALOG_REPORT_MS). A worker never blocks on
 * logging. */
#ifndef HERD_PROC_ACCESSLOG_H
#define HERD_PROC_ACCESSLOG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "core/ratelimit.h"
#include "http/parser.h"
#include "proc/alog_text.h"
#include "proc/config.h"
#include "proc/scoreboard.h"

#define ALOG_BUF 65536
#define ALOG_SEND_AT (ALOG_BUF / 2)
#define ALOG_DELAY_MS 20
#define ALOG_REPORT_MS 60000
#define ALOG_CLOSE_WAIT_MS 100
_Static_assert(ALOG_WIRE_MAX <= ALOG_BUF && ALOG_WIRE_MAX <= UINT16_MAX,
               "a batch must hold a record, and its length fit the head");

struct alog {
    int fd;                   /* datagram socket to the logger, -1: off */
    enum log_format fmt;
    struct sb_slot *slot;     /* log_dropped lives here */
    size_t len;
    size_t records;           /* in buf, counted as lost if a send fails */
    int64_t first_ms;         /* when the oldest record in buf was added */
    uint64_t unreported;      /* records dropped since the last error-log note */
    struct ratelimit drop_notes;
    char buf[ALOG_BUF];
};

void alog_init(struct alog *a, int fd, enum log_format fmt, struct sb_slot *slot);

static inline int alog_on(const struct alog *a) { return a->fd >= 0; }

/* One record. family is AF_INET (addr: 4 bytes), AF_INET6 (16) or 0 for a
 * unix socket client (logs "-"); req may be NULL for a request that failed
 * to parse. */
void alog_record_addr(struct alog *a, int family, const uint8_t *addr,
                      const struct http_request *req, unsigned status, uint64_t body_bytes);

/* The same with the peer as a socket address (NULL: a unix client). */
void alog_record(struct alog *a, const struct sockaddr_storage *peer,
                 const struct http_request *req, unsigned status, uint64_t body_bytes);

/* Sends what is buffered; keeps it if the logger is not keeping up. */
void alog_flush(struct alog *a);

/* At the worker's (or thread's) exit: sends what is buffered, waiting up
 * to ALOG_CLOSE_WAIT_MS for the logger to have room; what it still cannot
 * take is counted as dropped, not lost unseen with the process. */
void alog_close(struct alog *a);

/* Once per loop iteration: sends the batch when it is due (half full, or
 * its oldest record waited ALOG_DELAY_MS), and says in the error log what
 * was dropped since the last note once one is allowed. */
void alog_tick(struct alog *a);

/* When the loop must call alog_tick at the latest (clock_now_ms time), or
 * -1 when no record waits and no drop is left to report. */
static inline int64_t alog_due_ms(const struct alog *a)
{
    int64_t due = a->len ? a->first_ms + ALOG_DELAY_MS : -1;
    if (a->unreported && (due < 0 || a->drop_notes.end_ms < due))
        due = a->drop_notes.end_ms;
    return due;
}

#endif

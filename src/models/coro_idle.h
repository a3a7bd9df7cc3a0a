/* The coro model's idle keep-alive connections, oldest first, for the whole
 * process: at --max-connections a new client takes the place of the one
 * idle the longest, as on the event loop (conn_idle_victim) and as nginx
 * reuses idle keep-alive connections.
 *
 * An idle connection is a parked wait on whichever kernel thread it last
 * ran on, so the acceptor cannot close it itself; it shuts the socket
 * down, and the kernel's hang-up wakes the connection's own wait, which
 * reads the end and closes as for a client that left. The list's lock
 * keeps the fd valid for that shutdown: a connection leaves the list
 * (under the lock) before it closes its fd. */
#ifndef HERD_MODELS_CORO_IDLE_H
#define HERD_MODELS_CORO_IDLE_H

#include <stdint.h>

struct coro_idle_link {
    struct coro_idle_link *prev, *next; /* NULL: not in the list */
    int fd;
    int64_t since; /* turned idle then (clock_now_ms) */
    uint8_t shut; /* given its place: its close ends coro_idle_shutting's count */
};

/* Appends l (the connection on fd turned idle). */
void coro_idle_add(struct coro_idle_link *l, int fd);
/* Takes l out, if it is in. Call before the connection's fd closes. */
void coro_idle_remove(struct coro_idle_link *l);
/* The connection l closed: a shut one no longer counts. */
void coro_idle_closed(struct coro_idle_link *l);
/* Shuts down the oldest idle connection with no request waiting in its
 * socket (a peek each, a few at most) and idle for IDLE_VICTIM_MIN_MS
 * (models/linger.h): 1 when one was. */
int coro_idle_make_room(void);
/* Connections shut down for a new client that have not closed yet. */
uint64_t coro_idle_shutting(void);

#endif

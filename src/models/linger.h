/* The lingering close every model does (RFC 9112 9.6): after an answer
 * that closes while the peer may still send (an unread body, or input
 * behind the request that closes), shut our side and read until the peer
 * closes, for LINGER_TIMEOUT_MS at most. A close that finds unread input
 * resets the connection, and the reset drops what of the answer the
 * socket has not sent yet. nginx: lingering_close, lingering_timeout. */
#ifndef HERD_MODELS_LINGER_H
#define HERD_MODELS_LINGER_H

#include <stdint.h>
#include <sys/socket.h>

#define LINGER_TIMEOUT_MS 5000
#define LINGER_READS_MAX 64 /* reads per wakeup while draining a closing peer */

/* Whether input waits unread in fd's socket: bytes that came while an
 * answer that closes was being written (a client that sent on after an
 * HTTP/1.0 request, or a slow pipeline behind a Connection: close). The
 * answer planned no linger, but closing on them resets the connection
 * just the same, cutting the answer the client has not read yet. Asked
 * once an answer took a wait, its own or one before it on the connection
 * whose wait ended in it (its output blocked, or an exchange ran):
 * an answer written at once leaves a window of microseconds, and the
 * peek, a syscall, cost 3% of a connection that closes after one small
 * answer (bench/RESULTS.md §37). */
static inline int linger_input_waiting(int fd)
{
    char b;
    return recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

/* At --max-connections a new client takes the place of the connection idle
 * the longest with no request waiting in its socket (every model but
 * iterative): how many of the longest-idle ones are looked at for that,
 * each look one linger_input_waiting peek. */
#define IDLE_VICTIM_LOOKS 8

/* ... and only one idle for IDLE_VICTIM_MIN_MS at least. A client sends
 * its next request within about a round trip of the answer; closing a
 * connection idle for less risked a request already on the wire, lost for
 * a client that does not retry (wrk, ab: about 1 in 2,000-3,500 requests
 * at the limit with back-to-back clients). A new client waits that long
 * at most for a place a connection gives up; connections with no pause
 * between requests are busy and keep theirs. */
#define IDLE_VICTIM_MIN_MS 50

/* 0 when a connection that turned idle idle_ms ago may give its place,
 * else the time (on now_ms's clock) from which it may. */
static inline int64_t idle_victim_from(uint32_t idle_ms, int64_t now_ms)
{
    return idle_ms >= IDLE_VICTIM_MIN_MS ? 0 : now_ms + IDLE_VICTIM_MIN_MS - idle_ms;
}

#endif

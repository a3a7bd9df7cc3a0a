/* The lingering close every model does (RFC 9112 9.6): after an answer
 * that closes while the peer may still send (an unread body, or input
 * behind the request that closes), shut our side and read until the peer
 * closes, for LINGER_TIMEOUT_MS at most. A close that finds unread input
 * resets the connection, and the reset drops what of the answer the
 * socket has not sent yet. nginx: lingering_close, lingering_timeout. */
#ifndef HERD_MODELS_LINGER_H
#define HERD_MODELS_LINGER_H

#define LINGER_TIMEOUT_MS 5000
#define LINGER_READS_MAX 64 /* reads per wakeup while draining a closing peer */

#endif

/* Handing a client connection over between processes (issue 13): on a
 * reload a draining worker passes each idle keep-alive connection, with
 * its request-step state and any bytes read but not parsed, to the master
 * over a SOCK_SEQPACKET channel (SCM_RIGHTS); the master passes it on to a
 * worker of the new generation, or bounces it back when none can take it.
 * One message per connection, so a message is never split between
 * readers: several threads of one process may share a channel.
 *
 * The request-step state is an opaque blob here: proc/ sits below the
 * models and does not know struct step_conn. All calls are non-blocking
 * and return -errno on failure. */
#ifndef HERD_PROC_HANDOVER_H
#define HERD_PROC_HANDOVER_H

#include <stddef.h>
#include <stdint.h>

#define HANDOVER_STATE_MAX 96   /* >= sizeof(struct step_conn) */
#define HANDOVER_IN_MAX 16384   /* unparsed input a handed-over connection may carry */

enum handover_kind {
    HO_CONN = 1,    /* a connection to adopt (worker -> master -> worker) */
    HO_BOUNCE,      /* master -> its old worker: nobody took it, keep it and drain */
    HO_ACK,         /* master -> old worker: `count` of its connections placed */
};

/* In handover_msg.state_len, above the length: a TLS connection whose
 * OpenSSL has read nothing yet (a client that connected and has not sent
 * its ClientHello); the adopting worker starts its handshake afresh. A
 * build from before it reads a length that is not its own and closes the
 * connection ("from another build"), where reading the flag anywhere it
 * looked it would serve the ClientHello as plain HTTP (an upgrade back to
 * such a build). */
#define HO_TLS_FRESH 0x8000

struct handover_msg {
    uint8_t kind;
    uint8_t tcp;            /* a TCP connection (else unix) */
    uint16_t state_len;     /* | HO_TLS_FRESH */
    uint32_t in_len;        /* bytes that follow the header */
    uint32_t count;         /* HO_ACK: how many; HO_CONN (and bounced back): the ms the
                             * connection had waited in its header or keep-alive
                             * timeout, so a reload does not start it again (0 from
                             * builds before this) */
    uint32_t pad;
    unsigned char state[HANDOVER_STATE_MAX];
};

/* A channel pair: [0] for the master, [1] for the worker; both CLOEXEC,
 * with send buffers as large as the kernel allows. */
int handover_channel(int sv[2]);

/* Sends m (and in[0..m->in_len), and fd when fd >= 0). 0, -EAGAIN when
 * the channel is full, or another -errno (the peer has gone: -EPIPE). */
int handover_send(int ch, const struct handover_msg *m, const void *in, int fd);

/* Receives one message into m and in[0..cap); *fd gets the passed fd or
 * -1. 1: a message; 0: EOF; -EAGAIN: none queued; -EMSGSIZE: the bytes did
 * not fit in cap (the fd, if any, is still returned: the caller closes it);
 * -EMFILE: our fd table was full and the kernel dropped the passed fd
 * (MSG_CTRUNC); other -errno. */
int handover_recv(int ch, struct handover_msg *m, void *in, size_t cap, int *fd);

/* handover_recv for a worker: a message it cannot use (no connection with
 * it, too large, our fd table full) is logged and dropped (its fd closed),
 * so this returns 1 (a usable message), 0 (EOF: the master has gone) or
 * -EAGAIN. */
int handover_next(int ch, struct handover_msg *m, void *in, size_t cap, int *fd);

#endif

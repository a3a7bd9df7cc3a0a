/* The dispatch model's master side (half-sync/half-async): the master alone
 * accepts, level-triggered and until EAGAIN, and passes each connection's
 * fd to a worker over a non-blocking SOCK_SEQPACKET channel with
 * SCM_RIGHTS, round-robin or to the worker with the fewest connections. A
 * full channel is skipped; when every channel is full, or a send fails for
 * every channel alike (ETOOMANYREFS: the fds in flight count against the
 * master's RLIMIT_NOFILE), the master stops polling the listen sockets,
 * holding the connections it has, and retries until a worker takes them; a
 * connection held longer than hold_max_ms is closed. A channel is dropped
 * only when its worker is gone or draining; what a worker that exited left
 * in its channel is passed on, and so is what waits for a second in the
 * channel of a worker that takes nothing (stalled, or at
 * --max-connections). The master never blocks on a worker. */
#ifndef HERD_PROC_DISPATCH_H
#define HERD_PROC_DISPATCH_H

#include <stdint.h>

#include "core/loop.h"
#include "proc/scoreboard.h"

struct dispatch;

#define DISPATCH_TAG_LISTEN (1ULL << 62)
#define DISPATCH_TAG_CHANNEL (1ULL << 61)

/* Listen fds are polled in l with tags DISPATCH_TAG_LISTEN | i. */
struct dispatch *dispatch_create(struct loop *l, const int *listen_fds, const int *tcp, int n,
                                 struct scoreboard *sb, int least, int64_t hold_max_ms);

/* Opens a channel for a worker about to start in slot; returns the
 * worker's end (the master keeps the other), or -errno. */
int dispatch_channel(struct dispatch *d, int slot);
/* The worker in slot is gone or draining: no more connections for it. */
void dispatch_drop(struct dispatch *d, int slot);
/* The worker in slot has exited: the connections still in its channel go
 * to the other workers (pass_on), or close (a stop). */
void dispatch_exited(struct dispatch *d, int slot, int pass_on);

/* In a freshly forked child: close the master's ends of every channel. */
void dispatch_close_in_child(struct dispatch *d);

void dispatch_event(struct dispatch *d, uint64_t tag, uint32_t events);
/* While connections are held (no worker could take them), retries them;
 * ends an fd back-off of the listen sockets when it is due; passes on what
 * waits in a stalled worker's channel. Returns the ms until the next retry
 * or look, or -1 when there is none. A channel's EPOLLOUT
 * usually comes first for a full channel; nothing else comes for the rest. */
int dispatch_tick(struct dispatch *d);

/* A reload removes listen addresses: the listeners not in keep are
 * taken out, what is queued on them passed to the workers first (call it
 * while the old workers still take connections: they know those
 * listeners' flags). The master closes the sockets afterwards. */
void dispatch_retire_listeners(struct dispatch *d, const int *keep, int nkeep);
/* The reload's listen set, once the new workers are the ones fed. */
void dispatch_set_listeners(struct dispatch *d, const int *fds, int n);

/* Stops accepting (graceful stop). */
void dispatch_stop(struct dispatch *d);

/* Worker side: receives up to max fds from a channel; returns the count,
 * 0 at EOF, or -errno (-EAGAIN when nothing is queued). *lost: connections
 * that came without their fd because this process had none free (the
 * kernel closes them: MSG_CTRUNC). */
int dispatch_receive(int channel, int *fds, int max, unsigned *lost);

#endif

/* herd lat: ping-pong latency over TCP or unix sockets (the lat_tcp idea).
 * The server echoes every byte back; a round trip is one message of SIZE
 * bytes out and the same bytes back, checked. Any short transfer, close or
 * silence is an error with its reason, never a number. */
#ifndef HERD_BENCH_LAT_H
#define HERD_BENCH_LAT_H

#include <stddef.h>
#include <stdint.h>

struct hdr;

struct listen_addr;

/* Binds and listens on a (from listen_parse) with a non-blocking,
 * close-on-exec socket and stores the bound address (the real port) back
 * in a. A unix socket path left by a dead server is replaced; one with a
 * live server is EADDRINUSE. Returns the fd or -errno. */
int lat_listen(struct listen_addr *a);

/* Echoes everything read from fd back until EOF or an error; closes fd. */
void lat_echo(int fd);

/* The echo server: accepts on the listening socket lfd, a thread per
 * connection, until a signal can be read from the signalfd sfd.
 * Returns 0, or -errno when accepting fails for good. */
int lat_serve(int lfd, int sfd);

/* warmup then rounds round trips of size bytes on the connected socket fd,
 * each recorded in h in nanoseconds (warm-up rounds are not), each done
 * within timeout_ms of its first send or failed. Returns 0, or
 * -1 with the reason in err (the round, the bytes that came back). */
int lat_rounds(int fd, size_t size, uint64_t warmup, uint64_t rounds, int timeout_ms,
               struct hdr *h, char *err, size_t errlen);

#endif

#include "bench/lat.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "bench/hdr.h"
#include "core/signals.h"
#include "net/listen.h"

#define ECHO_BUF (256 * 1024)

int lat_listen(struct listen_addr *a)
{
    int fd = socket(a->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    if (a->family == AF_UNIX) {
        int rc = listen_unix_path_free(a);
        if (rc < 0) {
            close(fd);
            return rc;
        }
    } else {
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    }
    socklen_t len = a->len;
    if (bind(fd, (const struct sockaddr *)&a->ss, a->len) < 0 || listen(fd, 128) < 0 ||
        getsockname(fd, (struct sockaddr *)&a->ss, &len) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

void lat_echo(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); /* fails harmlessly on unix */
    char *buf = malloc(ECHO_BUF);
    while (buf) {
        ssize_t n = recv(fd, buf, ECHO_BUF, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        for (ssize_t off = 0; off < n;) {
            ssize_t w = send(fd, buf + off, (size_t)(n - off), MSG_NOSIGNAL);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                goto out;
            off += w;
        }
    }
out:
    free(buf);
    close(fd);
}

static void *echo_thread(void *arg)
{
    lat_echo((int)(intptr_t)arg);
    return NULL;
}

int lat_serve(int lfd, int sfd)
{
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    struct pollfd p[2] = {{.fd = lfd, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
    for (;;) {
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            pthread_attr_destroy(&attr);
            return -errno;
        }
        if (p[1].revents && signals_read(sfd) > 0)
            break;
        if (!p[0].revents)
            continue;
        for (;;) {
            /* Blocking sockets: the echo loop is a plain recv/send pair. */
            int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
            if (fd < 0) {
                if (errno == EINTR || errno == ECONNABORTED)
                    continue;
                if (errno == EAGAIN)
                    break;
                if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                    break; /* the next poll retries once a connection closes */
                int e = errno;
                pthread_attr_destroy(&attr);
                return -e;
            }
            pthread_t t;
            if (pthread_create(&t, &attr, echo_thread, (void *)(intptr_t)fd) != 0)
                close(fd);
        }
    }
    pthread_attr_destroy(&attr);
    return 0;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Waits until fd can make progress or the round's deadline passes.
 * Returns 1 when it may, 0 once the deadline has passed. */
static int wait_until(int fd, int want_out, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - now_ns();
        if (left <= 0)
            return 0;
        struct pollfd p = {.fd = fd, .events = POLLIN | (want_out ? POLLOUT : 0)};
        /* rounded up: a poll that wakes a little early would only wait again */
        int r = poll(&p, 1, (int)((left + 999999) / 1000000));
        if (r > 0)
            return 1;
        if (r < 0 && errno != EINTR)
            return 1; /* the recv or send that follows reports the error */
    }
}

/* One round trip: out[0..size) sent while in[0..size) is read back, all
 * within timeout_ms from the first send (a server that drips the echo
 * cannot stretch a round). Small messages take one send and a blocking
 * recv, which SO_RCVTIMEO bounds to the whole timeout; anything more waits
 * in poll for the time left. A message too big for the socket buffers is
 * sent and received in turns, so neither side waits on a full buffer.
 * Returns 0, or -1 with err set. */
static int round_trip(int fd, const char *out, char *in, size_t size, int timeout_ms,
                      char *err, size_t errlen)
{
    int64_t deadline = now_ns() + (int64_t)timeout_ms * 1000000;
    size_t sent = 0, got = 0;
    for (int first = 1; got < size; first = 0) {
        if (sent < size) {
            ssize_t n = send(fd, out + sent, size - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n > 0)
                sent += (size_t)n;
            else if (n < 0 && errno != EAGAIN && errno != EINTR) {
                snprintf(err, errlen, "send failed after %zu of %zu bytes: %s", sent, size,
                         strerror(errno));
                return -1;
            }
        }
        int block = first && sent == size;
        ssize_t n = recv(fd, in + got, size - got, block ? 0 : MSG_DONTWAIT);
        if (n > 0) {
            got += (size_t)n;
            continue;
        }
        if (n == 0) {
            snprintf(err, errlen, "the server closed the connection after echoing %zu of %zu bytes",
                     got, size);
            return -1;
        }
        if (errno != EAGAIN && errno != EINTR) {
            snprintf(err, errlen, "recv failed after %zu of %zu bytes: %s", got, size,
                     strerror(errno));
            return -1;
        }
        if ((block && errno == EAGAIN) || !wait_until(fd, sent < size, deadline)) {
            snprintf(err, errlen, "no reply within %d ms (sent %zu, got %zu of %zu bytes back)",
                     timeout_ms, sent, got, size);
            return -1;
        }
    }
    return 0;
}

int lat_rounds(int fd, size_t size, uint64_t warmup, uint64_t rounds, int timeout_ms,
               struct hdr *h, char *err, size_t errlen)
{
    struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char *out = malloc(size), *in = malloc(size);
    int rc = -1;
    if (!out || !in) {
        snprintf(err, errlen, "out of memory for %zu-byte messages", size);
        goto done;
    }
    for (size_t i = 0; i < size; i++)
        out[i] = (char)('a' + i % 26);
    for (uint64_t r = 0; r < warmup + rounds; r++) {
        /* Each round's message differs, so a stale echo cannot pass. */
        uint64_t tag = r + 1;
        memcpy(out, &tag, size < sizeof tag ? size : sizeof tag);
        char why[200];
        int64_t t0 = now_ns();
        if (round_trip(fd, out, in, size, timeout_ms, why, sizeof why) < 0) {
            snprintf(err, errlen, "%zu-byte messages, round %llu: %s", size,
                     (unsigned long long)r + 1, why);
            goto done;
        }
        int64_t t1 = now_ns();
        if (memcmp(out, in, size)) {
            snprintf(err, errlen, "%zu-byte messages, round %llu: the echo differs from what was sent",
                     size, (unsigned long long)r + 1);
            goto done;
        }
        if (r >= warmup)
            hdr_record(h, (uint64_t)(t1 - t0));
    }
    rc = 0;
done:
    free(out);
    free(in);
    return rc;
}

#include "proc/logger.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/log.h"
#include "core/loop.h"
#include "core/signals.h"

#define BATCH (256 * 1024)

int logger_open_file(const char *path)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    return fd < 0 ? -errno : fd;
}

static void write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            log_msg(LOG_ERROR, "access log: write: %s", strerror(errno));
            return;
        }
        p += w;
        n -= (size_t)w;
    }
}

/* Reads every queued datagram, writing in batches of about BATCH bytes. */
static void drain(int rx, int out, char *buf)
{
    size_t len = 0;
    for (;;) {
        ssize_t n = recv(rx, buf + len, BATCH + 65536 - len, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
        if (len >= BATCH) {
            write_all(out, buf, len);
            len = 0;
        }
    }
    if (len)
        write_all(out, buf, len);
}

int logger_main(int rx, const char *path)
{
    int sfd = signals_open();
    int out = logger_open_file(path);
    if (out < 0 || sfd < 0) {
        log_msg(LOG_CRIT, "access log %s: %s", path, strerror(out < 0 ? -out : -sfd));
        return 1;
    }
    char *buf = malloc(BATCH + 65536);
    struct loop l;
    if (!buf || loop_init(&l) < 0 || loop_add(&l, rx, LOOP_IN, 1) < 0 ||
        loop_add(&l, sfd, LOOP_IN, 2) < 0) {
        log_msg(LOG_CRIT, "logger: cannot start: %s", strerror(errno));
        return 1;
    }
    for (;;) {
        struct epoll_event ev[4];
        int n = loop_wait(&l, ev, 4, -1);
        for (int i = 0; i < n; i++) {
            if (ev[i].data.u64 == 1) {
                drain(rx, out, buf);
                continue;
            }
            int sig;
            while ((sig = signals_read(sfd)) > 0) {
                if (sig == SIGUSR1) {
                    drain(rx, out, buf);
                    int fd = logger_open_file(path);
                    if (fd < 0) {
                        log_msg(LOG_ERROR, "access log: reopen %s: %s (keeping the old file)",
                                path, strerror(-fd));
                    } else {
                        close(out);
                        out = fd;
                    }
                } else if (sig == SIGTERM || sig == SIGINT || sig == SIGQUIT) {
                    drain(rx, out, buf);
                    close(out);
                    return 0;
                }
            }
        }
    }
}

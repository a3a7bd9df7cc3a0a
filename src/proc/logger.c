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
#include "proc/accesslog.h"
#include "proc/alog_text.h"

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

/* The logger's state: the datagram being read, the text being gathered
 * for one write, and the text it reuses (time stamps, the last address). */
struct lg {
    int rx, out;
    size_t len;          /* text in buf */
    int warned;          /* a bad record was reported */
    struct alog_cache cache;
    char in[ALOG_BUF];   /* a worker sends at most one batch per datagram */
    char buf[BATCH + ALOG_RECORD_MAX];
};

/* Formats the records of one datagram in[0..n) into the pending text,
 * writing it out whenever BATCH bytes are gathered. A datagram that does
 * not decode is the end of what can be trusted in it: the rest is dropped,
 * and reported once. */
static void format_datagram(struct lg *g, size_t n)
{
    for (size_t at = 0; at < n;) {
        struct alog_entry e;
        long k = alog_decode(g->in + at, n - at, &e);
        if (k < 0) {
            if (!g->warned++)
                log_msg(LOG_ERROR, "access log: a malformed record (%zu bytes left of a "
                        "datagram): dropped it and the rest of the datagram", n - at);
            return;
        }
        at += (size_t)k;
        g->len += alog_text(&g->cache, &e, g->buf + g->len);
        if (g->len >= BATCH) {
            write_all(g->out, g->buf, g->len);
            g->len = 0;
        }
    }
}

/* Reads every queued datagram, writing in batches of about BATCH bytes. */
static void drain(struct lg *g)
{
    for (;;) {
        ssize_t n = recv(g->rx, g->in, sizeof g->in, MSG_DONTWAIT | MSG_TRUNC);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        /* MSG_TRUNC: n is the datagram's real length; a longer one than a
         * batch is not from a worker, and its cut end is not decoded. */
        format_datagram(g, (size_t)n <= sizeof g->in ? (size_t)n : 0);
    }
    if (g->len)
        write_all(g->out, g->buf, g->len);
    g->len = 0;
}

int logger_main(int rx, const char *path)
{
    int sfd = signals_open();
    int out = logger_open_file(path);
    if (out < 0 || sfd < 0) {
        log_msg(LOG_CRIT, "access log %s: %s", path, strerror(out < 0 ? -out : -sfd));
        return 1;
    }
    struct lg *g = malloc(sizeof *g);
    struct loop l;
    if (g) {
        *g = (struct lg){.rx = rx, .out = out};
        alog_cache_init(&g->cache);
    }
    if (!g || loop_init(&l) < 0 || loop_add(&l, rx, LOOP_IN, 1) < 0 ||
        loop_add(&l, sfd, LOOP_IN, 2) < 0) {
        log_msg(LOG_CRIT, "logger: cannot start: %s", strerror(errno));
        return 1;
    }
    for (;;) {
        struct epoll_event ev[4];
        int n = loop_wait(&l, ev, 4, -1);
        for (int i = 0; i < n; i++) {
            if (ev[i].data.u64 == 1) {
                drain(g);
                continue;
            }
            int sig;
            while ((sig = signals_read(sfd)) > 0) {
                if (sig == SIGUSR1) {
                    drain(g);
                    int fd = logger_open_file(path);
                    if (fd < 0) {
                        log_msg(LOG_ERROR, "access log: reopen %s: %s (keeping the old file)",
                                path, strerror(-fd));
                    } else {
                        close(g->out);
                        g->out = fd;
                    }
                } else if (sig == SIGTERM || sig == SIGINT || sig == SIGQUIT) {
                    drain(g);
                    close(g->out);
                    free(g);
                    return 0;
                }
            }
        }
    }
}

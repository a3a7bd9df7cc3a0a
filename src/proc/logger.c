#include "proc/logger.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/loop.h"
#include "core/ratelimit.h"
#include "core/signals.h"
#include "proc/accesslog.h"
#include "proc/alog_file.h"
#include "proc/alog_text.h"
#include "proc/scoreboard.h"

#define BATCH (256 * 1024)

/* A failing write is reported at once, then at most once a REPORT_MS (as
 * nginx does): on a full disk every batch fails, over a hundred a second
 * under load, and the error log is often on the same disk. */
#define REPORT_MS 60000

/* O_NONBLOCK for the open (as the error log's, core/log.c): a FIFO with
 * no reader fails with ENXIO at once; waiting for one froze the master's
 * reload check (and so a dispatch master's accepts) and the logger's USR1
 * reopen. The logger's writes are non-blocking too, and wait for room in
 * a bounded poll (alog_file.h). O_EXCL first tells a file this open
 * creates from one that was there: O_EXCL fails on any symlink, even a
 * dangling one, so an operator's link is never taken for ours. */
int logger_open_file(const char *path, int *made)
{
    const int flags = O_WRONLY | O_APPEND | O_CLOEXEC | O_NONBLOCK;
    int fd = made ? open(path, flags | O_CREAT | O_EXCL, 0644) : -1;
    if (made)
        *made = fd >= 0;
    if (fd < 0 && (!made || errno == EEXIST))
        fd = open(path, flags | O_CREAT, 0644);
    return fd < 0 ? -errno : fd;
}

/* The logger's state: the datagram being read, the text being gathered
 * for one write, and the text it reuses (time stamps, the last address). */
struct lg {
    int rx;
    size_t len;          /* text in buf */
    int warned;          /* a bad record was reported */
    int failing;         /* the last write lost lines */
    uint64_t *dropped;   /* the scoreboard's count of lines not written */
    uint64_t unreported; /* lines lost since the last error-log line about them */
    struct ratelimit failure_notes, resume_notes;
    struct alog_cache cache;
    struct alog_file out;
    char in[ALOG_BUF];   /* a worker sends at most one batch per datagram */
    char buf[BATCH + ALOG_RECORD_MAX];
};

static int64_t now_ms(void)
{
    return clock_fresh_us() / 1000; /* the logger's loop keeps no clock */
}

/* Lines that will never be in the file: on the status page (log_dropped)
 * at once, in the error log with the next note. */
static void count_lost(struct lg *g, uint64_t lines)
{
    SB_ADD(*g->dropped, lines);
    g->unreported += lines;
}

/* A write that lost lines: said at once, then at most once a REPORT_MS,
 * each time with the lines lost since the last note. */
static void note_failure(struct lg *g)
{
    g->failing = 1;
    if (!ratelimit_take(&g->failure_notes, now_ms(), REPORT_MS, 1, NULL))
        return;
    log_msg(LOG_ERROR, "access log: write: %s: %" PRIu64 " lines not written (counted in "
            "log_dropped; logged at most once a minute)", strerror(g->out.error), g->unreported);
    g->unreported = 0;
}

/* The first whole write after failures: said once (a disk that fills and
 * empties by turns is rate-limited too), with the lines lost since the
 * last failure note. */
static void note_resumed(struct lg *g)
{
    g->failing = 0;
    if (!ratelimit_take(&g->resume_notes, now_ms(), REPORT_MS, 1, NULL))
        return;
    if (g->unreported)
        log_msg(LOG_NOTICE, "access log: writing again; %" PRIu64 " more lines were not written",
                g->unreported);
    else
        log_msg(LOG_NOTICE, "access log: writing again");
    g->unreported = 0;
}

/* Writes the gathered text: whole lines only, the rest counted (alog_file.h). */
static void write_text(struct lg *g)
{
    uint64_t lost = alog_file_write(&g->out, g->buf, g->len);
    g->len = 0;
    if (lost) {
        count_lost(g, lost);
        note_failure(g);
    } else if (g->failing && !g->out.error) {
        note_resumed(g);
    }
}

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
        if (g->len >= BATCH)
            write_text(g);
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
        write_text(g);
}

int logger_main(int rx, int out_fd, const char *path, uint64_t *dropped)
{
    /* A file past RLIMIT_FSIZE (systemd's LimitFSIZE=) then fails a write
     * with EFBIG, counted as a full disk is, instead of killing the logger
     * at every batch. */
    signal(SIGXFSZ, SIG_IGN);
    int sfd = signals_open();
    int out = out_fd >= 0 ? out_fd : logger_open_file(path, NULL);
    if (out < 0 || sfd < 0) {
        log_msg(LOG_CRIT, "access log %s: %s", path, strerror(out < 0 ? -out : -sfd));
        return 1;
    }
    struct lg *g = malloc(sizeof *g);
    struct loop l;
    if (g) {
        *g = (struct lg){.rx = rx, .dropped = dropped};
        alog_cache_init(&g->cache);
        alog_file_init(&g->out, out, sfd);
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
                    int fd = logger_open_file(path, NULL);
                    if (fd < 0) {
                        log_msg(LOG_ERROR, "access log: reopen %s: %s (keeping the old file)",
                                path, strerror(-fd));
                    } else {
                        count_lost(g, alog_file_switch(&g->out, fd));
                    }
                } else if (sig == SIGTERM || sig == SIGINT || sig == SIGQUIT) {
                    drain(g);
                    count_lost(g, alog_file_switch(&g->out, -1));
                    free(g);
                    return 0;
                }
            }
        }
    }
}

/* The access log's output as the logger writes it: whole lines or nothing.
 *
 * A write the output cuts short (a full disk: ENOSPC, EDQUOT; EFBIG; EIO)
 * must not leave half a line for the next line to be glued onto. On a
 * regular file the cut line is taken back at once (ftruncate to the end of
 * the last whole line written): the file holds only whole lines whenever
 * the write returns, whether or not space ever comes back, the logger is
 * restarted or the server stops meanwhile. Keeping the rest of the line to
 * write later instead would leave the half line in the file for as long as
 * the disk stays full, and lose it for good on a restart. Only where
 * truncating is impossible or unsafe (a pipe or a terminal, or a file
 * another process appended to after our bytes) is the rest of the cut line
 * kept and written first the next time, so that the line ends whole.
 *
 * A pipe or socket that is full (a log shipper reading slowly) is waited
 * for, which holds the workers' records back in the logger's socket, but
 * never blindly: the output is non-blocking and the wait is a poll that a
 * signal to the logger (the wake fd: TERM at a stop or reload, USR1 at a
 * rotation) ends at once, and that gives up after ALOG_STALL_MS. Once a
 * wait has given up, the output counts as stalled and later writes do not
 * wait at all until one goes through whole: a reader that stopped reading
 * costs the logger one wait, not one per batch. A blocking write there
 * kept a logger from its signals for good (a reload never got its new
 * log; a stop took the whole shutdown timeout).
 *
 * Every line that does not reach the output is counted, and the count
 * handed back to the caller (the logger adds it to log_dropped). */
#ifndef HERD_PROC_ALOG_FILE_H
#define HERD_PROC_ALOG_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "proc/alog_text.h"

#define ALOG_STALL_MS 1000

struct alog_file {
    int fd;              /* opened by logger_open_file: O_APPEND; made O_NONBLOCK here */
    int wake_fd;         /* readable: stop waiting for the output (-1: none) */
    int stalled;         /* a wait gave up: no more waits until a whole write */
    int pipe;            /* a FIFO: whole lines in writes of at most PIPE_BUF */
    int error;           /* errno of the last write that failed, 0 if it went through */
    size_t rest_len;     /* bytes in rest */
    char rest[ALOG_RECORD_MAX]; /* the end of a cut line that could not be taken back */
};

/* wake_fd: an fd that turns readable when the logger has something else
 * to do (its signalfd), or -1. */
void alog_file_init(struct alog_file *f, int fd, int wake_fd);

/* Appends text, whole lines each ending in '\n'. Returns how many of them
 * are not in the output and never will be: 0 when all were written. */
uint64_t alog_file_write(struct alog_file *f, const char *text, size_t len);

/* Closes the output and goes on with fd (a reopen after a rotation; -1 at
 * exit). A cut line still waiting for its rest is lost: returns 1 for it,
 * else 0. */
uint64_t alog_file_switch(struct alog_file *f, int fd);

#endif

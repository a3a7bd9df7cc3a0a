#include "proc/alog_file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/clock.h"

/* Non-blocking, so that a full pipe is waited for by wait_room (a regular
 * file ignores the flag). */
static void take_fd(struct alog_file *f, int fd)
{
    struct stat st;
    f->fd = fd;
    f->stalled = 0;
    f->pipe = fd >= 0 && fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode);
    int fl = fd >= 0 ? fcntl(fd, F_GETFL) : -1;
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

void alog_file_init(struct alog_file *f, int fd, int wake_fd)
{
    take_fd(f, fd);
    f->wake_fd = wake_fd;
    f->error = 0;
    f->rest_len = 0;
}

/* A full output: 1 once it has room, 0 when the wait ends without it (the
 * wake fd turned readable, ALOG_STALL_MS passed, or the output stalled
 * before). */
static int wait_room(struct alog_file *f)
{
    if (f->stalled)
        return 0;
    struct pollfd p[2] = {{.fd = f->fd, .events = POLLOUT}, {.fd = f->wake_fd, .events = POLLIN}};
    int64_t until = clock_fresh_us() / 1000 + ALOG_STALL_MS;
    for (;;) {
        int64_t left = until - clock_fresh_us() / 1000;
        int n = left > 0 ? poll(p, f->wake_fd >= 0 ? 2 : 1, (int)left) : 0;
        if (n < 0 && errno == EINTR)
            continue;
        if (n > 0 && (p[0].revents & (POLLOUT | POLLERR | POLLHUP)))
            return 1; /* the write says which it was */
        if (n > 0 && p[1].revents)
            return 0; /* a signal: not stalled, only busy */
        f->stalled = 1;
        return 0;
    }
}

/* write(2) until p[0..n) is all written or the output refuses more; returns
 * the bytes written, and sets f->error when that is fewer than n. */
static size_t write_some(struct alog_file *f, const char *p, size_t n)
{
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(f->fd, p + done, n - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN && wait_room(f))
            continue;
        if (w <= 0) {
            /* 0 bytes for a write of some: trying again would spin */
            f->error = w < 0 ? errno : EIO;
            break;
        }
        done += (size_t)w;
    }
    if (done == n)
        f->stalled = 0; /* the reader is back */
    return done;
}

static uint64_t count_lines(const char *p, size_t n)
{
    uint64_t lines = 0;
    for (const char *end = p + n; (p = memchr(p, '\n', (size_t)(end - p))) != NULL; p++)
        lines++;
    return lines;
}

/* The bytes of the whole lines p[0..n) starts with. */
static size_t whole_lines(const char *p, size_t n)
{
    const char *nl = memrchr(p, '\n', n);
    return nl ? (size_t)(nl - p) + 1 : 0;
}

/* The bytes up to the end of the line p starts in, its newline included. */
static size_t rest_of_line(const char *p, size_t n)
{
    const char *nl = memchr(p, '\n', n);
    return nl ? (size_t)(nl - p) + 1 : n;
}

/* A pipe takes a write of at most PIPE_BUF bytes whole or not at all
 * (POSIX), also non-blocking; a longer one it fills up with whatever part
 * fits, mid-line. So lines go to a pipe in groups of whole lines of at
 * most PIPE_BUF bytes: a full pipe refuses a group whole, and a reader
 * that stalls never holds half a line, whose rest a logger that stops
 * (a stop, a reload to another log, a kill) could never send, and which
 * the next writer's first line was then glued onto (red-team pass 33).
 * Only a line longer than PIPE_BUF (a few KiB of User-Agent) goes alone
 * and may still be cut: its rest is kept as before. */
static size_t write_pipe(struct alog_file *f, const char *p, size_t n)
{
    size_t done = 0;
    while (done < n) {
        size_t left = n - done;
        size_t group = whole_lines(p + done, left < PIPE_BUF ? left : PIPE_BUF);
        if (group == 0)
            group = rest_of_line(p + done, left);
        size_t w = write_some(f, p + done, group);
        done += w;
        if (w < group)
            break;
    }
    return done;
}

/* The output's own way to write: see write_pipe. */
static size_t write_out(struct alog_file *f, const char *p, size_t n)
{
    return f->pipe ? write_pipe(f, p, n) : write_some(f, p, n);
}

/* Takes back the last `cut` bytes written, the start of a line the output
 * cut short: 1 when the file ends with a whole line again. The fd's offset
 * is where our write ended, whatever name the file has now (a rotation may
 * have renamed it: nothing here goes by the path). Only a regular file can
 * be truncated, and only while it still ends where our write ended: bytes
 * past that are another process's (during an upgrade the old and the new
 * master's loggers append to one file), which truncating would destroy. */
static int take_back(int fd, size_t cut)
{
    struct stat st;
    off_t end = lseek(fd, 0, SEEK_CUR);
    if (end < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size != end ||
        (uint64_t)end < cut)
        return 0;
    return ftruncate(fd, end - (off_t)cut) == 0;
}

/* Keeps the end of a cut line for the next write: 1, or 0 when it does not
 * fit (a line longer than a record, which alog_text never makes). */
static int keep_rest(struct alog_file *f, const char *p, size_t n)
{
    if (n > sizeof f->rest)
        return 0;
    memcpy(f->rest, p, n);
    f->rest_len = n;
    return 1;
}

/* Writes what is left of a cut line: 1 when the line is whole now. */
static int finish_cut_line(struct alog_file *f)
{
    size_t done = write_some(f, f->rest, f->rest_len);
    memmove(f->rest, f->rest + done, f->rest_len - done);
    f->rest_len -= done;
    return f->rest_len == 0;
}

uint64_t alog_file_write(struct alog_file *f, const char *text, size_t len)
{
    f->error = 0;
    /* A line must end before the next starts: while its rest is refused,
     * so is anything after it. */
    if (f->rest_len && !finish_cut_line(f))
        return count_lines(text, len);
    size_t done = write_out(f, text, len);
    if (done == len)
        return 0;
    size_t whole = whole_lines(text, done);
    if (done == whole || take_back(f->fd, done - whole))
        return count_lines(text + whole, len - whole);
    size_t cut_end = done + rest_of_line(text + done, len - done);
    if (!keep_rest(f, text + done, cut_end - done))
        return count_lines(text + whole, len - whole);
    return count_lines(text + cut_end, len - cut_end);
}

uint64_t alog_file_switch(struct alog_file *f, int fd)
{
    uint64_t lost = 0;
    if (f->rest_len && !finish_cut_line(f)) {
        f->rest_len = 0; /* its start stays cut in the old output: nothing can mend it now */
        lost = 1;
    }
    if (f->fd >= 0)
        close(f->fd);
    take_fd(f, fd);
    return lost;
}

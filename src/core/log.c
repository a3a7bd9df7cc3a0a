#include "core/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

enum log_level log_max_level = LOG_INFO;

static const char *const level_names[] = {
    "crit", "error", "warn", "notice", "info", "debug",
};

/* The error log file, when there is one. Every process of a server holds
 * its own fd for it (inherited at fork, same number everywhere). A reopen
 * bumps a counter in memory shared across fork; each process compares it
 * before it writes and reopens the path when it moved, so workers need no
 * signal of their own and no line goes to a file rotated away. */
static int log_fd = STDERR_FILENO;
static char log_path[1024];
static int stderr_taken;                /* fd 2 points at the file too */
static uint32_t *shared_gen;            /* bumped by log_reopen */
static uint32_t seen_gen;               /* what this process has opened */

/* O_NONBLOCK for the open only: a FIFO with no reader (a log shipper
 * restarting) then fails with ENXIO at once instead of waiting for one,
 * which froze the master on USR1 (a dispatch master accepts, so nobody was
 * served) until a reader came. Writes stay as they were. */
static int open_log(const char *path)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0644);
    if (fd < 0)
        return -errno;
    fcntl(fd, F_SETFL, O_APPEND);
    return fd;
}

/* Points log_fd (and fd 2 when taken) at fd's file; closes fd. */
static void switch_to(int fd)
{
    dup3(fd, log_fd, O_CLOEXEC);
    if (stderr_taken)
        dup2(fd, STDERR_FILENO);
    close(fd);
}

int log_open_file(const char *path)
{
    if (strlen(path) >= sizeof log_path)
        return -ENAMETOOLONG;
    int fd = open_log(path);
    if (fd < 0)
        return fd;
    void *page = mmap(NULL, sizeof *shared_gen, PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) {
        int err = -errno;
        close(fd);
        return err;
    }
    shared_gen = page;
    strcpy(log_path, path);
    log_fd = fd;
    return 0;
}

void log_take_stderr(void)
{
    if (log_fd != STDERR_FILENO && dup2(log_fd, STDERR_FILENO) >= 0)
        stderr_taken = 1;
}

int log_reopen(int uid, int gid)
{
    if (!shared_gen)
        return 0;
    int fd = open_log(log_path);
    if (fd < 0)
        return fd;
    struct stat st;
    /* Only a regular file: never chown a device such as /dev/null. */
    if (uid >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
        fchown(fd, (uid_t)uid, (gid_t)gid) < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    switch_to(fd);
    __atomic_store_n(&seen_gen, __atomic_add_fetch(shared_gen, 1, __ATOMIC_ACQ_REL),
                     __ATOMIC_RELEASE);
    return 0;
}

/* Another process reopened the log: follow it before writing. A failure
 * keeps the old file (the process that reopened first has reported why).
 * seen_gen moves only after the switch, so another thread of this process
 * either reopens too (harmless) or finds the new file in place. */
static void follow_reopen(void)
{
    uint32_t gen = __atomic_load_n(shared_gen, __ATOMIC_ACQUIRE);
    if (gen == __atomic_load_n(&seen_gen, __ATOMIC_ACQUIRE))
        return;
    int fd = open_log(log_path);
    if (fd >= 0)
        switch_to(fd);
    __atomic_store_n(&seen_gen, gen, __ATOMIC_RELEASE);
}

/* Lines a full pipe or socket refused since the last one written. */
static unsigned lines_dropped;

/* One line to fd without ever waiting: a stderr pipe or a journal socket
 * whose reader stalls must cost lines (-1 with EAGAIN), never a worker's
 * loop; a line of a few hundred bytes goes whole or not at all. A regular
 * file or a terminal takes the write as usual. */
static ssize_t write_nowait(int fd, const char *p, size_t n)
{
    struct stat st;
    int kind = fstat(fd, &st) == 0 ? (int)(st.st_mode & S_IFMT) : 0;
    if (kind == S_IFSOCK)
        return send(fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (kind == S_IFIFO) {
        struct iovec iov = {(void *)p, n};
        ssize_t w = pwritev2(fd, &iov, 1, -1, RWF_NOWAIT);
        if (w >= 0 || errno != EOPNOTSUPP)
            return w;
    }
    return write(fd, p, n);
}

static void log_write(enum log_level level, const char *fmt, va_list ap)
{
    char line[1024];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    int n = (int)strftime(line, sizeof line, "%Y/%m/%d %H:%M:%S ", &tm);
    n += snprintf(line + n, sizeof line - (size_t)n, "[%s] ", level_names[level]);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    if (m < 0)
        m = 0;
    n += m;
    if (n > (int)sizeof line - 2)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    if (shared_gen)
        follow_reopen();
    unsigned lost = __atomic_exchange_n(&lines_dropped, 0, __ATOMIC_ACQ_REL);
    if (lost) {
        char say[160];
        int k = (int)strftime(say, sizeof say, "%Y/%m/%d %H:%M:%S ", &tm);
        k += snprintf(say + k, sizeof say - (size_t)k, "[warn] %u error-log lines dropped: "
                      "the log's reader was not reading\n", lost);
        if (write_nowait(log_fd, say, (size_t)k) < 0)
            __atomic_add_fetch(&lines_dropped, lost, __ATOMIC_ACQ_REL);
    }
    /* One write per line, so lines from several processes never interleave. */
    if (write_nowait(log_fd, line, (size_t)n) < 0 && errno == EAGAIN)
        __atomic_add_fetch(&lines_dropped, 1, __ATOMIC_ACQ_REL);
}

void log_msg(enum log_level level, const char *fmt, ...)
{
    if (level > log_max_level)
        return;
    va_list ap;
    va_start(ap, fmt);
    log_write(level, fmt, ap);
    va_end(ap);
}

void log_fatal(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_write(LOG_CRIT, fmt, ap);
    va_end(ap);
    exit(1);
}

/* proc/alog_file.c: the logger's writes leave whole lines only. A write
 * the output cuts short is made here without a full disk: a regular file
 * past RLIMIT_FSIZE (EFBIG, with SIGXFSZ ignored as the logger does) is
 * cut at the limit, and a pipe of one page at its capacity (EAGAIN, with a
 * wake fd that is always readable, so the write does not wait for room).
 * On the file the cut line is taken back; a pipe, which cannot be
 * truncated, is written whole lines in groups of at most PIPE_BUF, which it
 * takes whole or not at all, and only a line longer than that can be cut:
 * its rest is written first the next time. Every line not
 * written is counted. A full pipe is waited for, but only until the wake
 * fd turns readable or ALOG_STALL_MS pass, and after one wait that gave up
 * not again until a write goes through. */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/clock.h"
#include "proc/alog_file.h"

#define LINE 50 /* bytes of each test line, newline included */

/* n lines of LINE bytes, numbered from first: "line 000007 xxx...x\n". */
static size_t make_lines(char *out, int first, int n)
{
    for (int i = 0; i < n; i++) {
        char *p = out + (size_t)i * LINE;
        int k = snprintf(p, LINE, "line %06d ", first + i);
        memset(p + k, 'x', LINE - 1 - (size_t)k);
        p[LINE - 1] = '\n';
    }
    return (size_t)n * LINE;
}

/* The file holds lines 0..n-1 of make_lines, whole, and nothing else. */
static int holds_lines(const char *path, int n)
{
    static char want[64 * LINE], got[64 * LINE + 1];
    size_t len = make_lines(want, 0, n);
    int fd = open(path, O_RDONLY);
    ssize_t r = fd < 0 ? -1 : read(fd, got, sizeof got);
    if (fd >= 0)
        close(fd);
    if (r == (ssize_t)len && memcmp(got, want, len) == 0)
        return 1;
    UNIT_NOTE("the file has %zd bytes, %zu expected", r, len);
    return 0;
}

static int open_temp(char *path)
{
    int fd = mkstemp(path);
    if (fd < 0)
        abort();
    close(fd);
    return open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
}

TEST(a_file_cut_short_keeps_its_whole_lines)
{
    char path[] = "/tmp/herd-alog-file-XXXXXX";
    int fd = open_temp(path);
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, SIG_IGN);
    static struct alog_file f;
    alog_file_init(&f, fd, -1);
    char text[64 * LINE];

    /* room for 20 lines and 10 bytes of the 21st */
    lim = (struct rlimit){.rlim_cur = 20 * LINE + 10, .rlim_max = old.rlim_max};
    if (!CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0))
        return;
    size_t n = make_lines(text, 0, 30);
    CHECK_EQ_U64(alog_file_write(&f, text, n), 10);
    CHECK_EQ_INT(f.error, EFBIG);
    CHECK(holds_lines(path, 20));

    /* still full: the next lines are lost whole, the file stays as it was */
    n = make_lines(text, 20, 5);
    CHECK_EQ_U64(alog_file_write(&f, text, n), 5);
    CHECK(holds_lines(path, 20));

    /* room again: the lines go on after the last whole one */
    setrlimit(RLIMIT_FSIZE, &old);
    n = make_lines(text, 20, 3);
    CHECK_EQ_U64(alog_file_write(&f, text, n), 0);
    CHECK_EQ_INT(f.error, 0);
    CHECK(holds_lines(path, 23));

    CHECK_EQ_U64(alog_file_switch(&f, -1), 0);
    unlink(path);
}

/* Reads what the pipe holds, appending to *acc. */
static void empty_pipe(int fd, char *acc, size_t *len, size_t cap)
{
    ssize_t r;
    while (*len < cap && (r = read(fd, acc + *len, cap - *len)) > 0)
        *len += (size_t)r;
}

/* A wake fd that is always readable: a full pipe is not waited for. */
static int busy_fd(void)
{
    return eventfd(1, EFD_CLOEXEC);
}

/* A non-blocking pipe of 4096 bytes, f writing into p[1] and never
 * waiting for it: 1, or 0 when the pipe cannot be made so. */
static int small_pipe(int p[2], struct alog_file *f)
{
    if (!CHECK(pipe2(p, O_NONBLOCK) == 0))
        return 0;
    if (!CHECK(fcntl(p[1], F_SETPIPE_SZ, 4096) >= 0))
        return 0;
    alog_file_init(f, p[1], busy_fd());
    return 1;
}

TEST(a_full_pipe_gets_whole_lines_only)
{
    int p[2];
    static struct alog_file f;
    if (!small_pipe(p, &f))
        return;
    static char text[200 * LINE], out[200 * LINE];
    size_t out_len = 0;

    /* 4096 bytes would fit 81 whole lines and 46 bytes of the 82nd: the
     * pipe gets the 81, the rest is lost whole (red-team pass 33) */
    size_t n = make_lines(text, 0, 100);
    CHECK_EQ_U64(alog_file_write(&f, text, n), 100 - 81);
    CHECK_EQ_INT(f.error, EAGAIN);
    CHECK_EQ_U64(f.rest_len, 0);

    /* a switch now leaves the pipe holding whole lines only */
    empty_pipe(p[0], out, &out_len, sizeof out);
    CHECK(out_len == 81 * LINE && memcmp(out, text, out_len) == 0);
    n = make_lines(text, 81, 3);
    CHECK_EQ_U64(alog_file_write(&f, text, n), 0);
    CHECK_EQ_U64(alog_file_switch(&f, -1), 0);
    empty_pipe(p[0], out, &out_len, sizeof out);
    n = make_lines(text, 0, 84);
    CHECK(out_len == n && memcmp(out, text, n) == 0);
    close(p[0]);
}

/* n lines of len bytes each ("LLLL...L\n"), the k-th of letter 'a' + k. */
static size_t make_long_lines(char *out, size_t len, int n)
{
    for (int i = 0; i < n; i++) {
        memset(out + (size_t)i * len, 'a' + i, len - 1);
        out[(size_t)(i + 1) * len - 1] = '\n';
    }
    return (size_t)n * len;
}

#define LONG_LINE 5000 /* more than PIPE_BUF: the pipe may cut it */

TEST(a_pipe_cut_short_gets_the_rest_of_its_long_line_first)
{
    int p[2];
    static struct alog_file f;
    if (!small_pipe(p, &f))
        return;
    static char text[4 * LONG_LINE], out[8 * LONG_LINE];
    size_t out_len = 0;

    /* 4096 bytes of the first line fit, the second is lost */
    size_t n = make_long_lines(text, LONG_LINE, 2);
    CHECK_EQ_U64(alog_file_write(&f, text, n), 1);
    CHECK_EQ_INT(f.error, EAGAIN);
    CHECK_EQ_U64(f.rest_len, LONG_LINE - 4096);

    /* while the rest of the cut line is refused, so is what follows it */
    CHECK_EQ_U64(alog_file_write(&f, text, LONG_LINE), 1);
    CHECK_EQ_U64(f.rest_len, LONG_LINE - 4096);

    /* once the pipe is read, the cut line ends before the next lines */
    empty_pipe(p[0], out, &out_len, sizeof out);
    static char short_lines[3 * LINE];
    CHECK_EQ_U64(alog_file_write(&f, short_lines, make_lines(short_lines, 0, 3)), 0);
    empty_pipe(p[0], out, &out_len, sizeof out);
    CHECK_EQ_U64(f.rest_len, 0);
    CHECK(out_len == LONG_LINE + 3 * LINE && memcmp(out, text, LONG_LINE) == 0 &&
          memcmp(out + LONG_LINE, short_lines, 3 * LINE) == 0);

    /* a cut line whose rest the old output never takes is lost on a switch */
    alog_file_write(&f, text, n);
    CHECK(f.rest_len > 0);
    CHECK_EQ_U64(alog_file_switch(&f, -1), 1);
    CHECK_EQ_U64(f.rest_len, 0);
    close(p[0]);
}

TEST(a_switch_finishes_a_cut_line_when_it_can)
{
    int p[2];
    if (!CHECK(pipe2(p, O_NONBLOCK) == 0) || !CHECK(fcntl(p[1], F_SETPIPE_SZ, 4096) >= 0))
        return;
    static struct alog_file f;
    alog_file_init(&f, p[1], busy_fd());
    static char text[2 * LONG_LINE], out[2 * LONG_LINE];
    size_t out_len = 0;
    size_t n = make_long_lines(text, LONG_LINE, 2);
    alog_file_write(&f, text, n);
    empty_pipe(p[0], out, &out_len, sizeof out);
    CHECK_EQ_U64(alog_file_switch(&f, -1), 0);
    empty_pipe(p[0], out, &out_len, sizeof out);
    CHECK(out_len == LONG_LINE && memcmp(out, text, out_len) == 0);
    close(p[0]);
}

struct slow_reader {
    int fd, delay_ms;
    char *acc;
    size_t len, cap;
};

/* Starts reading after delay_ms, then reads until the pipe's writer closes. */
static void *read_later(void *arg)
{
    struct slow_reader *r = arg;
    usleep((useconds_t)r->delay_ms * 1000);
    int fl = fcntl(r->fd, F_GETFL);
    fcntl(r->fd, F_SETFL, fl & ~O_NONBLOCK);
    ssize_t n;
    while (r->len < r->cap && (n = read(r->fd, r->acc + r->len, r->cap - r->len)) > 0)
        r->len += (size_t)n;
    return NULL;
}

TEST(a_full_pipe_is_waited_for_while_its_reader_reads)
{
    int p[2];
    if (!CHECK(pipe2(p, O_CLOEXEC) == 0) || !CHECK(fcntl(p[1], F_SETPIPE_SZ, 4096) >= 0))
        return;
    static struct alog_file f;
    static char text[200 * LINE], out[200 * LINE];
    alog_file_init(&f, p[1], -1);
    struct slow_reader r = {.fd = p[0], .delay_ms = 100, .acc = out, .cap = sizeof out};
    pthread_t t;
    if (!CHECK(pthread_create(&t, NULL, read_later, &r) == 0))
        return;
    size_t n = make_lines(text, 0, 200); /* 10000 bytes: more than the pipe holds */
    CHECK_EQ_U64(alog_file_write(&f, text, n), 0);
    CHECK_EQ_INT(f.error, 0);
    CHECK_EQ_U64(alog_file_switch(&f, -1), 0); /* closes the writer: the reader ends */
    pthread_join(t, NULL);
    CHECK(r.len == n && memcmp(out, text, n) == 0);
    close(p[0]);
}

TEST(a_pipe_nobody_reads_costs_one_bounded_wait_then_none)
{
    int p[2];
    if (!CHECK(pipe2(p, O_CLOEXEC) == 0) || !CHECK(fcntl(p[1], F_SETPIPE_SZ, 4096) >= 0))
        return;
    static struct alog_file f;
    static char text[200 * LINE];
    alog_file_init(&f, p[1], -1);
    size_t n = make_lines(text, 0, 200);
    int64_t t0 = clock_fresh_us();
    CHECK_EQ_U64(alog_file_write(&f, text, n), 200 - 81);
    int64_t waited = clock_fresh_us() - t0;
    CHECK(waited >= (ALOG_STALL_MS - 50) * 1000LL);
    CHECK(waited < (ALOG_STALL_MS + 2000) * 1000LL);
    CHECK(f.stalled);
    /* stalled: the next batch is counted at once, not waited for again */
    t0 = clock_fresh_us();
    CHECK_EQ_U64(alog_file_write(&f, text, n), 200);
    CHECK(clock_fresh_us() - t0 < ALOG_STALL_MS * 1000LL / 2);
    /* read again: whole writes; no longer stalled */
    static char out[200 * LINE];
    size_t out_len = 0;
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    empty_pipe(p[0], out, &out_len, sizeof out);
    CHECK_EQ_U64(alog_file_write(&f, text, 10 * LINE), 0);
    CHECK(!f.stalled);
    alog_file_switch(&f, -1);
    close(p[0]);
}

TEST(a_readable_wake_fd_ends_the_wait_at_once_without_stalling)
{
    int p[2];
    if (!CHECK(pipe2(p, O_CLOEXEC) == 0) || !CHECK(fcntl(p[1], F_SETPIPE_SZ, 4096) >= 0))
        return;
    int wake = eventfd(0, EFD_CLOEXEC);
    static struct alog_file f;
    static char text[200 * LINE];
    alog_file_init(&f, p[1], wake);
    uint64_t one = 1;
    CHECK(write(wake, &one, sizeof one) == sizeof one); /* a signal is waiting */
    int64_t t0 = clock_fresh_us();
    CHECK_EQ_U64(alog_file_write(&f, text, make_lines(text, 0, 200)), 200 - 81);
    CHECK(clock_fresh_us() - t0 < ALOG_STALL_MS * 1000LL / 2);
    CHECK(!f.stalled); /* busy, not stalled: the next batch waits again */
    alog_file_switch(&f, -1);
    close(p[0]);
    close(wake);
}

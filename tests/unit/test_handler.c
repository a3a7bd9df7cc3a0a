/* http_handle on a real docroot: the directory redirect's Location (built
 * from the normalised path, never the raw target) and the status page's
 * access bit.
 *
 * Requests go through http_parse_request first, as in a driver, and the
 * head buffer is a heap block of exactly the size a driver guarantees, so
 * under ASan a write past it is a crash. */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/clock.h"
#include "http/handler.h"

#define MAXH 8192
#define LONG_DEPTH 16
#define LONG_NAME 248

static char g_root[] = "/tmp/herd-unit-handler-XXXXXX";
static struct filecache *g_fc;
static struct http_config g_cfg = {
    .max_header_size = MAXH, .max_body_size = 1 << 20, .keepalive_requests = 100,
    .status_path = "/herd-status",
};

static void mkdir_in(const char *rel)
{
    char p[5000];
    snprintf(p, sizeof p, "%s/%s", g_root, rel);
    if (mkdir(p, 0755) < 0)
        perror(p);
}

/* 16 nested directories of 248 '{' each: a 3984-byte path, near the
 * longest the file cache looks up (4000), and every byte of it needs
 * escaping in a Location. */
static void make_long_dirs(void)
{
    char name[LONG_NAME + 1];
    memset(name, '{', LONG_NAME);
    name[LONG_NAME] = '\0';
    int fd = open(g_root, O_PATH | O_DIRECTORY);
    for (int i = 0; i < LONG_DEPTH; i++) {
        mkdirat(fd, name, 0755);
        int next = openat(fd, name, O_PATH | O_DIRECTORY);
        close(fd);
        fd = next;
    }
    close(fd);
}

static struct filecache *fc(void)
{
    if (g_fc)
        return g_fc;
    if (!mkdtemp(g_root)) {
        perror("mkdtemp");
        exit(2);
    }
    mkdir_in("about");
    mkdir_in("b");
    mkdir_in("x");
    mkdir_in("evil");
    mkdir_in("\\evil");
    mkdir_in("a\r\nSet-Cookie: x=1");
    mkdir_in("sp ace%");
    make_long_dirs();
    struct filecache_limits lim = {.max_entries = 16, .max_inline_size = 1024,
                                   .max_inline_total = 1 << 20};
    g_fc = fc_create(g_root, &lim);
    clock_update();
    return g_fc;
}

static size_t fake_status(void *arg, int format, char *buf, size_t cap)
{
    (void)arg;
    (void)format;
    return (size_t)snprintf(buf, cap, "{\"ok\":1}");
}

struct result {
    int status;            /* 0: the parser refused the request (its error in perr) */
    int perr;
    char head[16384];
    char location[16384];  /* "" when none */
    int has_location;
};

/* Parses and handles one request; the response head lands in r. */
static void run(const char *in, size_t len, int status_ok, struct result *r)
{
    memset(r, 0, sizeof *r);
    char *buf = malloc(len);
    memcpy(buf, in, len);
    struct http_request req;
    struct http_ctx ctx = {&g_cfg, fc(), fake_status, NULL};
    size_t cap = HTTP_HEAD_RESERVE + HTTP_STATUS_MAX + MAXH;
    struct http_out out = {malloc(cap), 0, cap};
    struct http_plan plan;
    int n = http_parse_request(buf, len, MAXH, &req);
    if (n < 0) {
        r->perr = req.error;
    } else {
        http_handle(&ctx, &req, 1, status_ok, &out, &plan);
        r->status = plan.status;
        size_t hl = plan.head_len < sizeof r->head - 1 ? plan.head_len : sizeof r->head - 1;
        memcpy(r->head, out.buf + plan.head_off, hl);
        const char *l = strstr(r->head, "\r\nLocation: ");
        if (l) {
            l += 12;
            const char *e = strstr(l, "\r\n");
            r->has_location = 1;
            memcpy(r->location, l, (size_t)(e - l));
        }
        if (plan.file)
            fc_release(plan.file);
    }
    free(out.buf);
    free(buf);
}

static void get(const char *target, struct result *r)
{
    char req[8192];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: h\r\n\r\n", target);
    run(req, (size_t)n, 0, r);
}

/* Every Location must stay on this host and its path hold no dot segment
 * or raw control byte (the query is the client's, as sent). */
static int location_safe(const char *loc)
{
    if (loc[0] != '/' || loc[1] == '/' || loc[1] == '\\')
        return 0;
    char path[sizeof ((struct result *)0)->location];
    snprintf(path, sizeof path, "%.*s", (int)strcspn(loc, "?"), loc);
    if (strstr(path, "/./") || strstr(path, "/../"))
        return 0;
    for (const char *p = loc; *p; p++)
        if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f || *p == '\\')
            return 0;
    return 1;
}

TEST(redirect_uses_normalised_path)
{
    static const struct {
        const char *target, *location;
    } cases[] = {
        {"//evil.example/../about", "/about/"},
        {"//evil.example/..//about", "/about/"},
        {"/%2F%2Fevil", "/evil/"},
        {"/%2f%2fevil.example/%2e%2e/about", "/about/"},
        {"/%5Cevil", "/%5Cevil/"},
        {"/./x", "/x/"},
        {"/a/../b", "/b/"},
        {"/b/.//../about", "/about/"},
        {"/b?x=1&y=/a/../b", "/b/?x=1&y=/a/../b"}, /* the query is kept as sent */
        {"/b?", "/b/"},
        {"/sp%20ace%25", "/sp%20ace%25/"},
        {"/a%0D%0ASet-Cookie:%20x=1", "/a%0D%0ASet-Cookie:%20x=1/"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct result r;
        get(cases[i].target, &r);
        int ok = CHECK_EQ_INT(r.status, 301);
        ok &= CHECK(strcmp(r.location, cases[i].location) == 0);
        ok &= CHECK(location_safe(r.location));
        if (!ok)
            UNIT_NOTE("GET %s -> %d Location \"%s\", want \"%s\"", cases[i].target, r.status,
                      r.location, cases[i].location);
    }
}

TEST(redirect_never_injects_a_header)
{
    struct result r;
    get("/a%0D%0ASet-Cookie:%20x=1", &r);
    CHECK_EQ_INT(r.status, 301);
    CHECK(strstr(r.head, "\r\nSet-Cookie") == NULL);
    CHECK(strchr(r.location, '\r') == NULL && strchr(r.location, '\n') == NULL);
    /* a lone CR or LF, and NUL, which is refused before any lookup */
    get("/a%0Dx", &r);
    CHECK_EQ_INT(r.status, 404);
    CHECK(!r.has_location);
    get("/b%00", &r);
    CHECK_EQ_INT(r.status, 400);
    CHECK(!r.has_location);
}

TEST(no_redirect_for_other_answers)
{
    struct result r;
    /* with its slash: a directory without an index is 403, no Location */
    get("/%2F%2Fevil/", &r);
    CHECK_EQ_INT(r.status, 403);
    CHECK(!r.has_location);
    get("//evil.example/", &r);
    CHECK_EQ_INT(r.status, 404);
    CHECK(!r.has_location);
    /* a raw backslash is not a target character at all */
    get("/\\evil", &r);
    CHECK_EQ_INT(r.status, 0);
    CHECK_EQ_INT(r.perr, 400);
    /* above the root */
    get("//evil.example/../../about", &r);
    CHECK_EQ_INT(r.status, 400);
    CHECK(!r.has_location);
}

TEST(redirect_head_has_no_body)
{
    static const char in[] = "HEAD //evil.example/../about?q HTTP/1.1\r\nHost: h\r\n\r\n";
    struct result r;
    run(in, sizeof in - 1, 0, &r);
    CHECK_EQ_INT(r.status, 301);
    CHECK(strcmp(r.location, "/about/?q") == 0);
}

/* A directory path near the longest (3984 bytes, all escaped: a 12 KB
 * Location) fits the head buffer a driver guarantees. */
TEST(redirect_long_path)
{
    char target[LONG_DEPTH * (LONG_NAME + 1) + 1], want[LONG_DEPTH * (3 * LONG_NAME + 1) + 2];
    size_t t = 0, w = 0;
    for (int i = 0; i < LONG_DEPTH; i++) {
        target[t++] = '/';
        want[w++] = '/';
        for (int k = 0; k < LONG_NAME; k++) {
            target[t++] = '{';
            memcpy(want + w, "%7B", 3);
            w += 3;
        }
    }
    target[t] = '\0';
    want[w++] = '/';
    want[w] = '\0';
    struct result r;
    get(target, &r);
    CHECK_EQ_INT(r.status, 301);
    CHECK_EQ_INT(strlen(r.location), w);
    CHECK(strcmp(r.location, want) == 0);
    /* 120 more bytes are longer than any path the handler takes: longer
     * than any file's name too, so no file is found */
    char longer[sizeof target + 128];
    snprintf(longer, sizeof longer, "%s/%0120d", target, 0);
    get(longer, &r);
    CHECK_EQ_INT(r.status, 404);
}

TEST(status_page_needs_the_bit)
{
    static const char in[] = "GET /herd-status HTTP/1.1\r\nHost: h\r\n\r\n";
    struct result r;
    run(in, sizeof in - 1, 1, &r);
    CHECK_EQ_INT(r.status, 200);
    run(in, sizeof in - 1, 0, &r);
    CHECK_EQ_INT(r.status, 403);
    CHECK(strstr(r.head, "Content-Length: ") != NULL);
    static const char head[] = "HEAD /herd-status?format=table HTTP/1.1\r\nHost: h\r\n\r\n";
    run(head, sizeof head - 1, 0, &r);
    CHECK_EQ_INT(r.status, 403);
    /* other paths do not care */
    get("/about", &r);
    CHECK_EQ_INT(r.status, 301);
}

/* Out of fds when a cached file is due to be looked at again: the entry
 * holds the file open, so it is served (and looked at on a later request),
 * not dropped for a 503. */
TEST(cached_file_served_when_out_of_fds)
{
    char p[256];
    snprintf(p, sizeof p, "%s/cached.txt", g_root);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0 && write(fd, "cached\n", 7) == 7);
    close(fd);
    struct fc_entry *e, *again;
    time_t t = 1000;
    if (!CHECK_EQ_INT(fc_lookup(fc(), "cached.txt", 10, t, &e), 0))
        return;
    fc_release(e);
    struct rlimit old, none;
    getrlimit(RLIMIT_NOFILE, &old);
    none = old;
    none.rlim_cur = 3; /* stdin, stdout, stderr: nothing more opens */
    setrlimit(RLIMIT_NOFILE, &none);
    int rc = fc_lookup(fc(), "cached.txt", 10, t + 5, &again);
    setrlimit(RLIMIT_NOFILE, &old);
    CHECK_EQ_INT(rc, 0);
    if (rc == 0) {
        CHECK(again == e && again->size == 7);
        fc_release(again);
    }
    /* with fds again, the look happens and finds it unchanged */
    CHECK_EQ_INT(fc_lookup(fc(), "cached.txt", 10, t + 6, &again), 0);
    fc_release(again);
}

/* Whether this process holds path open (a deleted file's link in
 * /proc/self/fd reads "PATH (deleted)"). */
static int holds_open(const char *path)
{
    char link[64], target[512];
    size_t plen = strlen(path);
    for (int fd = 0; fd < 1024; fd++) {
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n >= (ssize_t)plen && memcmp(target, path, plen) == 0)
            return 1;
    }
    return 0;
}

/* A file deleted from the docroot and not asked for again is closed once
 * it has gone unused for a while (nginx's open_file_cache inactive), so
 * its disk space comes back: the cache held it until the same name was
 * asked for again or 1024 other files pushed it out. */
TEST(deleted_file_closed_when_unused)
{
    char big[256], other[256];
    snprintf(big, sizeof big, "%s/gone.iso", g_root);
    snprintf(other, sizeof other, "%s/other.txt", g_root);
    char data[4096] = {0}; /* past max_inline_size: the entry holds an fd */
    int fd = open(big, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0 && write(fd, data, sizeof data) == (ssize_t)sizeof data);
    close(fd);
    fd = open(other, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0 && write(fd, "o", 1) == 1);
    close(fd);
    struct fc_entry *e;
    time_t t = 50000;
    if (!CHECK_EQ_INT(fc_lookup(fc(), "gone.iso", 8, t, &e), 0))
        return;
    CHECK(e->fd >= 0);
    fc_release(e);
    unlink(big);
    CHECK(fc_lookup(fc(), "other.txt", 9, t + 1, &e) == 0 && (fc_release(e), 1));
    CHECK(holds_open(big)); /* just used: kept */
    /* later requests, none for it */
    for (time_t now = t + 2; now <= t + 30; now++) {
        CHECK(fc_lookup(fc(), "other.txt", 9, now, &e) == 0);
        fc_release(e);
    }
    CHECK(!holds_open(big));
    /* the file asked for every second stays cached, served without a reopen */
    struct fc_entry *again;
    CHECK_EQ_INT(fc_lookup(fc(), "other.txt", 9, t + 30, &again), 0);
    CHECK(again == e);
    fc_release(again);
}

/* A small file rewritten in place at the same size with its mtime set
 * back (cp -p, tar) is read again: its copy in memory was served stale
 * for as long as it was asked for. */
TEST(rewrite_with_mtime_set_back_is_seen)
{
    char p[256];
    snprintf(p, sizeof p, "%s/version.txt", g_root);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0 && write(fd, "1.2.3\n", 6) == 6);
    close(fd);
    struct stat before;
    CHECK(stat(p, &before) == 0);
    struct fc_entry *e;
    time_t t = 60000;
    if (!CHECK_EQ_INT(fc_lookup(fc(), "version.txt", 11, t, &e), 0))
        return;
    CHECK(e->data && memcmp(e->data, "1.2.3\n", 6) == 0);
    fc_release(e);
    fd = open(p, O_WRONLY);
    CHECK(fd >= 0 && pwrite(fd, "1.2.4\n", 6, 0) == 6);
    struct timespec times[2] = {before.st_atim, before.st_mtim};
    CHECK(futimens(fd, times) == 0);
    close(fd);
    if (!CHECK_EQ_INT(fc_lookup(fc(), "version.txt", 11, t + 1, &e), 0))
        return;
    CHECK(e->data && memcmp(e->data, "1.2.4\n", 6) == 0);
    fc_release(e);
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(p);
}

/* A FIFO and a unix socket are both neither file nor directory: ENODEV
 * (403 when asked for by name). The socket was ENXIO, the code open gives
 * it, and a 404 where the FIFO was a 403. */
TEST(fifo_and_socket_are_enodev)
{
    char p[256];
    snprintf(p, sizeof p, "%s/pipe", g_root);
    CHECK_EQ_INT(mkfifo(p, 0644), 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s/sock", g_root);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK(s >= 0 && bind(s, (struct sockaddr *)&sa, sizeof sa) == 0);
    close(s);
    struct fc_entry *e;
    CHECK_EQ_INT(fc_lookup(fc(), "pipe", 4, clock_wall(), &e), -ENODEV);
    CHECK_EQ_INT(fc_lookup(fc(), "sock", 4, clock_wall(), &e), -ENODEV);
}

TEST(zz_cleanup)
{
    if (g_fc)
        fc_destroy(g_fc);
    g_fc = NULL;
    CHECK_EQ_INT(nftw(g_root, rm_one, 16, FTW_DEPTH | FTW_PHYS), 0);
}

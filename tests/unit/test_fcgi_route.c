/* Which script a FastCGI request runs (http/fcgi_route.c), on a real
 * docroot: the script itself, PATH_INFO split only at an existing script
 * (so /uploads/evil.jpg/x.php runs nothing), the directory index, the
 * front-controller fallback for what does not exist, and the per-second
 * memory of what the file system said (a script removed or added shows
 * from the next wall second on, as static files do). */
#include "unit.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "http/fcgi_route.h"

#define CHECK_EQ_STR(got, lit)                                                \
    __extension__({                                                           \
        const char *got_ = (got);                                             \
        CHECK_STR(got_, strlen(got_), lit);                                   \
    })

static char root[64];
static int root_fd = -1;
static struct proxy_route routes[1] = {{.prefix = ".php", .fastcgi = 1, .suffix = 1}};
static struct fcgi_kinds kinds;

static void put(const char *rel)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0);
    close(fd);
}

static void dir(const char *rel)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    CHECK(mkdir(p, 0755) == 0);
}

static void gone(const char *rel)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    CHECK(unlink(p) == 0);
}

static void setup(void)
{
    if (root_fd >= 0)
        return;
    snprintf(root, sizeof root, "/tmp/herd-fcgi-route-XXXXXX");
    CHECK(mkdtemp(root) != NULL);
    dir("app");
    dir("uploads");
    dir("docs");
    dir("dir.php");
    put("index.php");
    put("app/x.php");
    put("uploads/evil.jpg");
    put("docs/readme.txt");
    root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    CHECK(root_fd >= 0);
}

static struct fcgi_rules rules(const char *fallback, struct fcgi_kinds *k, time_t now)
{
    setup();
    return (struct fcgi_rules){routes, 1, "index.php", fallback, root_fd, k, now};
}

/* The script fcgi_resolve picks for path ("" for none) and its PATH_INFO. */
static const char *resolve(const struct fcgi_rules *r, const char *path, char *info)
{
    static struct fcgi_target t;
    info[0] = 0;
    if (fcgi_resolve(r, path, strlen(path), &t) < 0)
        return "";
    memcpy(info, path + t.info_off, t.info_len);
    info[t.info_len] = 0;
    return t.script;
}

TEST(scripts_path_info_and_index)
{
    struct fcgi_rules r = rules("", NULL, 0);
    char info[256];
    CHECK_EQ_STR(resolve(&r, "/app/x.php", info), "/app/x.php");
    CHECK_EQ_STR(info, "");
    CHECK_EQ_STR(resolve(&r, "/app/x.php/more/path", info), "/app/x.php");
    CHECK_EQ_STR(info, "/more/path");
    CHECK_EQ_STR(resolve(&r, "/", info), "/index.php");
    CHECK_EQ_STR(resolve(&r, "/app/", info), ""); /* no app/index.php */
    CHECK_EQ_STR(resolve(&r, "/app/missing.php", info), "");
    CHECK_EQ_STR(resolve(&r, "/dir.php", info), ""); /* a directory is no script */
}

TEST(path_info_never_runs_what_is_not_a_script)
{
    struct fcgi_rules r = rules("/index.php", NULL, 0);
    char info[256];
    /* evil.jpg exists but is no script; x.php does not exist: with a
     * fallback it is the front controller's, never evil.jpg's */
    CHECK_EQ_STR(resolve(&r, "/uploads/evil.jpg/x.php", info), "/index.php");
    CHECK_EQ_STR(info, ""); /* the fallback gets no PATH_INFO */
    r = rules("", NULL, 0);
    CHECK_EQ_STR(resolve(&r, "/uploads/evil.jpg/x.php", info), "");
    CHECK_EQ_STR(resolve(&r, "/../index.php", info), "");
}

TEST(fallback_takes_only_what_does_not_exist)
{
    struct fcgi_rules r = rules("/index.php", NULL, 0);
    char info[256];
    CHECK_EQ_STR(resolve(&r, "/blog/2026/hello", info), "/index.php");
    CHECK_EQ_STR(info, "");
    CHECK_EQ_STR(resolve(&r, "/docs/readme.txt", info), ""); /* a file: static */
    CHECK_EQ_STR(resolve(&r, "/docs", info), "");            /* a directory: static */
}

TEST(what_the_file_system_said_holds_for_its_second)
{
    struct fcgi_rules r = rules("/index.php", &kinds, 1000);
    char info[256];
    put("app/new.php");
    CHECK_EQ_STR(resolve(&r, "/app/new.php", info), "/app/new.php");
    CHECK_EQ_STR(resolve(&r, "/app/later.php", info), "/index.php");
    gone("app/new.php");
    put("app/later.php");
    /* the same second: the answers stand */
    CHECK_EQ_STR(resolve(&r, "/app/new.php", info), "/app/new.php");
    CHECK_EQ_STR(resolve(&r, "/app/later.php", info), "/index.php");
    /* the next second asks again */
    r.now = 1001;
    CHECK_EQ_STR(resolve(&r, "/app/new.php", info), "/index.php");
    CHECK_EQ_STR(resolve(&r, "/app/later.php", info), "/app/later.php");
    /* without a clock (0) nothing is kept */
    r.now = 0;
    gone("app/later.php");
    CHECK_EQ_STR(resolve(&r, "/app/later.php", info), "/index.php");
}

TEST(paths_that_share_a_slot_are_told_apart)
{
    struct fcgi_rules r = rules("", &kinds, 2000);
    char info[256], p[64];
    /* more paths than slots: every answer still matches its own path */
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < 3 * FCGI_KINDS; i++) {
            snprintf(p, sizeof p, "/app/n%d.php", i);
            CHECK_EQ_STR(resolve(&r, p, info), "");
            CHECK_EQ_STR(resolve(&r, "/app/x.php", info), "/app/x.php");
        }
    /* a path longer than a slot holds is asked every time */
    char longp[FCGI_KIND_PATH + 40];
    memset(longp, 'a', sizeof longp);
    memcpy(longp, "/app/", 5);
    memcpy(longp + sizeof longp - 5, ".php", 5);
    CHECK_EQ_STR(resolve(&r, longp, info), "");
}

TEST(cleanup)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    CHECK(system(cmd) == 0);
    close(root_fd);
}

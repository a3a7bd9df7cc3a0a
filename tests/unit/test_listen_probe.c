/* net/listen: the probe that keeps a reuseport group from joining a
 * listening group of another server on the same address, and proc/
 * config_paths: relative paths in a config file start at its folder. */
#include "unit.h"

#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/listen.h"
#include "proc/config_paths.h"

static struct listen_addr parse(const char *text)
{
    struct listen_addr a;
    char err[160];
    if (listen_parse(text, &a, err, sizeof err) < 0) {
        fprintf(stderr, "%s\n", err);
        exit(2);
    }
    return a;
}

static int port_of(const struct listen_addr *a)
{
    return ntohs(((const struct sockaddr_in *)&a->ss)->sin_port);
}

TEST(probe_holds_port_zero_and_lets_the_group_bind_next_to_it)
{
    struct listen_addr a = parse("127.0.0.1:0");
    int probe = listen_probe(&a);
    if (!CHECK(probe >= 0))
        return;
    CHECK(port_of(&a) != 0);
    int g1 = listen_open(&a, 16, 1), g2 = listen_open(&a, 16, 1);
    CHECK(g1 >= 0 && g2 >= 0);
    close(probe);
    /* a second server: its probe meets the listening group */
    struct listen_addr b = parse("127.0.0.1:0");
    memcpy(&b.ss, &a.ss, sizeof a.ss);
    b.len = a.len;
    CHECK_EQ_INT(listen_probe(&b), -EADDRINUSE);
    /* what the probe prevents: a reuseport socket joins the group */
    int intruder = listen_open(&b, 16, 1);
    CHECK(intruder >= 0);
    close(intruder);
    close(g1);
    close(g2);
}

TEST(probe_meets_a_plain_listener_too)
{
    struct listen_addr a = parse("127.0.0.1:0");
    int fd = listen_open(&a, 16, 0);
    if (!CHECK(fd >= 0))
        return;
    struct listen_addr b = a;
    CHECK_EQ_INT(listen_probe(&b), -EADDRINUSE);
    close(fd);
    int probe = listen_probe(&b);   /* free again */
    CHECK(probe >= 0);
    close(probe);
}

TEST(config_paths_start_at_the_files_folder)
{
    char out[PATH_MAX + 64], err[256], dir[PATH_MAX];
    char tmpl[] = "/tmp/herd-unit-XXXXXX";
    if (!CHECK(mkdtemp(tmpl) != NULL) || !CHECK(realpath(tmpl, dir) != NULL))
        return;
    char conf[PATH_MAX + 16], want[PATH_MAX + 32];
    snprintf(conf, sizeof conf, "%s/herd.conf", dir);
    FILE *f = fopen(conf, "w");
    if (!CHECK(f != NULL))
        return;
    fclose(f);
    CHECK_EQ_INT(config_path_resolve(conf, "docroot", "www", out, sizeof out, err, sizeof err), 0);
    snprintf(want, sizeof want, "%s/www", dir);
    CHECK(!strcmp(out, want));
    CHECK_EQ_INT(config_path_resolve(conf, "pid-file", "../run/h.pid", out, sizeof out, err,
                                     sizeof err), 0);
    snprintf(want, sizeof want, "%s/../run/h.pid", dir);
    CHECK(!strcmp(out, want));
    config_path_resolve(conf, "access-log", "/var/log/a.log", out, sizeof out, err, sizeof err);
    CHECK_STR(out, strlen(out), "/var/log/a.log");
    config_path_resolve(conf, "listen", "unix:rel.sock", out, sizeof out, err, sizeof err);
    CHECK_STR(out, strlen(out), "unix:rel.sock");
    config_path_resolve(conf, "serve-dotfiles", NULL, out, sizeof out, err, sizeof err);
    CHECK_STR(out, strlen(out), "");
    char small[8];
    CHECK_EQ_INT(config_path_resolve(conf, "docroot", "www", small, sizeof small, err,
                                     sizeof err), -1);
    unlink(conf);
    rmdir(dir);
}

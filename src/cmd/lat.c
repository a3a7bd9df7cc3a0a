/* herd lat: the echo server (-s), the ping-pong client, and --spawn, which
 * forks the server itself so both ends can be placed on chosen CPUs. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/cpus.h"
#include "bench/hdr.h"
#include "bench/lat.h"
#include "bench/target.h"
#include "cmd/cmd.h"
#include "cmd/flags.h"
#include "core/signals.h"
#include "net/listen.h"

#define LAT_PORT 31234
#define LAT_PORT_STR "31234"
#define MAX_SIZES 64

static const char lat_usage[] =
    "usage: herd lat -s [--listen ADDR] [--cpus CPU]\n"
    "       herd lat HOST[:PORT] | [V6]:PORT | unix:/PATH [options]\n"
    "       herd lat --spawn [ADDR] [options]\n"
    "\n"
    "Round-trip latency of SIZE-byte messages echoed by a server (the lat_tcp\n"
    "idea), in microseconds: mean, p50, p99, min and max per size. Fails with the\n"
    "reason, and prints no figure, when no server answers or an echo is cut short.\n"
    "\n"
    "  -s, --server          run the echo server\n"
    "      --listen ADDR     server address: HOST:PORT or unix:/PATH\n"
    "                        (default 127.0.0.1:" LAT_PORT_STR "; port 0 picks a free one)\n"
    "  -m, --size LIST       message sizes, e.g. 1,64,1k,16k,64k (default 1)\n"
    "  -N, --rounds N        timed round trips per size (default 10000)\n"
    "      --warmup N        untimed round trips before them (default N/10, at most 1000)\n"
    "      --cpus C[,S]      pin the client to CPU C; with --spawn the server to S\n"
    "                        (the server: -s --cpus S pins it)\n"
    "      --spawn           fork the server here (on ADDR, default 127.0.0.1:0)\n"
    "      --timeout DUR     connect and per-round timeout (default 5s)\n"
    "  -h, --help            this text\n"
    "\n"
    "The default port is " LAT_PORT_STR ". Exit status: 0 when every size was measured,\n"
    "1 when no server answers or a transfer fails, 2 for bad usage.\n";

enum opt { O_SERVER, O_LISTEN, O_SIZE, O_ROUNDS, O_WARMUP, O_CPUS, O_SPAWN, O_TIMEOUT, O_HELP };

static const struct flag_opt opts[] = {
    {"-s", O_SERVER, 0},    {"--server", O_SERVER, 0},
    {"--listen", O_LISTEN, 1},
    {"-m", O_SIZE, 1},      {"--size", O_SIZE, 1},
    {"-N", O_ROUNDS, 1},    {"--rounds", O_ROUNDS, 1},
    {"--warmup", O_WARMUP, 1},
    {"--cpus", O_CPUS, 1},
    {"--spawn", O_SPAWN, 0},
    {"--timeout", O_TIMEOUT, 1},
    {"-h", O_HELP, 0},      {"--help", O_HELP, 0},
};

struct lat_flags {
    int server, spawn, help;
    const char *listen, *addr;
    size_t sizes[MAX_SIZES];
    int nsizes;
    uint64_t rounds, warmup;
    int warmup_set;
    int cpus[CPUS_MAX];
    int ncpus;
    int64_t timeout_ms;
};

static int usage_error(const char *fmt, const char *a)
{
    return flag_usage_error("lat", fmt, a);
}

static int bad_value(const char *opt, const char *v)
{
    return flag_bad_value("lat", opt, v);
}

static int parse_sizes(const char *v, struct lat_flags *f)
{
    char buf[512];
    if (strlen(v) >= sizeof buf)
        return -1;
    strcpy(buf, v);
    f->nsizes = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        uint64_t n;
        if (f->nsizes == MAX_SIZES || flag_size(tok, &n) < 0 || n < 1 || n > (16u << 20))
            return -1;
        f->sizes[f->nsizes++] = (size_t)n;
    }
    return f->nsizes ? 0 : -1;
}

/* Returns -1 when the flags are fine, else an exit status. */
static int parse_flags(int argc, char **argv, struct lat_flags *f)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (arg[0] != '-') {
            if (f->addr)
                return usage_error("one address only, got '%s' too", arg);
            f->addr = arg;
            continue;
        }
        const char *v;
        int k = flag_match(opts, sizeof opts / sizeof opts[0], argc, argv, &i, &v);
        if (k == FLAG_UNKNOWN)
            return usage_error("unknown option '%s'", arg);
        if (k == FLAG_NO_VALUE)
            return usage_error("%s needs a value", arg);
        const char *name = opts[k].name;
        switch (opts[k].kind) {
        case O_SERVER:
            f->server = 1;
            break;
        case O_LISTEN:
            f->listen = v;
            break;
        case O_SIZE:
            if (parse_sizes(v, f) < 0)
                return bad_value(name, v);
            break;
        case O_ROUNDS:
            if (flag_count(v, 1, 1000000000, &f->rounds) < 0)
                return bad_value(name, v);
            break;
        case O_WARMUP:
            if (flag_count(v, 0, 1000000000, &f->warmup) < 0)
                return bad_value(name, v);
            f->warmup_set = 1;
            break;
        case O_CPUS:
            f->ncpus = cpus_parse(v, f->cpus, CPUS_MAX);
            if (f->ncpus <= 0 || f->ncpus > 2)
                return bad_value(name, v);
            break;
        case O_SPAWN:
            f->spawn = 1;
            break;
        case O_TIMEOUT:
            if (flag_duration_ms(v, &f->timeout_ms) < 0 || f->timeout_ms <= 0 ||
                f->timeout_ms > 3600000)
                return bad_value(name, v);
            break;
        case O_HELP:
            f->help = 1;
            break;
        }
    }
    if (f->help)
        return -1;
    if (f->server && (f->addr || f->spawn))
        return usage_error("-s takes --listen ADDR, not an address%s", "");
    if (!f->server && f->listen)
        return usage_error("--listen is for the server (-s)%s", "");
    if (!f->server && !f->spawn && !f->addr)
        return usage_error("no server address (HOST[:PORT] or unix:/PATH), or -s for the server%s", "");
    if (f->server && f->ncpus > 1)
        return usage_error("the server takes one CPU (--cpus S)%s", "");
    for (int i = 0; i < f->ncpus; i++) {
        cpu_set_t set;
        if (sched_getaffinity(0, sizeof set, &set) == 0 && !CPU_ISSET(f->cpus[i], &set)) {
            fprintf(stderr, "herd lat: CPU %d is not available to this process "
                            "(see herd lat --help)\n", f->cpus[i]);
            return 2;
        }
    }
    return -1;
}

static void describe(const struct listen_addr *a, char *buf, size_t n)
{
    char ip[INET6_ADDRSTRLEN] = "?";
    if (a->family == AF_UNIX) {
        snprintf(buf, n, "unix:%s", ((const struct sockaddr_un *)&a->ss)->sun_path);
    } else if (a->family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)&a->ss;
        inet_ntop(AF_INET, &in->sin_addr, ip, sizeof ip);
        snprintf(buf, n, "%s:%u", ip, ntohs(in->sin_port));
    } else {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&a->ss;
        inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof ip);
        snprintf(buf, n, "[%s]:%u", ip, ntohs(in6->sin6_port));
    }
}

static int open_listener(const char *addr, struct listen_addr *la)
{
    char err[256];
    if (listen_parse(addr, la, err, sizeof err) < 0) {
        fprintf(stderr, "herd lat: %s\n", err);
        return -2;
    }
    int fd = lat_listen(la);
    if (fd < 0) {
        fprintf(stderr, "herd lat: cannot listen on %s: %s\n", addr, strerror(-fd));
        return -1;
    }
    return fd;
}

static int run_server(const struct lat_flags *f)
{
    if (f->ncpus) {
        int e = cpus_pin(f->cpus[0]);
        if (e < 0)
            fprintf(stderr, "herd lat: cannot pin to CPU %d: %s\n", f->cpus[0], strerror(-e));
    }
    int sfd = signals_open();
    if (sfd < 0) {
        fprintf(stderr, "herd lat: signalfd: %s\n", strerror(-sfd));
        return 1;
    }
    struct listen_addr la;
    int lfd = open_listener(f->listen ? f->listen : "127.0.0.1:" LAT_PORT_STR, &la);
    if (lfd < 0) {
        close(sfd);
        return lfd == -2 ? 2 : 1;
    }
    char desc[160];
    describe(&la, desc, sizeof desc);
    fprintf(stderr, "herd lat: echo server listening on %s\n", desc);
    int rc = lat_serve(lfd, sfd);
    if (rc < 0)
        fprintf(stderr, "herd lat: accept: %s\n", strerror(-rc));
    close(lfd);
    listen_cleanup(&la);
    close(sfd);
    return rc < 0 ? 1 : 0;
}

/* The forked server of --spawn: one connection, echoed until it closes. */
static void spawned_server(int lfd, int cpu, pid_t parent, int timeout_ms)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(1);
    if (cpu >= 0)
        cpus_pin(cpu);
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    if (poll(&p, 1, timeout_ms) != 1)
        _exit(1);
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    close(lfd);
    if (fd < 0)
        _exit(1);
    lat_echo(fd);
    _exit(0);
}

static void stop_child(pid_t pid)
{
    for (int i = 0; i < 200; i++) {
        if (waitpid(pid, NULL, WNOHANG) == pid)
            return;
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

static int run_client(struct lat_flags *f)
{
    char err[512];
    struct target t;
    struct listen_addr la;
    pid_t child = -1;
    int spawned_unix = 0;
    if (f->spawn) {
        int lfd = open_listener(f->addr ? f->addr : "127.0.0.1:0", &la);
        if (lfd < 0)
            return lfd == -2 ? 2 : 1;
        spawned_unix = la.family == AF_UNIX;
        /* Before any thread exists: the child is a plain copy. */
        pid_t parent = getpid();
        child = fork();
        if (child < 0) {
            fprintf(stderr, "herd lat: fork: %s\n", strerror(errno));
            close(lfd);
            listen_cleanup(&la);
            return 1;
        }
        if (child == 0)
            spawned_server(lfd, f->ncpus > 1 ? f->cpus[1] : -1, parent, (int)f->timeout_ms);
        close(lfd);
        char desc[160];
        describe(&la, desc, sizeof desc);
        if (target_parse_addr(desc, LAT_PORT, &t, err, sizeof err) < 0) {
            fprintf(stderr, "herd lat: %s\n", err);
            stop_child(child);
            return 1;
        }
    } else {
        int prc = target_parse_addr(f->addr, LAT_PORT, &t, err, sizeof err);
        if (prc < 0) {
            fprintf(stderr, "herd lat: %s%s\n", err, prc == -1 ? " (see herd lat --help)" : "");
            return prc == -1 ? 2 : 1;
        }
    }
    if (f->ncpus) {
        int e = cpus_pin(f->cpus[0]);
        if (e < 0)
            fprintf(stderr, "herd lat: cannot pin to CPU %d: %s\n", f->cpus[0], strerror(-e));
    }
    int rc = 1;
    struct hdr *h = hdr_new();
    int fd = target_connect_wait(&t, (int)f->timeout_ms);
    if (fd < 0) {
        fprintf(stderr, "herd lat: cannot connect to %s: %s%s\n", t.addr, strerror(-fd),
                f->spawn ? "" : " (is `herd lat -s` running there?)");
        goto out;
    }
    /* lat_rounds wants a blocking socket: the first recv of a round waits
     * with SO_RCVTIMEO. */
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    if (!h) {
        fprintf(stderr, "herd lat: out of memory\n");
        goto out;
    }
    uint64_t warmup = f->warmup_set ? f->warmup : (f->rounds / 10 < 1000 ? f->rounds / 10 : 1000);
    printf("herd lat: %s, %llu round trips per size after %llu warm-up", t.addr,
           (unsigned long long)f->rounds, (unsigned long long)warmup);
    if (f->ncpus)
        printf("; client on CPU %d", f->cpus[0]);
    if (f->ncpus > 1 && f->spawn)
        printf(", server on CPU %d", f->cpus[1]);
    else if (f->spawn)
        printf("; server spawned (not pinned)");
    printf("\n");
    if (f->ncpus > 1 && !f->spawn)
        printf("note: only the client is pinned; the server runs where it was started "
               "(herd lat -s --cpus %d there, or use --spawn)\n", f->cpus[1]);
    printf("%10s %10s %10s %10s %10s %10s\n", "bytes", "mean us", "p50 us", "p99 us", "min us",
           "max us");
    fflush(stdout);
    for (int i = 0; i < f->nsizes; i++) {
        hdr_reset(h);
        if (lat_rounds(fd, f->sizes[i], warmup, f->rounds, (int)f->timeout_ms, h, err, sizeof err) < 0) {
            fprintf(stderr, "herd lat: %s\n", err);
            goto out;
        }
        printf("%10zu %10.2f %10.2f %10.2f %10.2f %10.2f\n", f->sizes[i], hdr_mean(h) / 1000.0,
               (double)hdr_percentile(h, 50.0) / 1000.0, (double)hdr_percentile(h, 99.0) / 1000.0,
               (double)hdr_min(h) / 1000.0, (double)hdr_max(h) / 1000.0);
        fflush(stdout);
    }
    rc = 0;
out:
    if (fd >= 0)
        close(fd);
    hdr_free(h);
    if (child > 0)
        stop_child(child);
    if (spawned_unix)
        listen_cleanup(&la);
    return rc;
}

int cmd_lat(int argc, char **argv)
{
    struct lat_flags f = {.rounds = 10000, .timeout_ms = 5000, .nsizes = 1, .sizes = {1}};
    int rc = parse_flags(argc, argv, &f);
    if (rc >= 0)
        return rc;
    if (f.help) {
        fputs(lat_usage, stdout);
        return 0;
    }
    return f.server ? run_server(&f) : run_client(&f);
}

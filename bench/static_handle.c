/* The HTTP cost of a warm static request: http_handle on a warm open-file
 * cache, in process, no sockets. The cached clock does not move, so
 * nothing is revalidated: what is timed is parsing-free handler work
 * (path, cache lookup, sidecar choice, head). Cases: a file without
 * sidecars, a file with sidecars asked for without Accept-Encoding, and
 * its gzip and br variants chosen from a browser-like list.
 * Not a test: prints ns per request. `make bench-static`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "http/handler.h"

#define ROUNDS 2000000L

static void put_file(const char *dir, const char *name, const char *data)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    if (!f || fputs(data, f) < 0 || fclose(f) != 0) {
        perror(p);
        exit(1);
    }
}

static double run(struct http_ctx *ctx, const char *path, const char *ae, unsigned *status)
{
    char raw[512];
    int n = snprintf(raw, sizeof raw,
                     "GET %s HTTP/1.1\r\nHost: x\r\nUser-Agent: bench\r\nAccept: */*\r\n%s%s%s\r\n",
                     path, ae ? "Accept-Encoding: " : "", ae ? ae : "", ae ? "\r\n" : "");
    static struct http_request req;
    if (http_parse_request(raw, (size_t)n, 8192, &req) <= 0)
        return -1;
    static char buf[65536];
    struct http_out out = {buf, 0, sizeof buf};
    struct http_plan plan;
    double best = 1e30;
    for (int pass = 0; pass < 3; pass++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (long i = 0; i < ROUNDS; i++) {
            out.len = 0;
            http_handle(ctx, &req, 1, 1, &out, &plan);
            if (plan.file)
                fc_release(plan.file);
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ns = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) /
                    ROUNDS;
        best = ns < best ? ns : best;
    }
    *status = plan.status;
    return best;
}

int main(void)
{
    char dir[] = "/tmp/herd-bench-static-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    put_file(dir, "plain.txt", "no sidecars\n");
    put_file(dir, "a.css", "body { color: red }\n");
    put_file(dir, "a.css.gz", "gzip bytes");
    put_file(dir, "a.css.br", "br bytes");
    clock_update();
    static struct http_config cfg = {.max_header_size = 8192, .max_body_size = 1 << 20,
                                     .keepalive_requests = 1000000};
    struct filecache_limits lim = {1024, 32 * 1024, 64 << 20};
    struct http_ctx ctx = {&cfg, fc_create(dir, &lim), NULL, NULL};
    static const struct {
        const char *path, *ae;
    } cases[] = {
        {"/plain.txt", NULL},
        {"/plain.txt", "gzip, deflate, br, zstd"},
        {"/a.css", NULL},
        {"/a.css", "gzip"},
        {"/a.css", "gzip, deflate, br, zstd"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        unsigned status = 0;
        double ns = run(&ctx, cases[i].path, cases[i].ae, &status);
        printf("%-11s Accept-Encoding: %-24s %6.1f ns/request (status %u)\n", cases[i].path,
               cases[i].ae ? cases[i].ae : "(none)", ns, status);
    }
    fc_destroy(ctx.fc);
    static const char *const names[] = {"plain.txt", "a.css", "a.css.gz", "a.css.br"};
    for (size_t i = 0; i < 4; i++) {
        char p[256];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
    rmdir(dir);
    return 0;
}

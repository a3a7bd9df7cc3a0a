/* herd status [URL]: the live counters of a running server, fetched from its
 * status page (--status-path) and printed as a table, once or every second. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "cmd/flags.h"
#include "cmd/status_fetch.h"
#include "cmd/status_find.h"
#include "cmd/status_rates.h"

static const char status_usage[] =
    "usage: herd status [URL | --config FILE | --pid-file FILE] [--watch] [--json | --prometheus]\n"
    "                   [--timeout DUR]\n"
    "\n"
    "Prints the counters of a running herd serve started with --status-path.\n"
    "unix:/path.sock:/herd-status reaches a unix-socket listener. Without a URL:\n"
    "  --config FILE    the server's config file: its first listen and status-path\n"
    "                   (and its pid-file, when it sets one)\n"
    "  --pid-file FILE  the TCP port the server with this pid listens on\n"
    "Neither: http://127.0.0.1:8080/herd-status.\n"
    "\n"
    "  --watch        refresh every second with per-second rates (req/s, bytes/s,\n"
    "                 responses/s by class); a plain line per second when stdout\n"
    "                 is not a terminal (Ctrl-C stops)\n"
    "  --json         print the raw JSON\n"
    "  --prometheus   print the Prometheus text format\n"
    "  --timeout DUR  how long one fetch of the page may take, connect to last\n"
    "                 byte (default 5s; with --watch, each one)\n"
    "\n"
    "Exit status: 0 printed; 1 no answer in time, no status page there, or an\n"
    "answer that is cut short, larger than 1 MiB or not herd's (the reason on\n"
    "stderr); 2 bad usage.\n";

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* --watch: on a terminal, the page redrawn with a rates line under it;
 * piped, one plain line of totals and rates per second (or the raw
 * format, separated by a blank line, with --json or --prometheus). Stops
 * with 1 at the first fetch that fails or sample that does not read. */
static int watch_loop(const struct status_target *t, const char *url, const char *fmt,
                      int64_t timeout_ms)
{
    int tty = isatty(STDOUT_FILENO);
    int show_page = tty || strcmp(fmt, "table");
    struct status_sample prev, cur;
    int have_prev = 0;
    for (;;) {
        char err[1200];
        char *json = status_fetch(t, "json", timeout_ms, err, sizeof err);
        char *page = json && show_page ? status_fetch(t, fmt, timeout_ms, err, sizeof err) : NULL;
        if (!json || (show_page && !page)) {
            fprintf(stderr, "herd: %s\n", err);
            free(json);
            return 1;
        }
        const char *bad;
        if (status_sample_parse(json, now_s(), &cur, &bad) < 0) {
            fprintf(stderr, "herd: the status JSON from %s has no usable \"%s\" (missing, "
                            "signed, too large or not a number)\n", url, bad);
            free(json);
            free(page);
            return 1;
        }
        if (tty)
            fputs("\033[H\033[2J", stdout);
        if (page)
            fputs(page, stdout);
        if (!strcmp(fmt, "table"))
            status_rates_print(stdout, have_prev ? &prev : NULL, &cur);
        else
            fputs("\n", stdout);
        fflush(stdout);
        free(json);
        free(page);
        prev = cur;
        have_prev = 1;
        struct timespec ts = {1, 0};
        nanosleep(&ts, NULL);
    }
}

int cmd_status(int argc, char **argv)
{
    const char *url = NULL, *config = NULL, *pid_file = NULL;
    const char *fmt = "table";
    int watch = 0;
    int64_t timeout_ms = 5000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--watch") || !strcmp(argv[i], "-w"))
            watch = 1;
        else if (!strcmp(argv[i], "--json"))
            fmt = "json";
        else if (!strcmp(argv[i], "--prometheus"))
            fmt = "prometheus";
        else if (!strcmp(argv[i], "--config") && i + 1 < argc)
            config = argv[++i];
        else if (!strcmp(argv[i], "--pid-file") && i + 1 < argc)
            pid_file = argv[++i];
        else if (!strcmp(argv[i], "--timeout") && i + 1 < argc) {
            if (flag_duration_ms(argv[++i], &timeout_ms) < 0 || timeout_ms <= 0)
                return flag_bad_value("status", "--timeout", argv[i]);
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(status_usage, stdout);
            return 0;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "herd: unknown option or missing value '%s' (see herd status --help)\n",
                    argv[i]);
            return 2;
        } else {
            url = argv[i];
        }
    }
    char found[1200];
    const char *how = "the URL given";
    if (url && (config || pid_file)) {
        fprintf(stderr, "herd: give a URL or --config/--pid-file, not both\n");
        return 2;
    }
    if (!url) {
        char err[1200];
        if (status_find(config, pid_file, found, sizeof found, err, sizeof err) < 0) {
            fprintf(stderr, "herd: %s\n", err);
            return 1;
        }
        url = found;
        how = config ? "from --config" : pid_file ? "from --pid-file"
                                                  : "the default; no URL, --config or --pid-file given";
    }
    struct status_target t;
    char why[160];
    if (status_target_parse(url, &t, why, sizeof why) < 0) {
        fprintf(stderr, "herd: bad URL '%s': %s (see herd status --help)\n", url, why);
        return 2;
    }
    if (watch)
        return watch_loop(&t, url, fmt, timeout_ms);
    char err[1200];
    char *body = status_fetch(&t, fmt, timeout_ms, err, sizeof err);
    if (!body) {
        fprintf(stderr, "herd: %s (tried %s, %s)\n", err, url, how);
        return 1;
    }
    fputs(body, stdout);
    free(body);
    return 0;
}

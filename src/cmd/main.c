/* herd: one binary, one subcommand per face (like busybox). */
#include <stdio.h>
#include <string.h>

#include "cmd/cmd.h"
#include "core/version.h"

static const char usage[] =
    "usage: herd COMMAND [ARGS]\n"
    "\n"
    "commands:\n"
    "  serve [DOCROOT]   serve static files over HTTP/1.1 (herd serve --help)\n"
    "  reload            HUP to a running server, wait for its answer (herd reload --help)\n"
    "  status [URL]      live counters of a running server (herd status --help)\n"
    "  load URL          HTTP load generator: req/s, HDR latency, --rate (herd load --help)\n"
    "  lat HOST|-s       ping-pong round-trip latency and its echo server (herd lat --help)\n"
    "  lab               compare the models (and other servers) under load (herd lab --help)\n"
    "  spawn -- COMMAND  bind once, run N backends on the socket (herd spawn --help)\n"
    "\n"
    "  herd --version    print the version\n"
    "  herd --help       this text\n";

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage, stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        fputs(usage, stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        puts("herd " HERD_VERSION);
        return 0;
    }
    if (!strcmp(cmd, "serve"))
        return cmd_serve(argc - 1, argv + 1);
    if (!strcmp(cmd, "reload"))
        return cmd_reload(argc - 1, argv + 1);
    if (!strcmp(cmd, "status"))
        return cmd_status(argc - 1, argv + 1);
    if (!strcmp(cmd, "load"))
        return cmd_load(argc - 1, argv + 1);
    if (!strcmp(cmd, "lat"))
        return cmd_lat(argc - 1, argv + 1);
    if (!strcmp(cmd, "lab"))
        return cmd_lab(argc - 1, argv + 1);
    if (!strcmp(cmd, "spawn"))
        return cmd_spawn(argc - 1, argv + 1);
    fprintf(stderr, "herd: unknown command '%s' (see herd --help)\n", cmd);
    return 2;
}

/* herd spawn: flags for proc/spawn. Everything after "--" is the command. */
#include <stdio.h>
#include <string.h>

#include "cmd/cmd.h"
#include "cmd/flags.h"
#include "core/log.h"
#include "net/listen.h"
#include "proc/spawn.h"

static const char spawn_usage[] =
    "usage: herd spawn --listen ADDR [-n N] [options] -- COMMAND [ARGS...]\n"
    "\n"
    "Binds ADDR once and runs N copies of COMMAND that inherit the listening\n"
    "socket, like spawn-fcgi or systemd socket activation: a pool of backends\n"
    "for herd serve's reverse proxy (or any server that accepts on a given fd).\n"
    "\n"
    "  -l, --listen ADDR     HOST:PORT, [V6]:PORT or unix:/PATH (port 0 picks one;\n"
    "                        the address is logged)\n"
    "  -n, --children N      copies of COMMAND to run (default 1)\n"
    "      --fd-style STYLE  stdin: the socket is the child's fd 0 (FastCGI style,\n"
    "                        default); systemd: fd 3 with LISTEN_FDS=1 and\n"
    "                        LISTEN_PID set to the child's pid\n"
    "      --respawn         restart a child that exits (backoff 0.1 s .. 30 s when\n"
    "                        it dies within 1 s of starting; 5 such deaths in a row\n"
    "                        stop herd spawn)\n"
    "      --backlog N       listen backlog (default 511)\n"
    "      --stop-timeout D  after TERM/INT/QUIT, children still running after D\n"
    "                        are killed (default 10s)\n"
    "  -v, --verbose         also log each child's start\n"
    "  -h, --help            this text\n"
    "\n"
    "Signals: TERM and INT stop the children gracefully (TERM is passed on), QUIT\n"
    "is passed on as QUIT; HUP, USR1 and USR2 are passed on to every child.\n"
    "Each child leads its own process group: what it forks gets TERM once the\n"
    "child is gone (KILL after the stop timeout), and herd spawn waits for it;\n"
    "so does a process that left the group (setsid) once its parent is gone\n"
    "(herd spawn is their subreaper). herd spawn exits when none is left.\n"
    "The socket is blocking and the children's signal mask is clean.\n"
    "\n"
    "Exit status: 0 after a stop signal, or when every child exited 0 (without\n"
    "--respawn); 1 when ADDR cannot be bound, COMMAND cannot be run, children\n"
    "die at start, or processes outlive SIGKILL by 5 s; 2 for bad usage.\n";

enum opt { O_LISTEN, O_CHILDREN, O_FD_STYLE, O_RESPAWN, O_BACKLOG, O_STOP_TIMEOUT, O_VERBOSE,
           O_HELP };

static const struct flag_opt opts[] = {
    {"-l", O_LISTEN, 1},        {"--listen", O_LISTEN, 1},
    {"-n", O_CHILDREN, 1},      {"--children", O_CHILDREN, 1},
    {"--fd-style", O_FD_STYLE, 1},
    {"--respawn", O_RESPAWN, 0},
    {"--backlog", O_BACKLOG, 1},
    {"--stop-timeout", O_STOP_TIMEOUT, 1},
    {"-v", O_VERBOSE, 0},       {"--verbose", O_VERBOSE, 0},
    {"-h", O_HELP, 0},          {"--help", O_HELP, 0},
};

static int usage_error(const char *fmt, const char *a)
{
    return flag_usage_error("spawn", fmt, a);
}

/* Returns -1 when the flags are fine, else an exit status. */
static int parse_flags(int argc, char **argv, struct spawn_config *c, int *help)
{
    int i;
    for (i = 1; i < argc && strcmp(argv[i], "--"); i++) {
        const char *v;
        if (argv[i][0] != '-')
            return usage_error("put the command after '--' (got '%s')", argv[i]);
        int k = flag_match(opts, sizeof opts / sizeof opts[0], argc, argv, &i, &v);
        if (k == FLAG_UNKNOWN)
            return usage_error("unknown option '%s'", argv[i]);
        if (k == FLAG_NO_VALUE)
            return usage_error("%s needs a value", argv[i]);
        const char *name = opts[k].name;
        uint64_t n;
        int64_t ms;
        switch (opts[k].kind) {
        case O_LISTEN:
            c->listen = v;
            break;
        case O_CHILDREN:
            if (flag_count(v, 1, SPAWN_MAX_CHILDREN, &n) < 0)
                return flag_bad_value("spawn", name, v);
            c->children = (int)n;
            break;
        case O_FD_STYLE:
            if (!strcmp(v, "stdin"))
                c->fd_style = SPAWN_FD_STDIN;
            else if (!strcmp(v, "systemd"))
                c->fd_style = SPAWN_FD_SYSTEMD;
            else
                return flag_bad_value("spawn", name, v);
            break;
        case O_RESPAWN:
            c->respawn = 1;
            break;
        case O_BACKLOG:
            if (flag_count(v, 1, 65535, &n) < 0)
                return flag_bad_value("spawn", name, v);
            c->backlog = (int)n;
            break;
        case O_STOP_TIMEOUT:
            if (flag_duration_ms(v, &ms) < 0 || ms < 0 || ms > 3600000)
                return flag_bad_value("spawn", name, v);
            c->stop_timeout_ms = ms;
            break;
        case O_VERBOSE:
            log_max_level = LOG_INFO;
            break;
        case O_HELP:
            *help = 1;
            break;
        }
    }
    if (*help)
        return -1;
    if (!c->listen)
        return usage_error("--listen ADDR is required%s", "");
    struct listen_addr a;
    char why[160];
    if (listen_parse(c->listen, &a, why, sizeof why) < 0)
        return usage_error("%s", why);
    if (i + 1 >= argc)
        return usage_error("no command: put it after '--'%s", "");
    c->argv = argv + i + 1;
    return -1;
}

int cmd_spawn(int argc, char **argv)
{
    struct spawn_config c = {
        .children = 1, .fd_style = SPAWN_FD_STDIN, .backlog = 511, .stop_timeout_ms = 10000,
    };
    int help = 0;
    log_max_level = LOG_NOTICE;
    int rc = parse_flags(argc, argv, &c, &help);
    if (rc >= 0)
        return rc;
    if (help) {
        fputs(spawn_usage, stdout);
        return 0;
    }
    return spawn_run(&c);
}

/* herd spawn: bind a socket once and keep N copies of a backend command
 * running on it, as spawn-fcgi does (the socket is the child's fd 0) or as
 * systemd socket activation does (fd 3 with LISTEN_FDS=1 and LISTEN_PID). */
#ifndef HERD_PROC_SPAWN_H
#define HERD_PROC_SPAWN_H

#include <stdint.h>

enum spawn_fd_style { SPAWN_FD_STDIN, SPAWN_FD_SYSTEMD };

struct spawn_config {
    const char *listen;         /* HOST:PORT, [V6]:PORT or unix:/PATH */
    int children;               /* 1 .. SPAWN_MAX_CHILDREN */
    enum spawn_fd_style fd_style;
    int respawn;                /* restart children that die */
    int backlog;
    int64_t stop_timeout_ms;    /* TERM, then KILL after this long */
    char **argv;                /* the command and its arguments */
};

#define SPAWN_MAX_CHILDREN 1024
/* A child dying sooner than this after its start has failed at start. */
#define SPAWN_QUICK_DEATH_MS 1000
/* With --respawn, this many quick deaths in a row in one slot stop herd spawn. */
#define SPAWN_GIVE_UP_AFTER 5
/* A clean exit (status 0) after this long is a child recycling itself
 * (php-cgi after PHP_FCGI_MAX_REQUESTS requests, well within a second
 * when busy), not a death at start. */
#define SPAWN_RECYCLE_MIN_MS 100

/* Runs until a stop signal or until the children are gone for good, and
 * then until nothing they started is left. Returns the exit status: 0
 * after a requested stop or when every child exited 0; 1 when binding
 * fails, the command cannot be run, children keep dying at start, or a
 * stop leaves processes that outlived SIGKILL. */
int spawn_run(const struct spawn_config *cfg);

#endif

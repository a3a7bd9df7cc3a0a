/* The event-loop server: one thread, one edge-triggered epoll loop serving
 * every connection on the given listen sockets. Later models run one of
 * these per worker process or thread. */
#ifndef HERD_MODELS_EVLOOP_H
#define HERD_MODELS_EVLOOP_H

#include <stdint.h>

#include "http/handler.h"
#include "net/listen.h"

struct serve_config {
    const char *docroot;
    struct listen_addr *listen;
    int nlisten;
    struct http_config http;
    int64_t header_timeout_ms;
    int64_t keepalive_timeout_ms;
    int64_t send_timeout_ms;
    int64_t shutdown_timeout_ms;
    uint32_t max_connections; /* 0: from RLIMIT_NOFILE */
};

/* Serves on the already-open, non-blocking listen fds until a TERM/INT
 * (graceful) or QUIT (at once) arrives on signal_fd. Returns the process
 * exit status. */
int evloop_run(const struct serve_config *cfg, const int *listen_fds, int signal_fd);

#endif

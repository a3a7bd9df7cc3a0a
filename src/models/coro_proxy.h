/* The coro model as a driver of the upstream pump (models/upstream.h): one
 * exchange runs inside the client's coroutine, pinned to its kernel thread
 * (whose pool and timers it uses), waiting on the client and the upstream
 * at once with coro_wait_fd2. */
#ifndef HERD_MODELS_CORO_PROXY_H
#define HERD_MODELS_CORO_PROXY_H

#include <stddef.h>
#include <stdint.h>

#include "http/parser.h"
#include "models/step.h"
#include "net/tls.h"

struct proxy;

/* A kernel thread's pool and pump; NULL when the config has no proxy
 * routes. stopping is the thread's graceful-stop flag. Exits on OOM. */
struct proxy *coro_proxy_create(const struct serve_config *cfg, struct step_ctx *step,
                                const uint8_t *stopping, size_t in_cap, int max_fds,
                                struct scoreboard *sb, int loops, int index);
void coro_proxy_destroy(struct proxy *px);

enum coro_proxy_end { CP_KEEP, CP_CLOSE, CP_LINGER };

/* Proxies req for the client on fd, in the calling coroutine, which must
 * be pinned. buf is the client's input buffer of in_cap bytes holding
 * len bytes; the request head is buf[off..off + head_len), the bytes after
 * it may start its body. On return buf[0..*left) holds the input of the
 * client's next request. Returns how the connection goes on. */
enum coro_proxy_end coro_proxy_run(struct proxy *px, int fd, SSL *ssl, struct step_conn *sc,
                                   int route, const struct http_request *req, char *buf,
                                   size_t off, size_t head_len, size_t len, size_t *left);

#endif

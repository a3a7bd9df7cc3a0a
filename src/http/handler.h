/* The request handler: a parsed request in, a response plan out.
 * Serves static files from the docroot through the open-file cache;
 * answers everything else with the right error. */
#ifndef HERD_HTTP_HANDLER_H
#define HERD_HTTP_HANDLER_H

#include <stdint.h>

#include "http/cacherule.h"
#include "http/errorpage.h"
#include "http/filecache.h"
#include "http/parser.h"
#include "http/proxy.h"
#include "http/response.h"

struct http_config {
    uint32_t max_header_size;
    uint64_t max_body_size;
    uint32_t keepalive_requests;
    uint8_t serve_dotfiles;
    uint8_t no_precompressed; /* do not look for file.br / .zst / .gz */
    uint8_t autoindex;      /* list directories that have no index.html */
    char status_path[64];   /* "" when the status page is off */
    struct cache_rules cache;
    struct error_pages error_pages;
};

/* Writes the live counters (format 0 JSON, 1 Prometheus, 2 table) into buf;
 * supplied by the layer that owns them. Returns the length. */
typedef size_t http_status_fn(void *arg, int format, char *buf, size_t cap);

/* The status page's body is built into the head buffer: a driver keeps
 * this much room free beyond HTTP_HEAD_RESERVE + max_header_size. */
#define HTTP_STATUS_MAX 32768

struct http_ctx {
    const struct http_config *cfg;
    struct filecache *fc;
    http_status_fn *status;
    void *status_arg;
    const struct proxy_route *routes; /* proxy routes: "/api" gets a 301 to "/api/" */
    int nroutes;
};

/* may_keepalive: the driver allows another request on this connection
 * (keep-alive request limit not reached, not shutting down).
 * status_ok: the client may read the status page (--status-allow, decided
 * once per connection by the driver from the client's address); else the
 * status path answers 403. */
void http_handle(struct http_ctx *ctx, const struct http_request *req, int may_keepalive,
                 int status_ok, struct http_out *out, struct http_plan *plan);

/* The answer to a request that failed to parse: error page, then close. */
void http_handle_parse_error(const struct http_request *req, struct http_out *out,
                             struct http_plan *plan);

#endif

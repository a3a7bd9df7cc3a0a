/* The sans-I/O half of the reverse proxy: which requests go upstream (route
 * match by longest path prefix), the request head sent to the upstream
 * (hop-by-hop headers dropped, Host, X-Forwarded-For and X-Forwarded-Proto
 * set as nginx does with the usual `proxy_set_header` lines), the upstream
 * response-head parser, the head passed on to the client, and how the
 * response body is framed. No sockets here: models/upstream_pump.c moves the
 * bytes. */
#ifndef HERD_HTTP_PROXY_H
#define HERD_HTTP_PROXY_H

#include <stddef.h>
#include <stdint.h>

#include "http/parser.h"

#define PROXY_PREFIX_MAX 128

struct proxy_route {
    char prefix[PROXY_PREFIX_MAX]; /* matched against the normalised path */
    int group;                     /* index of the upstream group */
    uint8_t strip;                 /* the upstream gets the path without the prefix */
    uint8_t fastcgi;               /* a --fastcgi route (http/fcgi_route.h), not --proxy */
    uint8_t suffix;                /* fastcgi: prefix is a suffix (".php" of "*.php") */
};

/* Index of the --proxy route with the longest prefix of path, or -1
 * (FastCGI routes are matched by http/fcgi_route.c). A path that
 * is a route's prefix without its trailing '/' ("/api" for "/api/")
 * matches no route, unless a route is that path itself: it is redirected
 * to the prefix (proxy_route_slash), as nginx does for a location ending
 * in '/' that proxies. */
int proxy_route_match(const struct proxy_route *routes, int n, const char *path,
                      size_t len);

/* 1 when path is a route's prefix without its trailing '/' and no route
 * is path itself: the answer is a 301 to path + "/". */
int proxy_route_slash(const struct proxy_route *routes, int n, const char *path, size_t len);

/* For a route that strips its prefix: the rest of the normalised path
 * path[0..len) after the prefix, always starting with '/' ("/api/" and
 * "/api/x" give "/x"; "/api" and "/apix" give "/x" too), percent-encoded
 * into out[0..cap). Returns the length, or -1 when it does not fit. */
long proxy_strip_prefix(const struct proxy_route *route, const char *path, size_t len,
                        char *out, size_t cap);

/* Builds the request head for the upstream into buf[0..cap): the client's
 * request line as HTTP/1.1 (with the target's path replaced by path when
 * it is not NULL: a route that strips its prefix; the query is kept), its end-to-end headers, Host (the client's, or
 * default_host when it sent none), X-Forwarded-For (the client's list plus
 * client_addr), X-Forwarded-Proto: http (https: the client came over TLS),
 * and the framing of the body herd sends (http/reframe.h): its
 * Content-Length when the client gave one, else Transfer-Encoding: chunked
 * for herd's own chunks of a chunked body.
 * Header names with '_' are dropped unless pass_underscores: CGI and WSGI
 * servers map '_' and '-' to the same variable, so "X_Forwarded_For" would
 * stand in for herd's X-Forwarded-For (nginx drops them too). Returns the
 * length, or -1 when it does not fit. */
long proxy_build_request(const struct http_request *req, const struct http_str *path,
                         const char *client_addr, const char *default_host,
                         int pass_underscores, int https, char *buf, size_t cap);

/* May req be sent again on another connection after one failed before any
 * byte of a response came back? Only when its method is idempotent (RFC
 * 9110 9.2.2): a POST the upstream already acted on must not run twice. */
int proxy_may_retry(const struct http_request *req);

/* An upstream's response head; strings point into the parsed buffer. */
struct upstream_response {
    uint16_t status;
    uint8_t minor;
    uint8_t chunked;
    uint8_t conn_close;
    uint16_t nheaders;
    int64_t content_length;   /* -1 when absent */
    struct http_str reason;
    struct http_header headers[HTTP_MAX_HEADERS];
};

/* Parses one response head from buf[0..len). Returns the bytes it took,
 * HTTP_PARSE_INCOMPLETE, or HTTP_PARSE_ERROR for anything malformed or
 * ambiguous (bad status line, conflicting Content-Length, a
 * Transfer-Encoding other than chunked, both framings, a head over
 * max_head bytes or with too many headers). */
int upstream_parse_response(const char *buf, size_t len, size_t max_head,
                            struct upstream_response *r);

enum upstream_body { UB_NONE, UB_LENGTH, UB_CHUNKED, UB_CLOSE };

/* How the body after this head is framed (RFC 9112 6.3): none for HEAD,
 * 1xx, 204 and 304; else chunked, Content-Length, or until the close. */
enum upstream_body upstream_body_kind(const struct upstream_response *r, int head_request);

/* Builds the head sent to the client into buf[0..cap): the upstream's
 * status line as HTTP/1.1, herd's Server and Date, the upstream's headers
 * without the hop-by-hop ones and without its Server and Date (unless
 * pass_server: then the upstream's, and herd's only where it sent none),
 * Transfer-Encoding: chunked for a chunked body (herd's own chunks of the
 * upstream's data, http/reframe.h), and the Connection header for
 * keepalive. Returns the length or -1. */
long proxy_build_response(const struct upstream_response *r, enum upstream_body kind,
                          int client_minor, int keepalive, int pass_server, char *buf,
                          size_t cap);

#endif

/* The parameters of a FastCGI request (CGI/1.1, RFC 3875 section 4.1, plus
 * what PHP reads), written as the records that start a request:
 * BEGIN_REQUEST (RESPONDER, KEEP_CONN), PARAMS records of at most 65535
 * bytes each holding whole name-value pairs, the empty PARAMS that ends
 * them, and, for a request without a body, the empty STDIN. Sans-I/O. */
#ifndef HERD_HTTP_FCGI_PARAMS_H
#define HERD_HTTP_FCGI_PARAMS_H

#include <stddef.h>

#include "http/parser.h"

/* What the parameters need besides the request; strings are not
 * NUL-terminated unless said so. */
struct fcgi_env {
    const char *docroot;         /* absolute, without a trailing '/' (NUL-terminated) */
    const char *script;          /* normalised script path below the docroot ("/x.php") */
    size_t script_len;
    const char *path_info;       /* the rest of the normalised path after the script */
    size_t path_info_len;
    const char *uri;             /* the normalised request path (DOCUMENT_URI) */
    size_t uri_len;
    const char *remote_addr;     /* NUL-terminated; the PROXY-protocol client if any */
    unsigned remote_port;
    const char *server_addr;     /* NUL-terminated */
    unsigned server_port;
    int https;
    const char *const *extra;    /* "NAME=VALUE" (--fastcgi-param): add or override */
    int nextra;
};

/* Writes the start of the request into buf[0..cap): returns its length, or
 * -1 when it does not fit. Request headers become HTTP_NAME parameters
 * (upper case, '-' as '_', repeats joined with ", "); names holding '_'
 * are dropped, so "X_Forwarded_For" cannot pose as X-Forwarded-For, and
 * so is Proxy (httpoxy: HTTP_PROXY would steer the script's own HTTP
 * client). A pair too long for one record is dropped. */
long fcgi_build_params(const struct http_request *req, const struct fcgi_env *env, char *buf,
                       size_t cap);

/* Does req carry a body (sent as STDIN by the codec)? */
int fcgi_has_body(const struct http_request *req);

#endif

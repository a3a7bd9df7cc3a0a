/* The live status page: one self-contained HTML document (inline script,
 * style and SVG, no other asset) that polls the status JSON of the path it
 * was served from. Its bytes are constant: nothing from a request goes in,
 * so the page cannot echo a client's bytes. */
#ifndef HERD_HTTP_STATUS_HTML_H
#define HERD_HTTP_STATUS_HTML_H

#include <stddef.h>

#include "http/parser.h"

/* The page (src/http/status_page.html, assembled into the binary). */
const char *status_html(size_t *len);

/* Its Content-Security-Policy: nothing but its own inline script and style
 * (by hash) and requests to this server. */
extern const char status_html_csp[];

/* Does the client ask for the page: ?format=html, or an Accept header that
 * ranks text/html above application/json (a browser's, not curl's or
 * fetch()'s default of star-slash-star)? */
int status_wants_html(const struct http_request *req, int format_html);

#endif

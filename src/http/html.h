/* Escaping for generated HTML pages (directory listings): text and
 * attribute values, and one path segment as a relative link. Pure. */
#ifndef HERD_HTTP_HTML_H
#define HERD_HTTP_HTML_H

#include <stddef.h>

/* Longest output per input byte, to size buffers. */
#define HTML_ESCAPE_MAX 6 /* "&quot;" */
#define URI_ESCAPE_MAX 3  /* "%XX" */

/* Writes in[0..len) with & < > " ' replaced by entities, safe both as text
 * and inside a quoted attribute. Other bytes pass unchanged (file names are
 * bytes; a page says charset=utf-8). Returns the length, or -1 when it does
 * not fit cap. */
int html_escape(const char *in, size_t len, char *out, size_t cap);

/* Percent-encodes a file name as one relative path segment: only the
 * unreserved characters of RFC 3986 (A-Z a-z 0-9 - . _ ~) stay raw, so the
 * result never holds '/', ':' (a scheme), '?', '#', '%', quotes or '<', and
 * needs no further HTML escaping. Returns the length, or -1 past cap. */
int uri_escape_segment(const char *in, size_t len, char *out, size_t cap);

#endif

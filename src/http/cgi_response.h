/* A CGI response head (RFC 3875 section 6), as a FastCGI application
 * writes it on STDOUT: header lines, no status line; "Status: 418 Teapot"
 * sets the status, a Location without a Status is a 302 redirect, and
 * every other header (several Set-Cookie included) goes to the client.
 * Sans-I/O. */
#ifndef HERD_HTTP_CGI_RESPONSE_H
#define HERD_HTTP_CGI_RESPONSE_H

#include <stddef.h>

#include "http/proxy.h"

/* Parses the head in buf[0..len) into r (strings point into buf; the
 * Status header is not among r->headers, a Transfer-Encoding neither: the
 * body is framed by herd). Lines end with LF or CRLF. Returns the bytes
 * the head took with its empty line, HTTP_PARSE_INCOMPLETE, or
 * HTTP_PARSE_ERROR (a malformed line or Status, a bad or repeated
 * Content-Length, more than HTTP_MAX_HEADERS headers, a head of max_head
 * bytes or more). */
int cgi_parse_response(const char *buf, size_t len, size_t max_head,
                       struct upstream_response *r);

#endif

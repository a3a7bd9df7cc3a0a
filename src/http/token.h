/* Two small pieces of RFC 9110 grammar that the head readers of upstream
 * answers share (http/proxy.c for HTTP/1.1 backends, http/cgi_response.c
 * for FastCGI scripts): a token character, and a decimal length. */
#ifndef HERD_HTTP_TOKEN_H
#define HERD_HTTP_TOKEN_H

#include <stdint.h>
#include <string.h>

#include "http/parser.h"

/* tchar: a character of a header name (RFC 9110 section 5.6.2). */
static inline int http_tchar(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* A Content-Length value: digits only, at most 18 of them (no overflow).
 * 0 and *out set, or -1. */
static inline int http_parse_length(const struct http_str *v, int64_t *out)
{
    if (!v->len || v->len > 18)
        return -1;
    int64_t n = 0;
    for (size_t i = 0; i < v->len; i++) {
        if (v->p[i] < '0' || v->p[i] > '9')
            return -1;
        n = n * 10 + (v->p[i] - '0');
    }
    *out = n;
    return 0;
}

#endif

/* Conditional requests (RFC 9110 13): If-None-Match, If-Modified-Since and
 * If-Range against a file's ETag and modification time. */
#ifndef HERD_HTTP_COND_H
#define HERD_HTTP_COND_H

#include <stddef.h>
#include <time.h>

#include "http/parser.h"

/* 1 when the request's validators say the client's copy is current (304).
 * If-None-Match wins over If-Modified-Since when both are present. */
int cond_not_modified(const struct http_request *req, const char *etag, size_t etag_len,
                      time_t mtime);

/* 1 when a Range may be honoured: no If-Range, or one that matches the
 * strong ETag or the exact Last-Modified date. */
int cond_if_range_ok(const struct http_request *req, const char *etag, size_t etag_len,
                     const char *last_modified, size_t lm_len);

/* Weak comparison of ETag list items: "*" or any entry equal to etag
 * ignoring a W/ prefix on either side. */
int cond_etag_list_matches(const char *list, size_t len, const char *etag, size_t etag_len);

#endif

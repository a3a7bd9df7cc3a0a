/* Conditional requests (RFC 9110 13): If-Match, If-Unmodified-Since,
 * If-None-Match, If-Modified-Since and If-Range against the ETag and
 * modification time of the representation selected. */
#ifndef HERD_HTTP_COND_H
#define HERD_HTTP_COND_H

#include <stddef.h>
#include <time.h>

#include "http/parser.h"

enum cond_verdict {
    COND_PROCEED,      /* answer as if unconditional (Range and If-Range next) */
    COND_NOT_MODIFIED, /* 304 */
    COND_FAILED,       /* 412 Precondition Failed */
};

/* The preconditions in RFC 9110 13.2.2's order: If-Match (strong
 * comparison) false -> 412; else If-Unmodified-Since (a valid date)
 * earlier than mtime -> 412; then If-None-Match (weak comparison) true ->
 * 304 for GET and HEAD, 412 for other methods; else If-Modified-Since (GET
 * and HEAD only, a valid date) not earlier than mtime -> 304. A field
 * sent on several lines is read as one list (the parser has already
 * dropped a repeated date: it is invalid). The caller evaluates them only
 * when the answer without them would be 2xx (13.2.1): not for a 404. */
enum cond_verdict cond_evaluate(const struct http_request *req, const char *etag,
                                size_t etag_len, time_t mtime);

/* 1 when a Range may be honoured: no If-Range, or one that matches the
 * strong ETag or the exact Last-Modified date. */
int cond_if_range_ok(const struct http_request *req, const char *etag, size_t etag_len,
                     const char *last_modified, size_t lm_len);

/* Weak comparison of ETag list items (If-None-Match): "*" or any entry
 * equal to etag ignoring a W/ prefix on either side. */
int cond_etag_list_matches(const char *list, size_t len, const char *etag, size_t etag_len);

/* Strong comparison (If-Match): "*", or an entry equal to etag with neither
 * of them weak (W/). */
int cond_etag_list_matches_strong(const char *list, size_t len, const char *etag,
                                  size_t etag_len);

#endif

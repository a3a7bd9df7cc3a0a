/* Custom error pages: `error-page CODE=/path` answers an error CODE with
 * the file /path below the docroot instead of the built-in page. */
#ifndef HERD_HTTP_ERRORPAGE_H
#define HERD_HTTP_ERRORPAGE_H

#include <stddef.h>
#include <stdint.h>

#define ERROR_PAGES_MAX 16
#define ERROR_PAGE_PATH_MAX 256

struct error_pages {
    struct {
        uint16_t code;
        uint16_t len;
        char path[ERROR_PAGE_PATH_MAX]; /* normalised, without the leading '/' */
    } page[ERROR_PAGES_MAX];
    uint8_t n;
};

/* Adds "CODE=/path". CODE is an error status herd answers with (400-599 in
 * its table); /path must already be normalised (no "..", "//", "%", "?",
 * control characters) and name a file, not a directory ("/x/"). A CODE
 * given again replaces its path. Returns 0, or -1 with a reason in err. */
int error_page_add(struct error_pages *p, const char *spec, char *err, size_t errlen);

/* The page for code (rel path below the docroot and its length), or NULL. */
const char *error_page_for(const struct error_pages *p, unsigned code, size_t *len);

struct http_ctx;
struct http_request;
struct http_out;
struct http_plan;

/* An error response to req: the configured page for status when there is
 * one and it can be opened (a regular file below the docroot), else the
 * built-in page; never a second lookup, so a missing page cannot loop.
 * extra: header lines (CRLF-terminated) to add, e.g. a Vary. HEAD gets the
 * head alone. */
void http_error(struct http_ctx *ctx, const struct http_request *req, unsigned status,
                int keepalive, const char *extra, size_t extra_len, struct http_out *out,
                struct http_plan *plan);

/* The same for an answer herd makes without a parsed request (the proxy's
 * 502, 503 and 504): HTTP/1.minor, head_only for a HEAD. */
void http_error_page(struct http_ctx *ctx, unsigned status, int minor, int keepalive,
                     int head_only, const char *extra, size_t extra_len, struct http_out *out,
                     struct http_plan *plan);

#endif

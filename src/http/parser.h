/* Strict, zero-copy HTTP/1.1 request-head parser (RFC 9112).
 *
 * Sans-I/O: it reads a buffer and fills a struct whose strings point into
 * that buffer, so the buffer must not move while the request is in use.
 * It accepts CRLF or bare LF line ends and skips empty lines before the
 * request line; it rejects everything RFC 9112 calls invalid and everything
 * that lets two parsers disagree on framing (request smuggling). */
#ifndef HERD_HTTP_PARSER_H
#define HERD_HTTP_PARSER_H

#include <stddef.h>
#include <stdint.h>

enum http_method {
    HTTP_GET, HTTP_HEAD, HTTP_POST, HTTP_PUT, HTTP_DELETE, HTTP_PATCH,
    HTTP_OPTIONS, HTTP_TRACE, HTTP_CONNECT, HTTP_OTHER,
};

struct http_str {
    const char *p;
    uint32_t len;
};

struct http_header {
    struct http_str name, value;
};

#define HTTP_MAX_HEADERS 64

struct http_request {
    enum http_method method;
    uint8_t minor;          /* HTTP/1.minor, 0 or 1 */
    uint8_t chunked;        /* Transfer-Encoding: chunked */
    uint8_t conn_close;     /* Connection: close */
    uint8_t conn_keepalive; /* Connection: keep-alive */
    uint16_t error;         /* the status to answer when the parse fails */
    uint16_t nheaders;
    uint8_t repeated;       /* HTTP_REPEAT_*: captured fields sent on several lines */
    int64_t content_length; /* -1 when absent */
    struct http_str method_str, target, path, query; /* path: before '?', still encoded */
    struct http_str host;
    /* The fields the static handler acts on, .p NULL when absent. Range,
     * If-Range, If-Modified-Since and If-Unmodified-Since are singletons:
     * sent on two lines, one is invalid and reads as absent, since a
     * recipient ignores it (RFC 9110 13.1.3, 13.1.4, 14.2), and so does a
     * Range whose If-Range is repeated (an invalid If-Range never matches,
     * 13.1.5). If-Match and If-None-Match are lists: these hold the first
     * line, and a repeat bit in `repeated` says to read the others from
     * headers[] (cond.c does). */
    struct http_str if_match, if_none_match, if_modified_since, if_unmodified_since;
    struct http_str range, if_range;
    struct http_header headers[HTTP_MAX_HEADERS];
};

/* Bits of http_request.repeated. */
enum {
    HTTP_REPEAT_IF_MATCH = 1 << 0,
    HTTP_REPEAT_IF_NONE_MATCH = 1 << 1,
    HTTP_REPEAT_IF_MODIFIED_SINCE = 1 << 2,
    HTTP_REPEAT_IF_UNMODIFIED_SINCE = 1 << 3,
    HTTP_REPEAT_RANGE = 1 << 4,
    HTTP_REPEAT_IF_RANGE = 1 << 5,
};

#define HTTP_PARSE_INCOMPLETE (-2)
#define HTTP_PARSE_ERROR (-1)

/* Parses one request head from buf[0..len). Returns the bytes it took
 * (head and any empty lines before it), HTTP_PARSE_INCOMPLETE when more
 * bytes are needed, or HTTP_PARSE_ERROR with req->error set to 400, 414,
 * 431 or 505. A head still incomplete after max_head bytes is an error
 * (414 while the request line is unfinished, else 431), as is a complete
 * one longer than max_head. */
int http_parse_request(const char *buf, size_t len, size_t max_head,
                       struct http_request *req);

/* The next token of a comma-separated header value such as Connection's,
 * from *p up to end: separators (spaces, tabs, commas) are skipped. Returns
 * 0 when no token is left. */
int http_list_next(const char **p, const char *end, struct http_str *tok);

/* Keep the connection open after answering req? (1.1 unless close; 1.0 only
 * with keep-alive). */
static inline int http_wants_keepalive(const struct http_request *req)
{
    return req->minor ? !req->conn_close : req->conn_keepalive && !req->conn_close;
}

#endif

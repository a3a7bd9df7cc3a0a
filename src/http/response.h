/* Response plans and the response-head builder.
 *
 * The HTTP code never writes to a socket: for each request it appends the
 * response head to an output buffer and fills a plan saying what follows
 * the head (bytes in memory, or a file range for sendfile) and what to do
 * with the connection afterwards. A driver (models/) carries it out. */
#ifndef HERD_HTTP_RESPONSE_H
#define HERD_HTTP_RESPONSE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/version.h"
#include "http/filecache.h"

#define SERVER_HEADER "Server: herd/" HERD_VERSION "\r\n"

/* Room a single response head may need in http_out, beyond the request's
 * own path (which a 301 Location repeats). */
#define HTTP_HEAD_RESERVE 1024

struct http_out {
    char *buf;
    size_t len, cap;
};

struct http_plan {
    uint32_t head_off, head_len; /* the head, in http_out.buf */
    const char *body;            /* bytes after the head (static or cached) */
    uint32_t body_len;
    uint32_t inline_len;         /* body bytes already inside the head (status page) */
    struct fc_entry *file;       /* referenced: the driver releases it */
    off_t file_off, file_len;    /* with file->fd: sendfile; with file->data: memory */
    uint16_t status;
    uint8_t close;               /* close the connection after this response */
    uint8_t linger;              /* the peer may still be sending: drain before close */
};

/* Status line, Server and Date. minor: the request's HTTP/1.minor. */
void resp_status(struct http_out *out, unsigned status);
void resp_header_raw(struct http_out *out, const char *s, size_t len);
void resp_content_length(struct http_out *out, uint64_t n);
/* Connection header (when it is not implied by the version) and the blank
 * line. */
void resp_finish(struct http_out *out, int minor, int keepalive);

const char *resp_reason(unsigned status);
/* 1 when status is one herd has a reason phrase (and error page) for. */
int resp_status_known(unsigned status);

/* Lines an error response of this status always carries besides the
 * common ones (405: Allow). */
void resp_error_headers(struct http_out *out, unsigned status);

/* A complete error response with a small HTML body. */
void resp_error(struct http_out *out, struct http_plan *plan, unsigned status, int minor,
                int keepalive, int head_only);
/* The same with extra header lines (each ending in CRLF), e.g. a Vary. */
void resp_error_with(struct http_out *out, struct http_plan *plan, unsigned status, int minor,
                     int keepalive, int head_only, const char *extra, size_t extra_len);

/* Appends the decimal form of n; returns its length. */
size_t fmt_u64(char *p, uint64_t n);

#endif

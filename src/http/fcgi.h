/* FastCGI 1.0 records (the FastCGI specification, section 8): the bytes a
 * web server and a FastCGI application exchange. Sans-I/O: writers fill
 * caller buffers; models/upstream_pump.c moves them. The codec itself is
 * http/fcgi_codec.c, the request's parameters http/fcgi_params.c. */
#ifndef HERD_HTTP_FCGI_H
#define HERD_HTTP_FCGI_H

#include <stddef.h>
#include <stdint.h>

#define FCGI_VERSION 1
#define FCGI_HEADER_LEN 8
#define FCGI_CONTENT_MAX 65535
#define FCGI_REQUEST_ID 1          /* one request per connection at a time */

enum fcgi_type {
    FCGI_BEGIN_REQUEST = 1, FCGI_ABORT_REQUEST, FCGI_END_REQUEST, FCGI_PARAMS, FCGI_STDIN,
    FCGI_STDOUT, FCGI_STDERR, FCGI_DATA, FCGI_GET_VALUES, FCGI_GET_VALUES_RESULT,
    FCGI_UNKNOWN_TYPE,
};

#define FCGI_RESPONDER 1
#define FCGI_KEEP_CONN 1

/* Writes a record header for content_len bytes of type into out[0..8). */
static inline void fcgi_record_head(unsigned char *out, int type, size_t content_len)
{
    out[0] = FCGI_VERSION;
    out[1] = (unsigned char)type;
    out[2] = 0;
    out[3] = FCGI_REQUEST_ID;
    out[4] = (unsigned char)(content_len >> 8);
    out[5] = (unsigned char)content_len;
    out[6] = 0; /* no padding */
    out[7] = 0;
}

#endif

/* The Range request header (RFC 9110 14.2), single byte ranges only. */
#ifndef HERD_HTTP_RANGE_H
#define HERD_HTTP_RANGE_H

#include <stddef.h>
#include <sys/types.h>

enum range_result {
    RANGE_NONE,          /* absent, malformed or several ranges: send it all */
    RANGE_OK,            /* *start, *len set: send 206 */
    RANGE_UNSATISFIABLE, /* send 416 */
};

/* Accepts "bytes=a-b", "bytes=a-" and "bytes=-n" against a file of size
 * bytes; b past the end is clipped. */
enum range_result range_parse(const char *h, size_t len, off_t size, off_t *start,
                              off_t *rlen);

#endif

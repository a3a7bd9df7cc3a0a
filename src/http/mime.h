/* Content-Type by file extension: a small built-in table of the common web
 * types, text types with charset=utf-8. */
#ifndef HERD_HTTP_MIME_H
#define HERD_HTTP_MIME_H

#include <stddef.h>

/* Returns a static string for the extension of path[0..len). */
const char *mime_type(const char *path, size_t len);

#endif

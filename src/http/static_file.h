/* The response for a regular file found in the open-file cache: content
 * negotiation over its precompressed sidecars, conditional requests, Range,
 * and the caching rules' headers. */
#ifndef HERD_HTTP_STATIC_FILE_H
#define HERD_HTTP_STATIC_FILE_H

#include <stddef.h>

#include "http/handler.h"

/* Answers req with the file e (referenced; the plan or this function
 * releases it). path[0..plen) is its normalised path ("/dir/index.html"),
 * which the caching rules match. */
void static_file_send(struct http_ctx *ctx, const struct http_request *req, const char *path,
                      size_t plen, struct fc_entry *e, int keepalive, struct http_out *out,
                      struct http_plan *plan);

#endif

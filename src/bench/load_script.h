/* herd load --requests FILE: a file of requests that the connections of a
 * load thread send in turn, cycling (what wrk users write a Lua request()
 * for). The format, one block per request, blocks separated by a line
 * "---":
 *
 *     # a comment (lines starting with '#' before the request line)
 *     POST /api/items?x=1
 *     Content-Type: application/json
 *
 *     {"name": "a"}
 *     ---
 *     GET /api/items
 *
 * The request line is METHOD and an origin-form TARGET (starting with
 * '/'); header lines "Name: value" follow; after the first empty line,
 * everything up to the line "---" (or the end of the file) is the body,
 * without the line break before "---". Host comes from the URL unless a
 * block sets it; Content-Length is added for a body (and for an empty
 * POST, PUT or PATCH). Lines may end in LF or CRLF. HEAD is refused (its
 * responses have no body to tell the response reader). */
#ifndef HERD_BENCH_LOAD_SCRIPT_H
#define HERD_BENCH_LOAD_SCRIPT_H

#include <stddef.h>
#include <stdint.h>

/* At most this many requests in a file. */
#define LOAD_SCRIPT_MAX 100000

/* One request of the file; every field points into the file's text. */
struct load_req {
    const char *method, *target, *headers, *body;
    size_t method_len, target_len;
    size_t headers_len;          /* header lines, each ending in LF (maybe CRLF) */
    size_t body_len;
};

struct load_script {
    char *text;
    struct load_req *reqs;
    uint32_t n;
};

/* Reads and checks path. 0, or -1 with "PATH:LINE: reason" in err. */
int load_script_read(const char *path, struct load_script *s, char *err, size_t errlen);
void load_script_free(struct load_script *s);

#endif

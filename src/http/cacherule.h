/* Caching rules for static files: `cache-control MATCH=VALUE` gives a
 * Cache-Control value, `expires MATCH=DURATION` an Expires date DURATION
 * after the response's Date, plus max-age=DURATION (as nginx's `expires`).
 *
 * MATCH is a suffix pattern, "*.css" (the path ends with ".css"), or a path
 * prefix, "/static/" (the path starts with it); the path is the normalised
 * one of the file served ("/dir/index.html" for "/dir/"). Among the rules
 * of one kind that match, the longest MATCH wins (characters compared, the
 * '*' not counted); at equal length the one given first. Pure functions. */
#ifndef HERD_HTTP_CACHERULE_H
#define HERD_HTTP_CACHERULE_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "http/response.h"

#define CACHE_RULES_MAX 32
#define CACHE_MATCH_MAX 128
#define CACHE_VALUE_MAX 256
#define CACHE_EXPIRES_MAX_S (10LL * 365 * 86400) /* nginx's "expires max" */

struct cache_rule {
    char match[CACHE_MATCH_MAX]; /* without the '*' of a suffix pattern */
    uint16_t match_len;
    uint8_t suffix;              /* 1: "*.css", 0: "/static/" */
    uint8_t has_max_age;         /* value carries its own max-age */
    char value[CACHE_VALUE_MAX]; /* cache-control: the header value */
    uint16_t value_len;
    int64_t seconds;             /* expires: DURATION in seconds */
};

struct cache_rules {
    struct cache_rule cc[CACHE_RULES_MAX], exp[CACHE_RULES_MAX];
    uint8_t ncc, nexp;
};

/* Adds "MATCH=VALUE" (expires == 0) or "MATCH=DURATION" (expires == 1).
 * Refuses, with a one-line reason in err: a MATCH that is neither *SUFFIX nor
 * /PREFIX, one given twice, an empty VALUE or one with control characters
 * (CR, LF, NUL, TAB...: it would break the header), values over
 * CACHE_VALUE_MAX - 1 bytes, durations that are not 0 or a DUR up to ten
 * years, more than CACHE_RULES_MAX rules. Returns 0 or -1. */
int cache_rule_add(struct cache_rules *r, int expires, const char *spec, char *err,
                   size_t errlen);

/* The winning rule of rules[0..n) for path[0..len), or NULL. */
const struct cache_rule *cache_rule_match(const struct cache_rule *rules, size_t n,
                                          const char *path, size_t len);

/* Appends the Cache-Control and Expires lines the rules give path (nothing
 * when none match); now is the response's Date. At most one Cache-Control
 * line: an expires rule's max-age joins a cache-control value that has none. */
void cache_headers(const struct cache_rules *r, const char *path, size_t len, time_t now,
                   struct http_out *out);

#endif

#include "http/cond.h"

#include <string.h>
#include <strings.h>

#include "core/httpdate.h"

enum comparison { WEAK, STRONG }; /* RFC 9110 8.8.3.2 */

/* What a scan of one ETag list found. A malformed entry ends the scan of
 * a field on several lines too, as it would end a scan of the lines
 * joined: the lines after it are not read. */
enum list_scan { LIST_NO_MATCH, LIST_MATCH, LIST_MALFORMED };

static int weak_prefix(const char *p, size_t len)
{
    return len >= 2 && p[0] == 'W' && p[1] == '/';
}

static enum list_scan scan_etag_list(const char *list, size_t len, const char *etag,
                                     size_t etag_len, enum comparison how)
{
    int etag_weak = weak_prefix(etag, etag_len);
    if (etag_weak) {
        etag += 2;
        etag_len -= 2;
    }
    const char *p = list, *end = list + len;
    while (p < end) {
        while (p < end && (*p == ' ' || *p == '\t' || *p == ','))
            p++;
        if (p >= end)
            break;
        if (*p == '*')
            return LIST_MATCH; /* any current representation */
        int weak = weak_prefix(p, (size_t)(end - p));
        if (weak)
            p += 2;
        if (p >= end || *p != '"')
            return LIST_MALFORMED;
        const char *q = memchr(p + 1, '"', (size_t)(end - p - 1));
        if (!q)
            return LIST_MALFORMED;
        size_t tlen = (size_t)(q + 1 - p); /* the opaque-tag, quotes included */
        int same = tlen == etag_len && memcmp(p, etag, tlen) == 0;
        if (same && (how == WEAK || (!weak && !etag_weak)))
            return LIST_MATCH;
        p = q + 1;
    }
    return LIST_NO_MATCH;
}

int cond_etag_list_matches(const char *list, size_t len, const char *etag, size_t etag_len)
{
    return scan_etag_list(list, len, etag, etag_len, WEAK) == LIST_MATCH;
}

int cond_etag_list_matches_strong(const char *list, size_t len, const char *etag,
                                  size_t etag_len)
{
    return scan_etag_list(list, len, etag, etag_len, STRONG) == LIST_MATCH;
}

/* Does the list field match? first is its first line; when the parser saw
 * more (repeated), every line of that name is read, in order, as the one
 * list they form joined by commas (RFC 9110 5.3), each line on its own. */
static int list_field_matches(const struct http_request *req, const struct http_str *first,
                              int repeated, const char *name, size_t name_len,
                              const char *etag, size_t etag_len, enum comparison how)
{
    if (!repeated)
        return scan_etag_list(first->p, first->len, etag, etag_len, how) == LIST_MATCH;
    for (unsigned i = 0; i < req->nheaders; i++) {
        const struct http_header *h = &req->headers[i];
        if (h->name.len != name_len || strncasecmp(h->name.p, name, name_len) != 0)
            continue;
        enum list_scan s = scan_etag_list(h->value.p, h->value.len, etag, etag_len, how);
        if (s != LIST_NO_MATCH)
            return s == LIST_MATCH;
    }
    return 0;
}

/* 1 when the If-(Un)Modified-Since field is one valid HTTP-date, in *t;
 * else 0, and the field is ignored (RFC 9110 13.1.3, 13.1.4). */
static int field_date(const struct http_str *field, time_t *t)
{
    return httpdate_parse(field->p, field->len, t) == 0;
}

/* The If-Match condition is true: "*" or a strong match. */
static int if_match_holds(const struct http_request *req, const char *etag, size_t etag_len)
{
    return list_field_matches(req, &req->if_match, req->repeated & HTTP_REPEAT_IF_MATCH,
                              "if-match", 8, etag, etag_len, STRONG);
}

/* The If-None-Match condition is true: no entry matches, weakly. */
static int if_none_match_holds(const struct http_request *req, const char *etag,
                               size_t etag_len)
{
    return !list_field_matches(req, &req->if_none_match,
                               req->repeated & HTTP_REPEAT_IF_NONE_MATCH, "if-none-match", 13,
                               etag, etag_len, WEAK);
}

enum cond_verdict cond_evaluate(const struct http_request *req, const char *etag,
                                size_t etag_len, time_t mtime)
{
    time_t t;
    /* 1 and 2: the representation must still be the one the client has */
    if (req->if_match.p) {
        if (!if_match_holds(req, etag, etag_len))
            return COND_FAILED;
    } else if (req->if_unmodified_since.p && field_date(&req->if_unmodified_since, &t) &&
               mtime > t) {
        return COND_FAILED;
    }
    /* 3 and 4: the client's copy is current already */
    int get_or_head = req->method == HTTP_GET || req->method == HTTP_HEAD;
    if (req->if_none_match.p) {
        if (if_none_match_holds(req, etag, etag_len))
            return COND_PROCEED;
        return get_or_head ? COND_NOT_MODIFIED : COND_FAILED;
    }
    if (get_or_head && req->if_modified_since.p && field_date(&req->if_modified_since, &t) &&
        mtime <= t)
        return COND_NOT_MODIFIED;
    return COND_PROCEED;
}

int cond_if_range_ok(const struct http_request *req, const char *etag, size_t etag_len,
                     const char *last_modified, size_t lm_len)
{
    if (!req->if_range.p)
        return 1;
    const char *v = req->if_range.p;
    size_t n = req->if_range.len;
    if (n > 0 && v[0] == '"') /* strong comparison: weak tags never match */
        return n == etag_len && memcmp(v, etag, n) == 0;
    return n == lm_len && memcmp(v, last_modified, n) == 0;
}

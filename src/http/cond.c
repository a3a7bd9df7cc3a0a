#include "http/cond.h"

#include <string.h>

#include "core/httpdate.h"

static void strip_weak(const char **p, size_t *len)
{
    if (*len >= 2 && (*p)[0] == 'W' && (*p)[1] == '/') {
        *p += 2;
        *len -= 2;
    }
}

int cond_etag_list_matches(const char *list, size_t len, const char *etag, size_t etag_len)
{
    strip_weak(&etag, &etag_len);
    const char *p = list, *end = list + len;
    while (p < end) {
        while (p < end && (*p == ' ' || *p == '\t' || *p == ','))
            p++;
        if (p >= end)
            break;
        if (*p == '*')
            return 1;
        const char *s = p;
        if (p + 1 < end && p[0] == 'W' && p[1] == '/')
            p += 2;
        if (p >= end || *p != '"')
            return 0; /* malformed list: treat as no match */
        const char *q = memchr(p + 1, '"', (size_t)(end - p - 1));
        if (!q)
            return 0;
        const char *t = s;
        size_t tlen = (size_t)(q + 1 - s);
        strip_weak(&t, &tlen);
        if (tlen == etag_len && memcmp(t, etag, tlen) == 0)
            return 1;
        p = q + 1;
    }
    return 0;
}

int cond_not_modified(const struct http_request *req, const char *etag, size_t etag_len,
                      time_t mtime)
{
    if (req->if_none_match.p)
        return cond_etag_list_matches(req->if_none_match.p, req->if_none_match.len, etag,
                                      etag_len);
    if (req->if_modified_since.p) {
        time_t t;
        if (httpdate_parse(req->if_modified_since.p, req->if_modified_since.len, &t) == 0)
            return mtime <= t;
    }
    return 0;
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

/* autoindex_render: the listing page (see autoindex.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/autoindex.h"
#include "http/html.h"

#define NAME_MAX_BYTES 255
/* One row: the fixed markup, the name twice (as a link and as text), a
 * date and a size. */
#define ROW_MAX (128 + NAME_MAX_BYTES * (URI_ESCAPE_MAX + HTML_ESCAPE_MAX) + 32)
#define TAIL_MAX 128

struct page {
    char *buf;
    size_t len, cap;
};

/* Makes room for need more bytes, up to AUTOINDEX_MAX_BYTES in all. */
static int reserve(struct page *pg, size_t need)
{
    if (pg->len + need <= pg->cap)
        return 0;
    size_t cap = pg->cap ? pg->cap : 4096;
    while (cap < pg->len + need)
        cap *= 2;
    if (cap > AUTOINDEX_MAX_BYTES && pg->len + need <= AUTOINDEX_MAX_BYTES)
        cap = AUTOINDEX_MAX_BYTES;
    char *b = realloc(pg->buf, cap);
    if (!b)
        return -1;
    pg->buf = b;
    pg->cap = cap;
    return 0;
}

static void put(struct page *pg, const char *s, size_t n)
{
    memcpy(pg->buf + pg->len, s, n);
    pg->len += n;
}
#define PUT_LIT(pg, lit) put(pg, lit, sizeof lit - 1)

static void put_escaped(struct page *pg, const char *s, size_t n)
{
    pg->len += (size_t)html_escape(s, n, pg->buf + pg->len, pg->cap - pg->len);
}

static void put_row(struct page *pg, const struct ai_item *it)
{
    PUT_LIT(pg, "<tr><td><a href=\"");
    pg->len += (size_t)uri_escape_segment(it->name, it->len, pg->buf + pg->len,
                                          pg->cap - pg->len);
    if (it->dir)
        PUT_LIT(pg, "/");
    PUT_LIT(pg, "\">");
    put_escaped(pg, it->name, it->len);
    if (it->dir)
        PUT_LIT(pg, "/");
    PUT_LIT(pg, "</a></td><td>");
    struct tm tm;
    char when[32];
    size_t wl = gmtime_r(&it->mtime, &tm) ? strftime(when, sizeof when, "%Y-%m-%d %H:%M", &tm)
                                          : 0;
    put(pg, when, wl);
    PUT_LIT(pg, "</td><td>");
    if (it->dir)
        PUT_LIT(pg, "-");
    else
        pg->len += (size_t)snprintf(pg->buf + pg->len, 24, "%lld", (long long)it->size);
    PUT_LIT(pg, "</td></tr>\n");
}

static void put_head(struct page *pg, const char *url, size_t ulen)
{
    PUT_LIT(pg, "<!DOCTYPE html>\n<html>\n<head><meta charset=\"utf-8\"><title>Index of ");
    put_escaped(pg, url, ulen);
    PUT_LIT(pg, "</title></head>\n<body>\n<h1>Index of ");
    put_escaped(pg, url, ulen);
    PUT_LIT(pg, "</h1>\n<table>\n<tr><th>Name</th><th>Last modified (UTC)</th>"
                "<th>Size</th></tr>\n");
    if (ulen > 1)
        PUT_LIT(pg, "<tr><td><a href=\"../\">../</a></td><td></td><td>-</td></tr>\n");
}

char *autoindex_render(const char *url, size_t ulen, const struct ai_item *items, size_t n,
                       size_t omitted, size_t *len)
{
    struct page pg = {NULL, 0, 0};
    if (reserve(&pg, 512 + 2 * ulen * HTML_ESCAPE_MAX))
        return NULL;
    put_head(&pg, url, ulen);
    for (size_t i = 0; i < n; i++) {
        if (items[i].len > NAME_MAX_BYTES) { /* not on Linux; a row's bound needs it */
            omitted++;
            continue;
        }
        if (pg.len + ROW_MAX + TAIL_MAX > AUTOINDEX_MAX_BYTES) {
            omitted += n - i;
            break;
        }
        if (reserve(&pg, ROW_MAX + TAIL_MAX)) {
            free(pg.buf);
            return NULL;
        }
        put_row(&pg, &items[i]);
    }
    if (reserve(&pg, TAIL_MAX)) {
        free(pg.buf);
        return NULL;
    }
    PUT_LIT(&pg, "</table>\n");
    if (omitted)
        pg.len += (size_t)snprintf(pg.buf + pg.len, 64, "<p>%zu more entries not listed.</p>\n",
                                   omitted);
    PUT_LIT(&pg, "</body>\n</html>\n");
    *len = pg.len;
    return pg.buf;
}

#include "core/bwriter.h"

#include <stdio.h>
#include <string.h>

void bw_put(struct bw *w, const void *s, size_t n)
{
    if (w->full || n > w->cap - w->len) {
        w->full = 1;
        return;
    }
    if (n) /* s may be NULL for an empty piece */
        memcpy(w->buf + w->len, s, n);
    w->len += n;
}

void bw_puts(struct bw *w, const char *s) { bw_put(w, s, strlen(s)); }

void bw_u64(struct bw *w, uint64_t v)
{
    char tmp[20];
    size_t i = sizeof tmp;
    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    bw_put(w, tmp + i, sizeof tmp - i);
}

void bw_vprintf(struct bw *w, const char *fmt, va_list ap)
{
    if (w->full)
        return;
    size_t room = w->cap - w->len;
    int n = vsnprintf(room ? w->buf + w->len : NULL, room, fmt, ap);
    if (n < 0 || (n > 0 && (size_t)n >= room)) {
        w->full = 1;
        return;
    }
    w->len += (size_t)n;
}

void bw_printf(struct bw *w, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    bw_vprintf(w, fmt, ap);
    va_end(ap);
}

static int plain(unsigned char c) { return c >= 0x20 && c < 0x7f && c != '"' && c != '\\'; }

/* Bytes the escaped form of c takes. */
static size_t escaped_len(unsigned char c, enum bw_esc esc)
{
    if (plain(c))
        return 1;
    if (esc == BW_ESC_JSON)
        return c == '"' || c == '\\' ? 2 : 6;
    return 4;
}

static char *put_one(char *p, unsigned char c, enum bw_esc esc)
{
    static const char hex[] = "0123456789abcdef";
    if (plain(c)) {
        *p++ = (char)c;
    } else if (esc == BW_ESC_JSON && (c == '"' || c == '\\')) {
        *p++ = '\\';
        *p++ = (char)c;
    } else {
        memcpy(p, esc == BW_ESC_JSON ? "\\u00" : "\\x", esc == BW_ESC_JSON ? 4 : 2);
        p += esc == BW_ESC_JSON ? 4 : 2;
        *p++ = hex[c >> 4];
        *p++ = hex[c & 15];
    }
    return p;
}

int bw_escaped(struct bw *w, const char *s, size_t n, enum bw_esc esc, size_t budget)
{
    if (w->full)
        return 0;
    const size_t mark = sizeof BW_CUT_MARK - 1;
    /* Most fields (a path, a browser's User-Agent) need no escape: one scan
     * and one copy, at a few instructions a byte instead of the loops below. */
    size_t plain_run = 0;
    while (plain_run < n && plain_run <= budget && plain((unsigned char)s[plain_run]))
        plain_run++;
    if (plain_run == n && n <= budget) {
        bw_put(w, s, n);
        return 0;
    }
    /* One pass finds both the longest prefix whose escaped form fits the
     * budget and the longest one that leaves room for the mark; it stops
     * at the budget, so a huge field costs no more than a short one. */
    size_t out = 0, keep = 0, keep_out = 0, i;
    for (i = 0; i < n; i++) {
        size_t u = escaped_len((unsigned char)s[i], esc);
        if (out + u > budget)
            break;
        out += u;
        if (out + mark <= budget) {
            keep = i + 1;
            keep_out = out;
        }
    }
    int cut = i < n;
    if (cut) {
        n = keep;
        out = budget >= mark ? keep_out + mark : 0;
    }
    if (out > w->cap - w->len) {
        w->full = 1;
        return cut;
    }
    char *p = w->buf + w->len;
    for (i = 0; i < n; i++)
        p = put_one(p, (unsigned char)s[i], esc);
    if (cut && budget >= mark) {
        memcpy(p, BW_CUT_MARK, mark);
        p += mark;
    }
    w->len = (size_t)(p - w->buf);
    w->cut |= (uint8_t)cut;
    return cut;
}

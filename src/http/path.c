#include "http/path.h"

#include <string.h>

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

int path_normalize(const char *in, size_t len, char *out, size_t outcap)
{
    if (len == 0 || in[0] != '/')
        return -1;
    if (outcap < 2)
        return PATH_TOO_LONG;
    size_t o = 0;     /* bytes in out */
    size_t seg = 0;   /* start of the current segment in out (after its '/') */
    out[o++] = '/';
    seg = o;
    for (size_t i = 1; i <= len; i++) {
        char c;
        if (i == len) {
            c = '/'; /* flush the last segment */
        } else if (in[i] == '%') {
            if (i + 2 >= len)
                return -1;
            int hi = hexval(in[i + 1]), lo = hexval(in[i + 2]);
            if (hi < 0 || lo < 0)
                return -1;
            c = (char)(hi << 4 | lo);
            if (c == '\0')
                return -1;
            i += 2;
        } else {
            c = in[i];
            if (c == '\0')
                return -1;
        }
        /* out may fill up to outcap while working (a '/' after the last
         * segment and "." or ".." before they are dropped); the result must
         * leave room for the NUL, checked at the end. */
        if (c != '/') {
            if (o >= outcap)
                return PATH_TOO_LONG;
            out[o++] = c;
            continue;
        }
        /* End of a segment out[seg..o). */
        size_t n = o - seg;
        if (n == 0) {
            /* "//": drop the empty segment */
        } else if (n == 1 && out[seg] == '.') {
            o = seg;
        } else if (n == 2 && out[seg] == '.' && out[seg + 1] == '.') {
            if (seg == 1)
                return -1; /* above the root */
            /* drop ".." and the segment before it */
            o = seg - 1;
            while (o > 0 && out[o - 1] != '/')
                o--;
        } else {
            if (o >= outcap)
                return PATH_TOO_LONG;
            out[o++] = '/';
        }
        seg = o;
    }
    /* Every segment got a '/' after it; keep it only if the request had one
     * (it asks for a directory) or if the result is the root. */
    int trailing = len > 0 && (in[len - 1] == '/' ||
                               (len >= 2 && in[len - 1] == '.' && in[len - 2] == '/') ||
                               (len >= 3 && in[len - 1] == '.' && in[len - 2] == '.' &&
                                in[len - 3] == '/'));
    if (o > 1 && out[o - 1] == '/' && !trailing)
        o--;
    if (o >= outcap)
        return PATH_TOO_LONG;
    out[o] = '\0';
    return (int)o;
}

int path_has_dotfile(const char *path, size_t len)
{
    for (size_t i = 0; i + 1 < len; i++)
        if (path[i] == '/' && path[i + 1] == '.')
            return 1;
    return 0;
}

/* RFC 3986 pchar minus pct-encoded, plus '/': what may stay raw in a path. */
static int path_char_raw(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return 1;
    return c && strchr("-._~!$&'()*+,;=:@/", c) != NULL;
}

int path_encode(const char *in, size_t len, char *out, size_t outcap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)in[i];
        if (path_char_raw(c)) {
            if (o + 1 > outcap)
                return -1;
            out[o++] = (char)c;
        } else {
            if (o + 3 > outcap)
                return -1;
            out[o++] = '%';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    return (int)o;
}

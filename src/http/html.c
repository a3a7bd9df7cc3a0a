#include "http/html.h"

#include <string.h>

int html_escape(const char *in, size_t len, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        const char *rep;
        switch (in[i]) {
        case '&': rep = "&amp;"; break;
        case '<': rep = "&lt;"; break;
        case '>': rep = "&gt;"; break;
        case '"': rep = "&quot;"; break;
        case '\'': rep = "&#39;"; break;
        default: rep = NULL; break;
        }
        size_t n = rep ? strlen(rep) : 1;
        if (o + n > cap)
            return -1;
        if (rep)
            memcpy(out + o, rep, n);
        else
            out[o] = in[i];
        o += n;
    }
    return (int)o;
}

static int unreserved(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '.' || c == '_' || c == '~';
}

int uri_escape_segment(const char *in, size_t len, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)in[i];
        size_t n = unreserved(c) ? 1 : 3;
        if (o + n > cap)
            return -1;
        if (n == 1) {
            out[o] = (char)c;
        } else {
            out[o] = '%';
            out[o + 1] = hex[c >> 4];
            out[o + 2] = hex[c & 15];
        }
        o += n;
    }
    return (int)o;
}

#include "net/tls_sni.h"

#include <string.h>
#include <strings.h>

static unsigned be16(const unsigned char *p) { return (unsigned)p[0] << 8 | p[1]; }

int tls_sni_from_ext(const unsigned char *ext, size_t len, char *out)
{
    /* ServerNameList: a 2-byte length, then entries of a type byte and a
     * 2-byte length and that many bytes */
    if (len < 2 || be16(ext) != len - 2)
        return -1;
    size_t at = 2;
    while (at + 3 <= len) {
        unsigned type = ext[at];
        size_t n = be16(ext + at + 1);
        at += 3;
        if (n > len - at)
            return -1;
        if (type == 0) { /* host_name */
            const unsigned char *name = ext + at;
            if (n && name[n - 1] == '.')
                n--;
            if (n == 0 || n > TLS_SNI_MAX || memchr(name, 0, n))
                return -1;
            memcpy(out, name, n);
            out[n] = 0;
            return (int)n;
        }
        at += n;
    }
    return -1;
}

int tls_sni_name_matches(const char *pattern, const char *host)
{
    if (pattern[0] == '*' && pattern[1] == '.') {
        const char *dot = strchr(host, '.');
        return dot && dot != host && !strcasecmp(dot + 1, pattern + 2);
    }
    return !strcasecmp(pattern, host);
}

int tls_sni_name_valid(const char *name, size_t len)
{
    if (len >= 2 && name[0] == '*' && name[1] == '.') {
        name += 2;
        len -= 2;
    }
    if (!len || len > TLS_SNI_MAX)
        return 0;
    size_t label = 0;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        if (c == '.') {
            if (!label || name[i - 1] == '-')
                return 0;
            label = 0;
            continue;
        }
        int alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!alnum && (c != '-' || !label))
            return 0;
        if (++label > 63)
            return 0;
    }
    return label && name[len - 1] != '-';
}

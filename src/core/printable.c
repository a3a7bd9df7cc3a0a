#include "core/printable.h"

void text_printable(char *s, size_t n, int keep_lines)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c < 0x20 && !(keep_lines && (c == '\n' || c == '\t'))) || c >= 0x7f)
            s[i] = '?';
    }
}

/* Text from outside herd (a server's status line or page, a compared
 * server's version line or log, a file given to --merge) on its way to a
 * terminal or a report: an ESC starts a sequence that can retitle the
 * window or clear it, and bytes >= 0x80 hold C1 controls in some
 * encodings. */
#ifndef HERD_CORE_PRINTABLE_H
#define HERD_CORE_PRINTABLE_H

#include <stddef.h>

/* In place, s[0..n): controls, DEL and bytes >= 0x80 become '?'; line feeds
 * and tabs stay when keep_lines. Printable ASCII is left as it is. */
void text_printable(char *s, size_t n, int keep_lines);

#endif

/* A bounded writer: appends to buf[0..cap) and never writes at or past
 * buf + cap, whatever it is asked to append. Every append checks the room
 * itself, so no caller does arithmetic on what is left (the access log once
 * did, and an unsigned subtraction that wrapped let a long request write
 * past its buffer).
 *
 * Two kinds of append:
 *  - Whole pieces (bytes, strings, numbers, printf text) go in whole or not
 *    at all. One that does not fit sets full, and from then on nothing is
 *    appended, so buf[0..len) is always a run of whole pieces: a head
 *    builder can say "does not fit", a report ends at a row boundary.
 *  - Escaped text is cut on purpose, at a budget the caller gives per
 *    field: when its escaped form is longer, the text is cut between two
 *    escapes and ends with BW_CUT_MARK, all within the budget, and cut is
 *    set. Whether it fits the room left is then decided as for a piece.
 *
 * Bytes in buf[len..cap) are scratch: a piece that did not fit may have
 * been formatted there. */
#ifndef HERD_CORE_BWRITER_H
#define HERD_CORE_BWRITER_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#define BW_CUT_MARK "..."

struct bw {
    char *buf;
    size_t len, cap;
    uint8_t full; /* a piece did not fit; nothing was appended since */
    uint8_t cut;  /* some escaped text was cut at its budget */
};

/* How client bytes are made safe for one line of a log:
 * BW_ESC_LOG as nginx does: '"', '\\', controls and bytes >= 0x7f as \xHH;
 * BW_ESC_JSON as JSON strings: \" \\ and the others as \u00HH. */
enum bw_esc { BW_ESC_LOG, BW_ESC_JSON };

static inline void bw_init(struct bw *w, char *buf, size_t cap)
{
    *w = (struct bw){.buf = buf, .cap = cap};
}

void bw_put(struct bw *w, const void *s, size_t n);
void bw_puts(struct bw *w, const char *s);
void bw_u64(struct bw *w, uint64_t v); /* decimal */

/* printf text as one piece. It needs one byte of room beyond its length
 * (vsnprintf's terminating NUL, which is not counted in len). */
void bw_printf(struct bw *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void bw_vprintf(struct bw *w, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

/* s[0..n) escaped in style esc, at most budget bytes of output including
 * the cut mark (a budget under its length leaves a cut text empty).
 * Returns 1 when the text was cut. */
int bw_escaped(struct bw *w, const char *s, size_t n, enum bw_esc esc, size_t budget);

#endif

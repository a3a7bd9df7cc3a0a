/* libFuzzer target: the logger's decoder of access-log records
 * (proc/alog_wire.c) and its formatter (proc/alog_text.c), fed what a
 * hostile or broken worker could send as one datagram. The first input
 * byte picks the mode: even, the rest is the datagram as is; odd, each
 * record's length is made to agree with its field lengths (cut to what is
 * left), so any head, flags, status and field bytes reach the formatter.
 * alog_decode must accept only records that lie within the datagram, and
 * every record it accepts must become one well-formed line of at most
 * ALOG_RECORD_MAX bytes carrying its fields whole or cut with the mark
 * (tests/unit/alog_check.h), never writing past its buffer (a guard region
 * after it). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../unit/alog_check.h"

#define ENSURE(c)                                                                   \
    do {                                                                            \
        if (!(c))                                                                   \
            __builtin_trap();                                                       \
    } while (0)

#define GUARD 4096

/* Makes the head at p[0..n) claim exactly the fields that follow it, each
 * cut to what is left of the input. */
static void repair(char *p, size_t n)
{
    struct alog_wire h;
    if (n < sizeof h)
        return;
    memcpy(&h, p, sizeof h);
    size_t left = n - sizeof h;
    for (int k = 0; k < ALOG_NFIELDS; k++) {
        if (h.flen[k] > left)
            h.flen[k] = (uint16_t)left;
        left -= h.flen[k];
    }
    h.len = (uint16_t)(n - left);
    memcpy(p, &h, sizeof h);
}

/* The request fields of a decoded record, as record_ok wants them. */
static const struct fields *fields_of(const struct alog_entry *e, struct fields *f)
{
    if (!(e->h.flags & ALOG_W_REQ))
        return NULL;
    *f = (struct fields){e->field[ALOG_F_METHOD], e->field[ALOG_F_TARGET],
                         e->h.flags & ALOG_W_REFERER ? e->field[ALOG_F_REFERER] : NULL,
                         e->h.flags & ALOG_W_UA ? e->field[ALOG_F_UA] : NULL,
                         e->h.flen[ALOG_F_METHOD], e->h.flen[ALOG_F_TARGET],
                         e->h.flen[ALOG_F_REFERER], e->h.flen[ALOG_F_UA]};
    return f;
}

/* One decoded record's line: bounded, one line, and its fields when the
 * checker can read them (it expects HTTP/1.1). */
static void check_line(const struct alog_entry *e, const char *line, size_t len)
{
    ENSURE(len > 0 && len <= ALOG_RECORD_MAX && line[len - 1] == '\n');
    ENSURE(memchr(line, '\n', len - 1) == NULL);
    struct fields f;
    const struct fields *want = fields_of(e, &f);
    if (!want || e->h.minor == 1)
        ENSURE(record_ok(line, len, (enum log_format)e->h.fmt, want));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char *out;
    static struct alog_cache stamps;
    if (!out) {
        out = malloc(ALOG_RECORD_MAX + GUARD);
        ENSURE(out);
        memset(out + ALOG_RECORD_MAX, '#', GUARD);
        alog_cache_init(&stamps);
    }
    if (size == 0 || size > ALOG_BUF + 1)
        return 0;
    int fix = data[0] & 1;
    size_t n = size - 1;
    char *in = malloc(n ? n : 1); /* its own allocation: ASan sees reads past it */
    ENSURE(in);
    memcpy(in, data + 1, n);
    for (size_t at = 0; at < n;) {
        if (fix)
            repair(in + at, n - at);
        struct alog_entry e;
        long k = alog_decode(in + at, n - at, &e);
        if (k < 0)
            break;
        ENSURE((size_t)k >= sizeof e.h && (size_t)k <= n - at);
        check_line(&e, out, alog_text(&stamps, &e, out));
        at += (size_t)k;
    }
    for (size_t i = 0; i < GUARD; i++)
        ENSURE(out[ALOG_RECORD_MAX + i] == '#');
    free(in);
    return 0;
}

#include "http/body.h"

/* One state per place in the grammar of body.h; a byte moves at most one
 * step, so a body split anywhere decodes the same as a whole one. */
enum {
    B_DONE = 0,
    B_LENGTH,       /* Content-Length data */
    B_SIZE,         /* chunk-size hex digits */
    B_SIZE_WS,      /* OWS after the size: only CR may follow */
    B_SIZE_OWS,     /* OWS after an extension: ';' or CR next */
    B_EXT_NAME0,    /* OWS after ';', then the first name character */
    B_EXT_NAME,     /* extension name */
    B_EXT_EQ_OWS,   /* OWS after '=', then the value */
    B_EXT_TOKEN,    /* a token value */
    B_EXT_QUOTED,   /* inside a quoted-string value */
    B_EXT_ESCAPE,   /* after a backslash in it */
    B_SIZE_LF,      /* LF ending the chunk line */
    B_DATA,         /* chunk data */
    B_DATA_CR,      /* CRLF after the data */
    B_DATA_LF,
    B_TRAILER,      /* a trailer name's first byte, or CR of the last line */
    B_TRAILER_NAME,
    B_TRAILER_VALUE,
    B_TRAILER_LF,   /* LF ending a trailer line */
    B_LAST_LF,      /* LF of the final empty line */
};

/* RFC 9110 5.6.2 token characters, and 5.5 field-value bytes (VCHAR,
 * obs-text, SP, HTAB). */
static const uint8_t tchar_map[256] = {
    ['!'] = 1, ['#'] = 1, ['$'] = 1, ['%'] = 1, ['&'] = 1, ['\''] = 1, ['*'] = 1,
    ['+'] = 1, ['-'] = 1, ['.'] = 1, ['^'] = 1, ['_'] = 1, ['`'] = 1, ['|'] = 1,
    ['~'] = 1, ['0' ... '9'] = 1, ['A' ... 'Z'] = 1, ['a' ... 'z'] = 1,
};

static int tchar(char c) { return tchar_map[(unsigned char)c]; }

static int field_byte(char c)
{
    unsigned char u = (unsigned char)c;
    return u == '\t' || (u >= 0x20 && u != 0x7f);
}

static int ows(char c) { return c == ' ' || c == '\t'; }

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

void body_skip_start(struct body_skip *b, int64_t content_length, int chunked,
                     uint32_t max_trailer)
{
    b->total = 0;
    b->line = 0;
    b->digits = 0;
    b->trailer = max_trailer + 2; /* and the final CRLF */
    if (chunked) {
        b->state = B_SIZE;
        b->left = 0;
    } else {
        b->state = content_length > 0 ? B_LENGTH : B_DONE;
        b->left = content_length > 0 ? (uint64_t)content_length : 0;
    }
}

/* The chunk line ended: data next, or the trailers after the last chunk. */
static int size_done(struct body_skip *b, uint64_t max)
{
    if (b->left > max || b->total > max - b->left)
        return BODY_TOO_LARGE;
    b->total += b->left;
    b->state = b->left ? B_DATA : B_TRAILER;
    return 0;
}

/* One byte of the chunk line (size and extensions). Returns 0 or an error. */
static int chunk_line_byte(struct body_skip *b, char c, uint64_t max)
{
    if (++b->line > BODY_CHUNK_LINE_MAX)
        return BODY_TOO_LARGE;
    switch (b->state) {
    case B_SIZE: {
        int h = hexval(c);
        if (h >= 0) {
            if (++b->digits > 16)
                return BODY_ERROR;
            b->left = b->left << 4 | (uint64_t)h;
            return 0;
        }
        if (!b->digits)
            return BODY_ERROR;
        if (c == ';') {
            b->state = B_EXT_NAME0;
            return 0;
        }
        b->state = B_SIZE_WS; /* this byte is the first after the digits */
        __attribute__((fallthrough));
    }
    case B_SIZE_WS:
        /* "5 ;a" is BWS to RFC 9112 but an error to h11 and other strict
         * parsers: refused, so no two parsers split a stream differently. */
        if (c == '\r')
            b->state = B_SIZE_LF;
        else if (!ows(c))
            return BODY_ERROR;
        return 0;
    case B_SIZE_OWS:
        if (c == ';')
            b->state = B_EXT_NAME0;
        else if (c == '\r')
            b->state = B_SIZE_LF;
        else if (!ows(c))
            return BODY_ERROR;
        return 0;
    case B_EXT_NAME0:
        if (tchar(c))
            b->state = B_EXT_NAME;
        else if (!ows(c))
            return BODY_ERROR;
        return 0;
    case B_EXT_NAME:
        if (tchar(c))
            return 0;
        if (c == '=') {
            b->state = B_EXT_EQ_OWS;
            return 0;
        }
        b->state = B_SIZE_OWS;
        b->line--; /* the same byte again, as the one after the name */
        return chunk_line_byte(b, c, max);
    case B_EXT_EQ_OWS:
        if (c == '"')
            b->state = B_EXT_QUOTED;
        else if (tchar(c))
            b->state = B_EXT_TOKEN;
        else if (!ows(c))
            return BODY_ERROR;
        return 0;
    case B_EXT_TOKEN:
        if (tchar(c))
            return 0;
        b->state = B_SIZE_OWS;
        b->line--;
        return chunk_line_byte(b, c, max);
    case B_EXT_QUOTED:
        if (c == '"')
            b->state = B_SIZE_OWS;
        else if (c == '\\')
            b->state = B_EXT_ESCAPE;
        else if (!field_byte(c))
            return BODY_ERROR;
        return 0;
    case B_EXT_ESCAPE:
        if (!field_byte(c))
            return BODY_ERROR;
        b->state = B_EXT_QUOTED;
        return 0;
    case B_SIZE_LF:
        if (c != '\n')
            return BODY_ERROR;
        return size_done(b, max);
    }
    return BODY_ERROR;
}

/* Framing fields have no place in a trailer (RFC 9110 6.5.1). h11 rejects
 * a trailer Content-Length it cannot parse and a Transfer-Encoding other than
 * chunked; herd drops trailers anyway, so it refuses both names outright. */
static const char framing_name[2][18] = {"content-length", "transfer-encoding"};

/* While a trailer name is read, b->line counts its bytes and b->digits has
 * a bit for each framing name it still matches; c is its next byte. */
static void match_framing_name(struct body_skip *b, char c)
{
    for (int i = 0; i < 2; i++)
        if (b->line >= sizeof framing_name[i] || (c | 0x20) != framing_name[i][b->line])
            b->digits &= (uint8_t)~(1u << i);
    if (b->line < sizeof framing_name[0])
        b->line++;
}

static int is_framing_name(const struct body_skip *b)
{
    for (int i = 0; i < 2; i++)
        if ((b->digits >> i & 1) && b->line < sizeof framing_name[i] &&
            framing_name[i][b->line] == '\0')
            return 1;
    return 0;
}

/* One byte of the trailer section or of the final CRLF. */
static int trailer_byte(struct body_skip *b, char c)
{
    if (b->trailer == 0)
        return BODY_TOO_LARGE;
    b->trailer--;
    switch (b->state) {
    case B_TRAILER:
        if (c == '\r') {
            b->state = B_LAST_LF;
        } else if (tchar(c)) {
            b->state = B_TRAILER_NAME;
            b->line = 0;
            b->digits = 3;
            match_framing_name(b, c);
        } else {
            return BODY_ERROR; /* obs-fold, a bare LF, or a bad name */
        }
        return 0;
    case B_TRAILER_NAME:
        if (c == ':') {
            if (is_framing_name(b))
                return BODY_ERROR;
            b->state = B_TRAILER_VALUE;
        } else if (tchar(c)) {
            match_framing_name(b, c);
        } else {
            return BODY_ERROR;
        }
        return 0;
    case B_TRAILER_VALUE:
        if (c == '\r')
            b->state = B_TRAILER_LF;
        else if (!field_byte(c))
            return BODY_ERROR;
        return 0;
    case B_TRAILER_LF:
        if (c != '\n')
            return BODY_ERROR;
        b->state = B_TRAILER;
        return 0;
    case B_LAST_LF:
        if (c != '\n')
            return BODY_ERROR;
        b->state = B_DONE;
        return 0;
    }
    return BODY_ERROR;
}

/* Takes a run of data at buf[0..len) for the current chunk or body. */
static size_t take_data(struct body_skip *b, const char *buf, size_t len, struct body_data *d)
{
    size_t n = len < b->left ? len : (size_t)b->left;
    d->p = buf;
    d->len = n;
    b->left -= n;
    if (b->left == 0)
        b->state = b->state == B_LENGTH ? B_DONE : B_DATA_CR;
    return n;
}

long body_decode(struct body_skip *b, const char *buf, size_t len, uint64_t max,
                 struct body_data *data)
{
    size_t i = 0;
    data->p = buf;
    data->len = 0;
    while (i < len && b->state != B_DONE) {
        char c = buf[i];
        int rc = 0;
        switch (b->state) {
        case B_LENGTH:
        case B_DATA:
            return (long)(i + take_data(b, buf + i, len - i, data));
        case B_DATA_CR:
            if (c != '\r')
                return BODY_ERROR;
            b->state = B_DATA_LF;
            break;
        case B_DATA_LF:
            if (c != '\n')
                return BODY_ERROR;
            b->state = B_SIZE;
            b->left = 0;
            b->digits = 0;
            b->line = 0;
            break;
        case B_TRAILER:
        case B_TRAILER_NAME:
        case B_TRAILER_VALUE:
        case B_TRAILER_LF:
        case B_LAST_LF:
            rc = trailer_byte(b, c);
            break;
        default:
            rc = chunk_line_byte(b, c, max);
            break;
        }
        if (rc < 0)
            return rc;
        /* framing counts toward the cap too (data was counted at its size) */
        if (++b->total > max)
            return BODY_TOO_LARGE;
        i++;
    }
    return (long)i;
}

long body_skip(struct body_skip *b, const char *buf, size_t len, uint64_t max)
{
    size_t i = 0;
    while (i < len && b->state != B_DONE) {
        struct body_data d;
        long n = body_decode(b, buf + i, len - i, max, &d);
        if (n < 0)
            return n;
        i += (size_t)n;
    }
    return (long)i;
}

size_t body_chunk_head(uint64_t n, char out[19])
{
    static const char hex[] = "0123456789abcdef";
    char tmp[16];
    size_t k = 0;
    do {
        tmp[k++] = hex[n & 15];
        n >>= 4;
    } while (n);
    size_t o = 0;
    while (k)
        out[o++] = tmp[--k];
    out[o++] = '\r';
    out[o++] = '\n';
    return o;
}

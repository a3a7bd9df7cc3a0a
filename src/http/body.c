#include "http/body.h"

enum {
    B_DONE = 0,
    B_LENGTH,     /* Content-Length: left bytes to go */
    B_SIZE,       /* chunk-size hex digits */
    B_SIZE_WS,    /* whitespace after the size: only ';' or the line end may follow */
    B_EXT,        /* chunk extensions up to the line end */
    B_SIZE_LF,    /* LF after the chunk-size line's CR */
    B_DATA,       /* chunk data: left bytes to go */
    B_DATA_CR,    /* CRLF after the data */
    B_DATA_LF,
    B_TRAILER,    /* start of a trailer line, or the final empty line */
    B_TRAILER_LINE,
    B_LAST_LF,    /* LF of the final empty line */
};

void body_skip_start(struct body_skip *b, int64_t content_length, int chunked)
{
    b->total = 0;
    b->left = 0;
    if (chunked) {
        b->state = B_SIZE;
        b->left = -1; /* no digit yet */
    } else {
        b->state = content_length > 0 ? B_LENGTH : B_DONE;
        b->left = content_length;
    }
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

long body_skip(struct body_skip *b, const char *buf, size_t len, uint64_t max)
{
    size_t i = 0;
    while (i < len && b->state != B_DONE) {
        char c = buf[i];
        switch (b->state) {
        case B_LENGTH: {
            size_t n = len - i < (uint64_t)b->left ? len - i : (size_t)b->left;
            i += n;
            b->left -= (int64_t)n;
            if (b->left == 0)
                b->state = B_DONE;
            continue;
        }
        case B_SIZE: {
            int h = hexval(c);
            if (h >= 0) {
                if (b->left < 0)
                    b->left = 0;
                if (b->left > (INT64_MAX >> 4))
                    return -1;
                b->left = b->left * 16 + h;
                break;
            }
            if (b->left < 0)
                return -1; /* no digits */
            if (c == ';')
                b->state = B_EXT;
            else if (c == ' ' || c == '\t')
                b->state = B_SIZE_WS;
            else if (c == '\r')
                b->state = B_SIZE_LF;
            else if (c == '\n')
                goto size_done;
            else
                return -1;
            break;
        }
        case B_SIZE_WS:
            if (c == ';')
                b->state = B_EXT;
            else if (c == '\r')
                b->state = B_SIZE_LF;
            else if (c == '\n')
                goto size_done;
            else if (c != ' ' && c != '\t')
                return -1;
            break;
        case B_EXT:
            if (c == '\n')
                goto size_done;
            if (c == '\r')
                b->state = B_SIZE_LF;
            else if ((unsigned char)c < 0x20 && c != '\t')
                return -1;
            break;
        case B_SIZE_LF:
            if (c != '\n')
                return -1;
        size_done:
            b->total += b->left;
            if ((uint64_t)b->total > max)
                return -1;
            b->state = b->left == 0 ? B_TRAILER : B_DATA;
            break;
        case B_DATA: {
            size_t n = len - i < (uint64_t)b->left ? len - i : (size_t)b->left;
            i += n;
            b->left -= (int64_t)n;
            if (b->left == 0)
                b->state = B_DATA_CR;
            continue;
        }
        case B_DATA_CR:
            if (c == '\n') {
                b->state = B_SIZE;
                b->left = -1;
            } else if (c == '\r') {
                b->state = B_DATA_LF;
            } else {
                return -1;
            }
            break;
        case B_DATA_LF:
            if (c != '\n')
                return -1;
            b->state = B_SIZE;
            b->left = -1;
            break;
        case B_TRAILER:
            if (c == '\n')
                b->state = B_DONE;
            else if (c == '\r')
                b->state = B_LAST_LF;
            else
                b->state = B_TRAILER_LINE;
            break;
        case B_TRAILER_LINE:
            if (c == '\n')
                b->state = B_TRAILER;
            break;
        case B_LAST_LF:
            if (c != '\n')
                return -1;
            b->state = B_DONE;
            break;
        }
        i++;
    }
    return (long)i;
}

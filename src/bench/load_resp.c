#include "bench/load_resp.h"

#include <string.h>
#include <strings.h>

void load_resp_start(struct load_resp *r, int head_request)
{
    memset(r, 0, sizeof *r);
    r->state = RESP_HEAD;
    r->head_only = (uint8_t)!!head_request;
}

static long bad(struct load_resp *r, const char *why)
{
    r->error = why;
    return -1;
}

/* "HTTP/1.x SSS[ reason]" without the line end. */
static int status_line(struct load_resp *r, const char *p, size_t n, int *minor)
{
    if (n < 12 || memcmp(p, "HTTP/1.", 7) || (p[7] != '0' && p[7] != '1') || p[8] != ' ')
        return -1;
    if (n > 12 && p[12] != ' ')
        return -1;
    unsigned s = 0;
    for (int i = 9; i < 12; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        s = s * 10 + (unsigned)(p[i] - '0');
    }
    if (s < 100)
        return -1;
    r->status = (uint16_t)s;
    *minor = p[7] - '0';
    return 0;
}

static int name_is(const char *p, size_t n, const char *lower, size_t ln)
{
    return n == ln && !strncasecmp(p, lower, ln);
}

/* Does the comma-separated list v contain token tok (case-insensitive)? */
static int has_token(const char *v, size_t n, const char *tok)
{
    size_t tl = strlen(tok);
    const char *end = v + n;
    while (v < end) {
        while (v < end && (*v == ' ' || *v == '\t' || *v == ','))
            v++;
        const char *s = v;
        while (v < end && *v != ',')
            v++;
        const char *e = v;
        while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
            e--;
        if ((size_t)(e - s) == tl && !strncasecmp(s, tok, tl))
            return 1;
    }
    return 0;
}

/* Is chunked the last of the transfer codings in v? */
static int chunked_last(const char *v, size_t n)
{
    const char *e = v + n;
    while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    return e - v >= 7 && !strncasecmp(e - 7, "chunked", 7) &&
           (e - v == 7 || e[-8] == ',' || e[-8] == ' ' || e[-8] == '\t');
}

/* Parses one whole head if buf holds it. Returns its length, 0 when
 * incomplete, -1 when invalid. Sets the state for the body. */
static long head(struct load_resp *r, const char *buf, size_t len)
{
    const char *end = buf + len, *p = buf;
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl)
        return len >= RESP_MAX_HEAD ? bad(r, "response head too large") : 0;
    size_t n = (size_t)(nl - p);
    if (n && p[n - 1] == '\r')
        n--;
    int minor;
    if (status_line(r, p, n, &minor) < 0)
        return bad(r, "bad status line");
    int64_t clen = -1;
    int chunked = 0, other_coding = 0, close = 0, keepalive = 0;
    for (;;) {
        p = nl + 1;
        nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            return len >= RESP_MAX_HEAD ? bad(r, "response head too large") : 0;
        if ((size_t)(nl + 1 - buf) > RESP_MAX_HEAD)
            return bad(r, "response head too large");
        n = (size_t)(nl - p);
        if (n && p[n - 1] == '\r')
            n--;
        if (!n)
            break;
        /* Only three headers decide framing; a first-letter test skips the rest. */
        char c = (char)(p[0] | 0x20);
        if (c != 'c' && c != 't')
            continue;
        const char *colon = memchr(p, ':', n);
        if (!colon)
            return bad(r, "header line without a colon");
        size_t nlen = (size_t)(colon - p);
        const char *v = colon + 1, *ve = p + n;
        while (v < ve && (*v == ' ' || *v == '\t'))
            v++;
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
            ve--;
        size_t vlen = (size_t)(ve - v);
        if (name_is(p, nlen, "content-length", 14)) {
            if (!vlen || vlen > 18)
                return bad(r, "bad Content-Length");
            int64_t x = 0;
            for (size_t i = 0; i < vlen; i++) {
                if (v[i] < '0' || v[i] > '9')
                    return bad(r, "bad Content-Length");
                x = x * 10 + (v[i] - '0');
            }
            if (clen >= 0 && clen != x)
                return bad(r, "conflicting Content-Length");
            clen = x;
        } else if (name_is(p, nlen, "transfer-encoding", 17)) {
            if (chunked_last(v, vlen))
                chunked = 1;
            else
                other_coding = 1;
        } else if (name_is(p, nlen, "connection", 10)) {
            close |= has_token(v, vlen, "close");
            keepalive |= has_token(v, vlen, "keep-alive");
        }
    }
    long used = (long)(nl + 1 - buf);
    r->keepalive = (uint8_t)(minor ? !close : keepalive && !close);
    if (r->status < 200) {
        if (r->status == 101)
            return bad(r, "unexpected 101 Switching Protocols");
        r->state = RESP_HEAD; /* an interim response: the real one follows */
        return used;
    }
    if (r->head_only || r->status == 204 || r->status == 304) {
        r->state = RESP_DONE;
    } else if (chunked || other_coding) {
        if (clen >= 0)
            return bad(r, "both Transfer-Encoding and Content-Length");
        /* A coding other than chunked last means the close ends the body. */
        r->state = chunked && !other_coding ? RESP_CHUNK_SIZE : RESP_UNTIL_CLOSE;
        r->digits = 0;
        r->remaining = 0;
    } else if (clen >= 0) {
        r->remaining = (uint64_t)clen;
        r->state = clen ? RESP_BODY_LEN : RESP_DONE;
    } else {
        r->state = RESP_UNTIL_CLOSE;
    }
    if (r->state == RESP_UNTIL_CLOSE)
        r->keepalive = 0;
    return used;
}

static int hex(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)(c | 0x20);
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

long load_resp_parse(struct load_resp *r, const char *buf, size_t len)
{
    size_t i = 0;
    while (i < len) {
        char c;
        switch (r->state) {
        case RESP_HEAD: {
            long n = head(r, buf + i, len - i);
            if (n < 0)
                return -1;
            if (n == 0)
                /* Take nothing of an incomplete head, so the caller can
                 * keep it whole; but keep what came before it (1xx). */
                return (long)i;
            i += (size_t)n;
            continue;
        }
        case RESP_BODY_LEN:
        case RESP_CHUNK_DATA: {
            size_t k = len - i < r->remaining ? len - i : (size_t)r->remaining;
            i += k;
            r->remaining -= k;
            if (!r->remaining)
                r->state = r->state == RESP_BODY_LEN ? RESP_DONE : RESP_CHUNK_END;
            continue;
        }
        case RESP_UNTIL_CLOSE:
            return (long)len;
        case RESP_DONE:
            return (long)i;
        default:
            break;
        }
        c = buf[i++];
        switch (r->state) {
        case RESP_CHUNK_SIZE: {
            int h = hex(c);
            if (h >= 0) {
                if (++r->digits > 15)
                    return bad(r, "chunk size too large");
                r->remaining = r->remaining << 4 | (uint64_t)h;
                break;
            }
            if (!r->digits)
                return bad(r, "bad chunk size");
            if (c == '\r')
                r->state = RESP_CHUNK_SIZE_LF;
            else if (c == '\n')
                goto size_line_done;
            else if (c == ';' || c == ' ' || c == '\t')
                r->state = RESP_CHUNK_EXT;
            else
                return bad(r, "bad chunk size");
            break;
        }
        case RESP_CHUNK_EXT:
            if (c == '\n')
                goto size_line_done;
            break;
        case RESP_CHUNK_SIZE_LF:
            if (c != '\n')
                return bad(r, "bad chunk size line end");
        size_line_done:
            r->digits = 0;
            r->state = r->remaining ? RESP_CHUNK_DATA : RESP_TRAILER;
            break;
        case RESP_CHUNK_END:
            if (c == '\r')
                r->state = RESP_CHUNK_END_LF;
            else if (c == '\n')
                r->state = RESP_CHUNK_SIZE;
            else
                return bad(r, "chunk data longer than its size");
            break;
        case RESP_CHUNK_END_LF:
            if (c != '\n')
                return bad(r, "chunk data longer than its size");
            r->state = RESP_CHUNK_SIZE;
            break;
        case RESP_TRAILER:
            if (c == '\r')
                r->state = RESP_TRAILER_LF;
            else if (c == '\n')
                r->state = RESP_DONE;
            else
                r->state = RESP_TRAILER_LINE;
            break;
        case RESP_TRAILER_LINE:
            if (c == '\n')
                r->state = RESP_TRAILER;
            break;
        case RESP_TRAILER_LF:
            if (c != '\n')
                return bad(r, "bad end of chunked body");
            r->state = RESP_DONE;
            break;
        default:
            return bad(r, "internal: bad parser state");
        }
    }
    return (long)i;
}

uint64_t load_resp_skippable(const struct load_resp *r)
{
    if (r->state == RESP_BODY_LEN || r->state == RESP_CHUNK_DATA)
        return r->remaining;
    return r->state == RESP_UNTIL_CLOSE ? UINT64_MAX : 0;
}

void load_resp_skip(struct load_resp *r, uint64_t n)
{
    if (r->state != RESP_BODY_LEN && r->state != RESP_CHUNK_DATA)
        return;
    r->remaining -= n;
    if (!r->remaining)
        r->state = r->state == RESP_BODY_LEN ? RESP_DONE : RESP_CHUNK_END;
}

int load_resp_eof(struct load_resp *r)
{
    if (r->state == RESP_UNTIL_CLOSE) {
        r->state = RESP_DONE;
        return 1;
    }
    return r->state == RESP_DONE;
}

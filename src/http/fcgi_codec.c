/* The FastCGI upstream codec: the request goes up as BEGIN_REQUEST, PARAMS
 * (http/fcgi_params.c) and the client's body as STDIN records; the answer
 * comes back as STDOUT records holding a CGI response (http/cgi_response.c),
 * STDERR records (to the error log) and END_REQUEST. The client's body is
 * decoded (Content-Length or chunked, http/body.c) and only its data goes
 * up; the script's output goes to the client with the Content-Length the
 * script gave, else as herd's chunks (HTTP/1.1) or until the close
 * (HTTP/1.0). Every response is read aside: its records are framing. */
#include "http/upstream_codec.h"

#include <string.h>

#include "core/bwriter.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/ratelimit.h"
#include "http/cgi_response.h"
#include "http/fcgi.h"
#include "http/proxy.h"

/* upstream_framing.kind of a response */
enum { FK_LENGTH = 1, FK_CHUNKED, FK_CLOSE, FK_DISCARD };

/* What fcgi_rx_next found. */
enum { RX_NONE, RX_STDOUT, RX_STDERR, RX_END };

/* STDERR lines logged per second and process; the rest are counted. */
#define STDERR_PER_SEC 20

static long request_head(const struct http_request *req, const struct upstream_req_info *info,
                         char *buf, size_t cap)
{
    return info->fcgi ? fcgi_build_params(req, info->fcgi, buf, cap) : -1;
}

static void request_body_start(struct upstream_framing *b, const struct http_request *req,
                               size_t max_line)
{
    memset(b, 0, sizeof *b);
    if (!fcgi_has_body(req))
        return;
    b->aside = 1;
    body_skip_start(&b->skip, req->chunked ? 0 : req->content_length, req->chunked,
                    (uint32_t)max_line);
    b->active = 1;
}

/* The client's body data as one STDIN record per 65535 bytes of this
 * call's data (the caller's room covers a header per 65535 input bytes
 * and two more), then the empty STDIN when the body ends. */
static long request_body(struct upstream_framing *b, const char *src, size_t n, uint64_t max,
                         struct reframe_out *out)
{
    size_t i = 0, rec = out->len;
    out->len += FCGI_HEADER_LEN;
    while (i < n && body_skip_active(&b->skip)) {
        struct body_data d;
        long k = body_decode(&b->skip, src + i, n - i, max, &d);
        if (k < 0) {
            out->len = rec;
            return k;
        }
        i += (size_t)k;
        while (d.len) {
            size_t room = FCGI_CONTENT_MAX - (out->len - rec - FCGI_HEADER_LEN);
            if (!room) {
                fcgi_record_head((unsigned char *)out->buf + rec, FCGI_STDIN, FCGI_CONTENT_MAX);
                rec = out->len;
                out->len += FCGI_HEADER_LEN;
                continue;
            }
            size_t take = d.len < room ? d.len : room;
            memcpy(out->buf + out->len, d.p, take);
            out->len += take;
            d.p += take;
            d.len -= take;
        }
    }
    size_t content = out->len - rec - FCGI_HEADER_LEN;
    if (content)
        fcgi_record_head((unsigned char *)out->buf + rec, FCGI_STDIN, content);
    else
        out->len = rec;
    b->active = (uint8_t)body_skip_active(&b->skip);
    if (!b->active) {
        fcgi_record_head((unsigned char *)out->buf + out->len, FCGI_STDIN, 0);
        out->len += FCGI_HEADER_LEN;
    }
    return (long)i;
}

/* Takes record framing from src[0..n) and then at most one run of STDOUT
 * or STDERR content (*p, *len), or the end of END_REQUEST. Returns the
 * bytes taken, or -1 for a record this server never asked for (another
 * version, request id or type; a malformed END_REQUEST). */
static long fcgi_rx_next(struct fcgi_rx *s, const char *src, size_t n, int *what,
                         const char **p, size_t *len)
{
    size_t i = 0;
    *what = RX_NONE;
    for (;;) {
        if (s->type == FCGI_END_REQUEST && !s->left && !s->pad) {
            *what = RX_END;
            return (long)i;
        }
        if (i == n)
            return (long)i;
        if (s->left) {
            size_t k = s->left < n - i ? s->left : n - i;
            s->left -= (uint32_t)k;
            if (s->type != FCGI_END_REQUEST) {
                *what = s->type == FCGI_STDOUT ? RX_STDOUT : RX_STDERR;
                *p = src + i;
                *len = k;
                return (long)(i + k);
            }
            i += k; /* the application's and protocol status: not needed */
            continue;
        }
        if (s->pad) {
            size_t k = s->pad < n - i ? s->pad : n - i;
            s->pad = (uint8_t)(s->pad - k);
            i += k;
            continue;
        }
        s->hdr[s->have++] = (uint8_t)src[i++];
        if (s->have < FCGI_HEADER_LEN)
            continue;
        s->have = 0;
        const uint8_t *h = s->hdr;
        uint32_t clen = (uint32_t)h[4] << 8 | h[5];
        if (h[0] != FCGI_VERSION || h[2] != 0 || h[3] != FCGI_REQUEST_ID ||
            (h[1] != FCGI_STDOUT && h[1] != FCGI_STDERR && h[1] != FCGI_END_REQUEST) ||
            (h[1] == FCGI_END_REQUEST && clen != 8))
            return -1;
        s->type = h[1];
        s->left = clen;
        s->pad = h[6];
    }
}

/* One line of a script's STDERR to the error log: rate-limited, since a
 * script a client runs can write as much as it likes. */
static void log_stderr_line(const struct upstream_framing *b, const char *p, size_t len)
{
    static struct ratelimit limit;
    unsigned held;
    int pass = ratelimit_take(&limit, clock_now_ms(), 1000, STDERR_PER_SEC, &held);
    if (held)
        log_msg(LOG_WARN, "FastCGI stderr: %u more lines not logged", held);
    if (!pass)
        return;
    /* The script's bytes (and its path) escaped as in the access log: no
     * control byte or escape sequence reaches the log or a terminal, no NUL
     * cuts the line short; bounded by the buffer whatever the line's size. */
    char text[2048 + 4], path[512 + 4];
    struct bw w;
    bw_init(&w, text, sizeof text);
    bw_escaped(&w, p, len, BW_ESC_LOG, sizeof text - 1);
    text[w.len] = '\0';
    const char *tag = b->tag ? b->tag : "?";
    bw_init(&w, path, sizeof path);
    bw_escaped(&w, tag, strlen(tag), BW_ESC_LOG, sizeof path - 1);
    path[w.len] = '\0';
    log_msg(LOG_WARN, "FastCGI stderr from %s: %s", path, text);
}

/* A run of STDERR, line by line: each line of the log is one of herd's,
 * so a script cannot write lines that look like herd's own. */
static void log_stderr(const struct upstream_framing *b, const char *p, size_t len)
{
    while (len) {
        const char *lf = memchr(p, '\n', len);
        size_t n = lf ? (size_t)(lf - p) : len;
        size_t shown = n;
        while (shown && p[shown - 1] == '\r')
            shown--;
        if (shown)
            log_stderr_line(b, p, shown);
        n += lf != NULL;
        p += n;
        len -= n;
    }
}

static void emit(struct reframe_out *out, const char *p, size_t n)
{
    size_t room = out->cap - out->len, k = n < room ? n : room;
    memcpy(out->buf + out->len, p, k);
    out->len += k;
    if (k < n) {
        memcpy(out->over + out->over_len, p + k, n - k);
        out->over_len += n - k;
    }
}

/* The client's head for a parsed CGI head r; sets b's kind. */
static int client_head(const struct upstream_response *r, int head_request, int client_minor,
                       struct upstream_head *h, struct upstream_framing *b, char *out,
                       size_t cap)
{
    enum upstream_body ub;
    if (head_request || r->status == 204 || r->status == 304) {
        b->kind = FK_DISCARD;
        ub = UB_NONE;
    } else if (r->content_length >= 0) {
        b->kind = FK_LENGTH;
        ub = UB_LENGTH;
    } else if (client_minor) {
        b->kind = FK_CHUNKED;
        ub = UB_CHUNKED;
    } else {
        b->kind = FK_CLOSE;
        ub = UB_CLOSE;
    }
    int keep = h->keepalive && ub != UB_CLOSE;
    long hl = proxy_build_response(r, ub, client_minor, keep, h->pass_server, out, cap);
    if (hl < 0)
        return -1;
    h->status = r->status;
    h->keepalive = (uint8_t)keep;
    h->reusable = 1; /* KEEP_CONN: once END_REQUEST came (the pump checks) */
    h->len = (size_t)hl;
    b->fcgi.body_left = r->content_length >= 0 ? (uint64_t)r->content_length : 0;
    b->aside = 1;
    b->active = 1; /* until END_REQUEST */
    return 0;
}

/* STDOUT's next run p[0..pl) joins the head's bytes so far, buf[*at..
 * *at + *glen): those move up to sit just before it, over the framing and
 * STDERR between them, so the head is one run of bytes whatever records
 * it came in. */
static void gather_head(char *buf, size_t *at, size_t *glen, const char *p, size_t pl)
{
    size_t to = (size_t)(p - buf) - *glen;
    memmove(buf + to, buf + *at, *glen);
    *at = to;
    *glen += pl;
}

/* Records from buf[0..len) until the CGI head in their STDOUT is whole.
 * The head is gathered in place: between calls b->fcgi holds the record
 * reader's state and, in body_left, how many bytes at buf's start are the
 * head so far. What is no longer needed (framing, and STDERR, logged as it
 * comes) is handed back to be dropped as if it were an interim answer
 * (h->status 0), so only the head's own bytes count toward max_head: a
 * script may log as much as it likes before it writes, and split its head
 * over as many records as it likes. Returns where the body starts in buf
 * once the head is whole (b->fcgi then reads the rest of its record). */
static int response_head(char *buf, size_t len, size_t max_head, int head_request,
                         int client_minor, struct upstream_head *h, struct upstream_framing *b,
                         char *out, size_t cap)
{
    struct fcgi_rx rx = b->fcgi;
    size_t glen = (size_t)rx.body_left, at = 0, off = glen;
    h->err = NULL;
    for (;;) {
        int what;
        const char *p = NULL;
        size_t pl = 0;
        long k = fcgi_rx_next(&rx, buf + off, len - off, &what, &p, &pl);
        if (k < 0) {
            h->err = "malformed FastCGI record";
            return HTTP_PARSE_ERROR;
        }
        off += (size_t)k;
        if (what == RX_NONE)
            break;
        if (what == RX_END) {
            h->err = "FastCGI request ended before a CGI head";
            return HTTP_PARSE_ERROR;
        }
        if (what == RX_STDERR) {
            log_stderr(b, p, pl);
            continue;
        }
        gather_head(buf, &at, &glen, p, pl);
        struct upstream_response r;
        int n = cgi_parse_response(buf + at, glen, max_head, &r);
        if (n == HTTP_PARSE_INCOMPLETE)
            continue;
        if (n == HTTP_PARSE_ERROR || r.status < 200) {
            h->err = glen >= max_head ? "CGI head too large" : "malformed CGI response head";
            return HTTP_PARSE_ERROR;
        }
        if (client_head(&r, head_request, client_minor, h, b, out, cap) < 0)
            return HTTP_PARSE_ERROR;
        rx.left += (uint32_t)(glen - (size_t)n); /* the body's bytes in this run */
        rx.body_left = b->fcgi.body_left;
        b->fcgi = rx;
        return (int)(at + (size_t)n);
    }
    /* All of buf is read and the head is not whole: keep only its bytes,
     * at the end, and hand back the rest to be dropped. */
    memmove(buf + len - glen, buf + at, glen);
    rx.body_left = glen;
    b->fcgi = rx;
    h->status = 0;
    return len > glen ? (int)(len - glen) : HTTP_PARSE_INCOMPLETE;
}

static void emit_chunk(struct reframe_out *out, const char *p, size_t n)
{
    char line[19];
    emit(out, line, body_chunk_head(n, line));
    emit(out, p, n);
    emit(out, "\r\n", 2);
}

/* The STDOUT of src[0..n) framed for the client into out, until
 * END_REQUEST. A script that wrote less than its Content-Length is an
 * error (the client must see the truncation: its connection closes);
 * bytes past it are dropped. */
static long response_body(struct upstream_framing *b, const char *src, size_t n,
                          struct reframe_out *out)
{
    size_t off = 0;
    while (b->active) {
        int what;
        const char *p = NULL;
        size_t pl = 0;
        long k = fcgi_rx_next(&b->fcgi, src + off, n - off, &what, &p, &pl);
        if (k < 0)
            return BODY_ERROR;
        off += (size_t)k;
        if (what == RX_NONE)
            break;
        if (what == RX_STDERR) {
            log_stderr(b, p, pl);
        } else if (what == RX_END) {
            if (b->kind == FK_LENGTH && b->fcgi.body_left)
                return BODY_ERROR;
            if (b->kind == FK_CHUNKED)
                emit(out, BODY_LAST_CHUNK, sizeof BODY_LAST_CHUNK - 1);
            b->active = 0;
        } else if (b->kind == FK_LENGTH) {
            size_t take = pl < b->fcgi.body_left ? pl : (size_t)b->fcgi.body_left;
            emit(out, p, take);
            b->fcgi.body_left -= take;
        } else if (b->kind == FK_CHUNKED) {
            if (pl)
                emit_chunk(out, p, pl);
        } else if (b->kind == FK_CLOSE) {
            emit(out, p, pl);
        }
    }
    return (long)off;
}

static int response_ends_at_close(const struct upstream_framing *b)
{
    (void)b;
    return 0; /* only END_REQUEST ends a FastCGI response */
}

static const char abort_request[FCGI_HEADER_LEN] = {
    FCGI_VERSION, FCGI_ABORT_REQUEST, 0, FCGI_REQUEST_ID, 0, 0, 0, 0,
};

const struct upstream_codec upstream_fcgi = {
    .name = "fastcgi",
    .request_head = request_head,
    .request_body_start = request_body_start,
    .request_body = request_body,
    .response_head = response_head,
    .response_body = response_body,
    .response_ends_at_close = response_ends_at_close,
    .abort = abort_request,
    .abort_len = sizeof abort_request,
};

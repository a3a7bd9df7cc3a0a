#include "proc/alog_text.h"

#include <arpa/inet.h>
#include <string.h>
#include <sys/socket.h>

#include "core/bwriter.h"
#include "proc/config.h"

/* A record's shares: whatever the request (the parser takes heads up to the
 * largest --max-header-size, 1 MiB), a record is one line of at most
 * ALOG_RECORD_MAX bytes. The method keeps at most METHOD_MAX bytes; the
 * target, Referer and User-Agent, in that order, may each take what the
 * fields before them left, less what the fields after them are promised
 * (their FLOOR) and the fixed tail. A field past its share is cut, ending
 * in BW_CUT_MARK. HEAD_MAX bounds what comes before the method (time under
 * 40 bytes, address under 64, literals), TAIL_MAX the fixed text after it
 * (about 130 bytes of literals and numbers in JSON). Shares are counted from
 * the record's start, not from the batch, so a record's text never depends
 * on how full the batch is. */
enum {
    HEAD_MAX = 256,
    METHOD_MAX = 256,
    TARGET_FLOOR = 2048,
    REFERER_FLOOR = 1024,
    UA_FLOOR = 1024,
    TAIL_MAX = 192,
    /* A cut field's text is its budget less at most this: the mark, and
     * the longest escape (6 bytes, \u00HH) that did not fit before it. */
    CUT_SLACK = 8,
};
_Static_assert(HEAD_MAX + METHOD_MAX + TARGET_FLOOR + REFERER_FLOOR + UA_FLOOR + TAIL_MAX <=
                   ALOG_RECORD_MAX,
               "the shares of a record must add up to at most ALOG_RECORD_MAX");

/* What a field may take when the text before it is used bytes long and
 * the fields after it are promised their floors. */
static size_t share_at(size_t used, size_t promised)
{
    size_t reserved = used + TAIL_MAX + promised;
    return reserved < ALOG_RECORD_MAX ? ALOG_RECORD_MAX - reserved : 0;
}

/* Walks the fields as alog_text lays them out, with "used" a lower bound of
 * the text before each one (escaping only lengthens a byte, the head and
 * literals are counted as nothing), so each share computed here is at least
 * the real one. A field keeps one byte more than that share: with more
 * bytes than its budget its escaped form is longer than the budget, so the
 * logger cuts it, within the bytes kept. After a field, the text is at
 * least the bytes kept, or, when the field was cut, its share less
 * CUT_SLACK. */
void alog_text_keep(size_t len[ALOG_NFIELDS])
{
    static const size_t later[ALOG_NFIELDS] = {
        [ALOG_F_TARGET] = REFERER_FLOOR + UA_FLOOR,
        [ALOG_F_REFERER] = UA_FLOOR,
        [ALOG_F_UA] = 0,
    };
    if (len[ALOG_F_METHOD] > METHOD_MAX + 1)
        len[ALOG_F_METHOD] = METHOD_MAX + 1;
    size_t used = 0; /* the method may be cut to nothing: not counted */
    for (int k = ALOG_F_TARGET; k < ALOG_NFIELDS; k++) {
        size_t most = share_at(used, later[k]) + 1;
        if (len[k] > most)
            len[k] = most;
        size_t floor = share_at(0, later[k]);
        floor = floor > CUT_SLACK ? floor - CUT_SLACK : 0;
        used = used + len[k] < floor ? used + len[k] : floor;
    }
}

void alog_cache_init(struct alog_cache *s)
{
    s->sec[0] = s->sec[1] = -1;
    s->family = 0;
}

static const char *stamp(struct alog_cache *s, int json, int64_t sec)
{
    if (s->sec[json] == sec)
        return s->text[json];
    s->sec[json] = sec;
    time_t t = (time_t)sec;
    struct tm tm;
    if (!localtime_r(&t, &tm) ||
        !strftime(s->text[json], sizeof s->text[json],
                  json ? "%Y-%m-%dT%H:%M:%S%z" : "%d/%b/%Y:%H:%M:%S %z", &tm))
        strcpy(s->text[json], "-");
    return s->text[json];
}

static const char *peer_text(struct alog_cache *s, const struct alog_wire *h)
{
    if (h->family != AF_INET && h->family != AF_INET6)
        return "-";
    if (s->family != h->family || memcmp(s->addr, h->addr, sizeof s->addr)) {
        if (!inet_ntop(h->family, h->addr, s->addr_text, sizeof s->addr_text))
            strcpy(s->addr_text, "-");
        s->family = h->family;
        memcpy(s->addr, h->addr, sizeof s->addr);
    }
    return s->addr_text;
}

/* A field's share of the record written so far into w. */
static size_t share(const struct bw *w, size_t promised) { return share_at(w->len, promised); }

/* The request line as logged: "-" for a request that failed to parse. */
static void put_request(struct bw *w, const struct alog_entry *e, enum bw_esc esc)
{
    if (!(e->h.flags & ALOG_W_REQ)) {
        bw_put(w, "-", 1);
        return;
    }
    size_t later = REFERER_FLOOR + UA_FLOOR;
    size_t m = share(w, TARGET_FLOOR + later);
    bw_escaped(w, e->field[ALOG_F_METHOD], e->h.flen[ALOG_F_METHOD], esc,
               m < METHOD_MAX ? m : METHOD_MAX);
    bw_put(w, " ", 1);
    bw_escaped(w, e->field[ALOG_F_TARGET], e->h.flen[ALOG_F_TARGET], esc, share(w, later));
    bw_puts(w, " HTTP/1.");
    bw_u64(w, e->h.minor);
}

/* A header field, or "-" when the request did not have it. */
static void put_header(struct bw *w, const struct alog_entry *e, int k, unsigned flag,
                       enum bw_esc esc, size_t promised)
{
    if (e->h.flags & ALOG_W_REQ && e->h.flags & flag)
        bw_escaped(w, e->field[k], e->h.flen[k], esc, share(w, promised));
    else
        bw_escaped(w, "-", 1, esc, share(w, promised));
}

size_t alog_text(struct alog_cache *s, const struct alog_entry *e, char *out)
{
    struct bw b, *w = &b;
    bw_init(w, out, ALOG_RECORD_MAX);
    int json = e->h.fmt == ACCESS_LOG_JSON;
    enum bw_esc esc = json ? BW_ESC_JSON : BW_ESC_LOG;
    const char *addr = peer_text(s, &e->h);
    const char *when = stamp(s, json, e->h.sec);
    if (json) {
        bw_puts(w, "{\"time\":\"");
        bw_puts(w, when);
        bw_puts(w, "\",\"remote_addr\":\"");
        bw_puts(w, addr);
        bw_puts(w, "\",\"request\":\"");
    } else {
        bw_puts(w, addr);
        bw_puts(w, " - - [");
        bw_puts(w, when);
        bw_puts(w, "] \"");
    }
    put_request(w, e, esc);
    bw_puts(w, json ? "\",\"status\":" : "\" ");
    bw_u64(w, e->h.status);
    bw_puts(w, json ? ",\"body_bytes_sent\":" : " ");
    bw_u64(w, e->h.bytes);
    bw_puts(w, json ? ",\"referer\":\"" : " \"");
    put_header(w, e, ALOG_F_REFERER, ALOG_W_REFERER, esc, UA_FLOOR);
    bw_puts(w, json ? "\",\"user_agent\":\"" : "\" \"");
    put_header(w, e, ALOG_F_UA, ALOG_W_UA, esc, 0);
    if (!json) {
        bw_puts(w, "\"\n");
        return w->full ? 0 : w->len;
    }
    bw_puts(w, "\",\"generation\":");
    bw_u64(w, e->h.generation);
    bw_puts(w, "}\n");
    return w->full ? 0 : w->len; /* the shares make it fit: never 0 */
}

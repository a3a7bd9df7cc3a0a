/* libFuzzer target: access-log records of hostile requests, from the
 * worker's binary record to the logger's line. The input
 * chooses the format, which headers are present, the client address, the
 * status, the byte count, how many records go into one batch, and four
 * field lengths (method, target, Referer, User-Agent) up to the largest
 * --max-header-size (1 MiB); the rest of the input is the fields' bytes,
 * repeated. Every record must be at most ALOG_WIRE_MAX bytes and decode
 * (alog_decode) to one well-formed line of at most ALOG_RECORD_MAX bytes
 * carrying its fields whole or cut with the mark (tests/unit/alog_check.h); a full batch is sent at once, or when the
 * logger's socket is full (the input chooses whether the fake logger
 * reads), records are dropped whole and counted; and nothing is written
 * past the batch (a guard region after it). */
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "../unit/alog_check.h"

#define ENSURE(c)                                                                   \
    do {                                                                            \
        if (!(c))                                                                   \
            __builtin_trap();                                                       \
    } while (0)

#define FIELD_MAX (1024 * 1024) /* config.c: the largest --max-header-size */
#define FILLED 16384 /* bytes of each field from the input: more than a record can hold */
#define GUARD 4096

static char field[4][FIELD_MAX];
static struct alog *A;
static struct sb_slot slot;
static int logger = -1; /* the logger's end of the socketpair */

static void init(void)
{
    int sp[2];
    A = malloc(sizeof *A + GUARD);
    ENSURE(A && socketpair(AF_UNIX, SOCK_DGRAM, 0, sp) == 0);
    A->fd = sp[0];
    logger = sp[1];
    for (int k = 0; k < 4; k++) /* the same bytes past FILLED for every input */
        for (size_t i = 0; i < FIELD_MAX; i++)
            field[k][i] = (char)(i * (7 + 2 * (size_t)k) % 256);
}

static uint64_t take(const uint8_t **p, size_t *n, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes && *n; i++, (*p)++, (*n)--)
        v = v << 8 | **p;
    return v;
}

/* The peer the input asks for: none (a unix client), IPv4 or IPv6. */
static const struct sockaddr_storage *peer_of(unsigned kind, struct sockaddr_storage *ss,
                                              const uint8_t **p, size_t *n)
{
    memset(ss, 0, sizeof *ss);
    if (kind == 1) {
        ss->ss_family = AF_INET;
        ((struct sockaddr_in *)ss)->sin_addr.s_addr = (uint32_t)take(p, n, 4);
    } else if (kind >= 2) {
        ss->ss_family = AF_INET6;
        for (int i = 0; i < 16; i++)
            ((struct sockaddr_in6 *)ss)->sin6_addr.s6_addr[i] = (uint8_t)take(p, n, 1);
    }
    return kind ? ss : NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!A)
        init();
    const uint8_t *p = data;
    size_t n = size;
    unsigned flags = (unsigned)take(&p, &n, 2);
    enum log_format fmt = flags & 1 ? ACCESS_LOG_JSON : ACCESS_LOG_COMBINED;
    size_t len[4];
    for (int k = 0; k < 4; k++)
        len[k] = take(&p, &n, 3) % (FIELD_MAX + 1);
    unsigned status = (unsigned)take(&p, &n, 4);
    uint64_t bytes = take(&p, &n, 8);
    struct sockaddr_storage ss;
    const struct sockaddr_storage *peer = peer_of(flags >> 1 & 3, &ss, &p, &n);
    for (int k = 0; k < 4; k++) /* the rest of the input, repeated */
        for (size_t i = 0, m; n && i < len[k] && i < FILLED; i += m) {
            m = n < FILLED - i ? n : FILLED - i;
            memcpy(field[k] + i, p, m);
        }
    struct fields f = {field[0], field[1], flags & 8 ? field[2] : NULL,
                       flags & 16 ? field[3] : NULL, len[0], len[1], len[2], len[3]};
    int unparsed = (flags & 0xe0) == 0xe0;
    const struct http_request *req = unparsed ? NULL : make_req(&f);

    alog_init(A, A->fd, fmt, &slot);
    memset((char *)A + sizeof *A, '#', GUARD);
    int records = 1 + (int)(flags >> 8 & 15); /* up to 16 of 8 KiB: past a batch */
    static char sink[ALOG_BUF + 1];
    for (int r = 0; r < records; r++) {
        size_t before = A->len;
        uint64_t dropped = slot.log_dropped;
        alog_record(A, peer, req, status, bytes);
        ENSURE(A->len <= ALOG_BUF);
        if (slot.log_dropped != dropped) { /* only when nothing could be sent */
            ENSURE(A->len == before && ALOG_BUF - before < ALOG_WIRE_MAX);
            continue;
        }
        size_t at = A->len > before ? before : 0; /* 0: the full batch went out first */
        size_t wire = A->len - at;
        ENSURE(wire <= ALOG_WIRE_MAX && text_of(A->buf + at, wire) == (long)wire);
        ENSURE(record_ok(text, text_len, fmt, unparsed ? NULL : &f));
        while (flags & 0x1000 && recv(logger, sink, sizeof sink, MSG_DONTWAIT) > 0)
            ;
    }
    for (size_t i = 0; i < GUARD; i++)
        ENSURE(((char *)A + sizeof *A)[i] == '#');
    return 0;
}

/* libFuzzer target for the chunked decoder (http/body.c). The input is
 * four bytes of seed and then a chunked body. The seed picks where the body
 * is cut into pieces, the size cap, the trailer limit and the chunk sizes
 * of the re-encoding. Checked, aborting when one fails:
 *   - every return of body_decode is BODY_ERROR, BODY_TOO_LARGE or a count
 *     within its piece, and each data run lies inside the bytes it took;
 *   - the body decodes the same (verdict, end, data) whole and in pieces;
 *   - a body that ends took no more than the cap, all of it counted;
 *   - its data, framed again with body_chunk_head and BODY_LAST_CHUNK in
 *     other chunk sizes, decodes to the same data, ending at the last byte. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/body.h"

#define ENSURE(c)                                                                   \
    do {                                                                            \
        if (!(c))                                                                   \
            __builtin_trap();                                                       \
    } while (0)

static uint32_t next_random(uint32_t *s)
{
    /* xorshift32: the seed decides everything, so a crash replays */
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

struct result {
    long end;          /* bytes of the body, BODY_ERROR, BODY_TOO_LARGE, or -3: incomplete */
    char *data;
    size_t len;
};

/* Decodes in[0..len) given as pieces ending at cuts[0..ncuts) (ascending),
 * each an exact-size heap copy so ASan sees a read past a piece. */
static struct result decode(const char *in, size_t len, const size_t *cuts, size_t ncuts,
                            uint64_t max, uint32_t max_trailer)
{
    struct result r = {-3, malloc(len + 1), 0};
    struct body_skip b;
    body_skip_start(&b, 0, 1, max_trailer);
    size_t pos = 0;
    for (size_t i = 0; i <= ncuts && body_skip_active(&b); i++) {
        size_t end = i < ncuts ? cuts[i] : len;
        if (end < pos)
            continue;
        size_t plen = end - pos, off = 0;
        char *piece = malloc(plen ? plen : 1);
        memcpy(piece, in + pos, plen);
        while (off < plen && body_skip_active(&b)) {
            struct body_data d;
            long n = body_decode(&b, piece + off, plen - off, max, &d);
            if (n < 0) {
                ENSURE(n == BODY_ERROR || n == BODY_TOO_LARGE);
                r.end = n;
                free(piece);
                return r;
            }
            ENSURE(n > 0 && (size_t)n <= plen - off);
            ENSURE(d.len <= (size_t)n);
            ENSURE(d.len == 0 || (d.p >= piece + off && d.p + d.len <= piece + off + n));
            memcpy(r.data + r.len, d.p, d.len);
            r.len += d.len;
            off += (size_t)n;
        }
        free(piece);
        pos += off;
        ENSURE(body_skip_active(&b) ? pos == end : pos <= end);
    }
    if (!body_skip_active(&b)) {
        r.end = (long)pos;
        /* every byte taken counts toward the cap, framing too */
        ENSURE(b.total == pos && pos <= max && r.len < pos);
    } else {
        ENSURE(pos == len);
    }
    return r;
}

/* Frames data[0..len) as chunks of sizes the seed picks, then decodes that. */
static void reencode_and_check(const struct result *first, uint32_t *seed)
{
    char *out = malloc(first->len * 22 + 32), *o = out; /* at worst 1-byte chunks */
    size_t left = first->len, pos = 0;
    while (left) {
        size_t n = 1 + next_random(seed) % (left < 300 ? left : 300);
        if (next_random(seed) % 4 == 0)
            n = left;
        char head[19];
        size_t h = body_chunk_head(n, head);
        ENSURE(h >= 3 && h <= 18 && head[h - 2] == '\r' && head[h - 1] == '\n');
        memcpy(o, head, h);
        memcpy(o + h, first->data + pos, n);
        memcpy(o + h + n, "\r\n", 2);
        o += h + n + 2;
        pos += n;
        left -= n;
    }
    memcpy(o, BODY_LAST_CHUNK, sizeof BODY_LAST_CHUNK - 1);
    o += sizeof BODY_LAST_CHUNK - 1;
    size_t olen = (size_t)(o - out);
    struct result again = decode(out, olen, NULL, 0, UINT64_MAX, 0);
    ENSURE(again.end == (long)olen);
    ENSURE(again.len == first->len && memcmp(again.data, first->data, again.len) == 0);
    free(again.data);
    free(out);
}

/* body_chunk_head of any size: lowercase hex, no leading zero, CRLF. */
static void check_chunk_head(uint64_t n)
{
    char head[19];
    size_t h = body_chunk_head(n, head);
    ENSURE(h >= 3 && h <= 18 && head[h - 2] == '\r' && head[h - 1] == '\n');
    ENSURE(h == 3 || head[0] != '0');
    uint64_t back = 0;
    for (size_t i = 0; i + 2 < h; i++) {
        char c = head[i];
        ENSURE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
        back = back << 4 | (uint64_t)(c <= '9' ? c - '0' : c - 'a' + 10);
    }
    ENSURE(back == n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    uint32_t seed = (uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16 |
                    (uint32_t)data[3] << 24;
    seed |= 1; /* xorshift never leaves 0 */
    const char *in = (const char *)data + 4;
    size_t len = size - 4;

    uint64_t max = next_random(&seed) % 2 ? UINT64_MAX : next_random(&seed) % (2 * len + 64);
    uint32_t max_trailer = next_random(&seed) % 3 ? 8192 : next_random(&seed) % 64;
    check_chunk_head((uint64_t)next_random(&seed) << 32 | next_random(&seed));

    struct result whole = decode(in, len, NULL, 0, max, max_trailer);
    size_t cuts[16], ncuts = next_random(&seed) % 16;
    for (size_t i = 0; i < ncuts; i++)
        cuts[i] = len ? next_random(&seed) % (len + 1) : 0;
    for (size_t i = 1; i < ncuts; i++) /* ascending: an insertion sort */
        for (size_t j = i; j > 0 && cuts[j - 1] > cuts[j]; j--) {
            size_t t = cuts[j];
            cuts[j] = cuts[j - 1];
            cuts[j - 1] = t;
        }
    struct result split = decode(in, len, cuts, ncuts, max, max_trailer);
    ENSURE(split.end == whole.end && split.len == whole.len);
    ENSURE(memcmp(split.data, whole.data, whole.len) == 0);
    if (whole.end >= 0)
        reencode_and_check(&whole, &seed);
    free(whole.data);
    free(split.data);
    return 0;
}

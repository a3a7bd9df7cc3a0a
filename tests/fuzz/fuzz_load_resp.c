/* libFuzzer target: herd load's response framing (bench/load_resp.c) reads
 * what a server under test sends, and that server may be hostile or
 * broken. The input (after one byte that picks a split size and whether
 * the first request was a HEAD) is a stream of responses on one
 * connection. It is framed three ways: all at once, one byte at a time,
 * and in pieces of the picked size. The parser is sans-I/O, so all three
 * must agree on every response's status, where it ended, and whether and
 * where the stream broke; any difference or broken invariant aborts. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench/load_resp.h"

#define ENSURE(c)                                                                   \
    do {                                                                            \
        if (!(c))                                                                   \
            __builtin_trap();                                                       \
    } while (0)

#define MAX_RESPONSES 64

struct outcome {
    int n;                          /* responses completed */
    uint16_t status[MAX_RESPONSES];
    size_t end[MAX_RESPONSES];      /* offset just past each */
    int broken;                     /* load_resp_parse said -1 */
    int cut;                        /* the stream ended inside a response */
};

/* Feeds data[0..size) in pieces of chunk bytes, as a socket would, with
 * the bytes not yet taken kept in front of the next piece. */
static void frame(const uint8_t *data, size_t size, size_t chunk, int head_first,
                  struct outcome *o)
{
    const char *in = (const char *)data;
    memset(o, 0, sizeof *o);
    struct load_resp r;
    load_resp_start(&r, head_first);
    size_t start = 0, avail = chunk < size ? chunk : size;
    for (int guard = 0; guard < 1 << 22; guard++) {
        if (r.state != RESP_DONE && r.state != RESP_HEAD) {
            /* a client skips body bytes it need not look at, unseen */
            uint64_t skip = load_resp_skippable(&r);
            size_t have = avail - start;
            if (skip && have) {
                size_t n = skip < have ? (size_t)skip : have;
                load_resp_skip(&r, n);
                start += n;
            }
        }
        long n = load_resp_parse(&r, in + start, avail - start);
        if (n < 0) {
            ENSURE(r.error && r.error[0]);
            o->broken = 1;
            return;
        }
        ENSURE((size_t)n <= avail - start);
        start += (size_t)n;
        if (r.state == RESP_DONE) {
            ENSURE(r.status >= 100 && r.status <= 999);
            if (o->n == MAX_RESPONSES)
                return;
            o->status[o->n] = r.status;
            o->end[o->n++] = start;
            if (!r.keepalive)
                return; /* the client closes: what follows is not read */
            load_resp_start(&r, 0);
            continue;
        }
        if (n > 0 && start < avail)
            continue;
        if (avail < size) {
            avail = size - avail < chunk ? size : avail + chunk;
            continue;
        }
        /* all of it read, and the server closed */
        if (load_resp_eof(&r) && r.state == RESP_DONE) {
            if (o->n < MAX_RESPONSES) {
                o->status[o->n] = r.status;
                o->end[o->n++] = size;
            }
        } else if (start < size || r.state != RESP_HEAD || o->n == 0) {
            o->cut = 1;
        }
        return;
    }
    ENSURE(0); /* no progress: a loop */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t chunk = 2 + data[0] % 61;
    int head_first = data[0] >= 200;
    data++;
    size--;
    /* a copy of exactly the input's size: a read past it is an ASan report */
    uint8_t *copy = malloc(size ? size : 1);
    memcpy(copy, data, size);
    struct outcome whole, bytes, pieces;
    frame(copy, size, size ? size : 1, head_first, &whole);
    frame(copy, size, 1, head_first, &bytes);
    frame(copy, size, chunk, head_first, &pieces);
    free(copy);
    const struct outcome *other[2] = {&bytes, &pieces};
    for (int k = 0; k < 2; k++) {
        ENSURE(other[k]->n == whole.n);
        ENSURE(other[k]->broken == whole.broken);
        ENSURE(other[k]->cut == whole.cut);
        for (int i = 0; i < whole.n; i++) {
            ENSURE(other[k]->status[i] == whole.status[i]);
            ENSURE(other[k]->end[i] == whole.end[i]);
        }
    }
    return 0;
}

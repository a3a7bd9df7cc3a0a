/* proc/alog_wire.c: the logger takes a worker's record as untrusted input.
 * alog_decode accepts a record only when its head is whole, its length is
 * exactly the head plus its fields and lies within the bytes given, and its
 * format, address family, flags and HTTP version are ones a worker writes;
 * it never reads past the bytes given (each case is in its own allocation,
 * so ASan sees a read past it). */
#include "unit.h"

#include <sys/socket.h>

#include "proc/accesslog.h"

static struct alog A;
static struct sb_slot slot;

/* One real record of a worker: GET /x with a Referer, from 10.0.0.1. */
static size_t real_record(char *out)
{
    static struct http_request r;
    memset(&r, 0, sizeof r);
    r.minor = 1;
    r.method_str = (struct http_str){"GET", 3};
    r.target = (struct http_str){"/x", 2};
    r.headers[r.nheaders++] = (struct http_header){{"referer", 7}, {"http://r/", 9}};
    alog_init(&A, 100, ACCESS_LOG_COMBINED, &slot); /* never sent: no flush */
    const uint8_t addr[4] = {10, 0, 0, 1};
    alog_record_addr(&A, AF_INET, addr, &r, 200, 5);
    memcpy(out, A.buf, A.len);
    return A.len;
}

/* alog_decode of a copy of p[0..n) in an allocation of exactly n bytes. */
static long decode_copy(const char *p, size_t n, struct alog_entry *e)
{
    char *q = malloc(n ? n : 1);
    memcpy(q, p, n);
    long k = alog_decode(q, n, e);
    free(q);
    return k;
}

TEST(a_real_record_decodes_whole)
{
    char rec[256];
    size_t n = real_record(rec);
    struct alog_entry e;
    CHECK_EQ_INT(alog_decode(rec, n, &e), (long)n);
    CHECK_EQ_INT(e.h.status, 200);
    CHECK_EQ_INT(e.h.flags, ALOG_W_REQ | ALOG_W_REFERER);
    CHECK(e.h.flen[ALOG_F_REFERER] == 9 && memcmp(e.field[ALOG_F_REFERER], "http://r/", 9) == 0);
    CHECK(e.h.flen[ALOG_F_UA] == 0);
    /* followed by more bytes: the record ends where its length says */
    char two[512];
    memcpy(two, rec, n);
    memcpy(two + n, rec, n);
    CHECK_EQ_INT(alog_decode(two, 2 * n, &e), (long)n);
}

TEST(every_cut_of_a_record_is_refused)
{
    char rec[256];
    size_t n = real_record(rec);
    struct alog_entry e;
    for (size_t cut = 0; cut < n; cut++)
        if (!CHECK_EQ_INT(decode_copy(rec, cut, &e), -1))
            return;
}

/* The record with one head field changed by edit. */
static long decode_edited(void (*edit)(struct alog_wire *))
{
    char rec[256];
    size_t n = real_record(rec);
    struct alog_wire h;
    memcpy(&h, rec, sizeof h);
    edit(&h);
    memcpy(rec, &h, sizeof h);
    struct alog_entry e;
    return decode_copy(rec, n, &e);
}

static void len_longer(struct alog_wire *h) { h->len++; }
static void len_shorter(struct alog_wire *h) { h->len--; }
static void field_longer(struct alog_wire *h) { h->flen[ALOG_F_TARGET] += 1; }
static void field_past_end(struct alog_wire *h)
{
    h->flen[ALOG_F_UA] = 60000;
    h->len = (uint16_t)(h->len + 60000);
}
static void fields_wrap(struct alog_wire *h)
{
    /* the sum of the fields wraps a 16-bit length back to the real one */
    h->flen[ALOG_F_METHOD] = (uint16_t)(h->flen[ALOG_F_METHOD] + 32768);
    h->flen[ALOG_F_UA] = (uint16_t)(h->flen[ALOG_F_UA] + 32768);
}
static void bad_fmt(struct alog_wire *h) { h->fmt = 2; }
static void bad_family(struct alog_wire *h) { h->family = AF_UNIX; }
static void bad_minor(struct alog_wire *h) { h->minor = 2; }
static void bad_flags(struct alog_wire *h) { h->flags |= 8; }

TEST(heads_that_disagree_with_their_bytes_are_refused)
{
    CHECK_EQ_INT(decode_edited(len_longer), -1);
    CHECK_EQ_INT(decode_edited(len_shorter), -1);
    CHECK_EQ_INT(decode_edited(field_longer), -1);
    CHECK_EQ_INT(decode_edited(field_past_end), -1);
    CHECK_EQ_INT(decode_edited(fields_wrap), -1);
}

TEST(values_no_worker_writes_are_refused)
{
    CHECK_EQ_INT(decode_edited(bad_fmt), -1);
    CHECK_EQ_INT(decode_edited(bad_family), -1);
    CHECK_EQ_INT(decode_edited(bad_minor), -1);
    CHECK_EQ_INT(decode_edited(bad_flags), -1);
}

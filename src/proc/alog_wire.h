/* The access log's binary record, as a worker hands it to the logger: a
 * fixed head, then the client's fields raw (unescaped), each already cut to
 * what the text of the record can show (alog_text_keep), so a record is at
 * most ALOG_WIRE_MAX bytes whatever the request. The worker only copies
 * bytes; the logger decodes, escapes and formats (alog_text.h).
 *
 * Both ends run the same binary on the same host, so the head is in host
 * byte order. The logger still treats a record as untrusted input:
 * alog_decode checks every length against the bytes it was given. */
#ifndef HERD_PROC_ALOG_WIRE_H
#define HERD_PROC_ALOG_WIRE_H

#include <stddef.h>
#include <stdint.h>

enum { ALOG_F_METHOD, ALOG_F_TARGET, ALOG_F_REFERER, ALOG_F_UA, ALOG_NFIELDS };

/* flags: which fields the request had. No ALOG_W_REQ: the request failed
 * to parse, and the record logs "-" for it and its headers. */
enum { ALOG_W_REQ = 1, ALOG_W_REFERER = 2, ALOG_W_UA = 4 };

/* 56 bytes, no padding: every byte of a record sent is written. */
struct alog_wire {
    int64_t sec;                    /* wall clock, the loop's cached second */
    uint64_t bytes;                 /* body bytes sent */
    uint32_t status;
    uint32_t generation;            /* the reload generation that answered */
    uint16_t len;                   /* the whole record, this head included */
    uint16_t flen[ALOG_NFIELDS];    /* the field bytes that follow, in order */
    uint8_t fmt;                    /* enum log_format */
    uint8_t family;                 /* AF_INET, AF_INET6, or 0 (unix client) */
    uint8_t flags;
    uint8_t minor;                  /* HTTP/1.minor */
    uint8_t addr[16];
    uint8_t spare[2];
};
_Static_assert(sizeof(struct alog_wire) == 56, "the record head has no padding");

/* A record read back: the head, and where its fields are in the input. */
struct alog_entry {
    struct alog_wire h;
    const char *field[ALOG_NFIELDS];
};

/* Decodes the record at p[0..n). Returns its length (the next record
 * starts there), or -1 when p does not start with a whole, valid record:
 * short head, a length that disagrees with its fields or runs past n, an
 * unknown format, family, flag or HTTP minor version. */
long alog_decode(const char *p, size_t n, struct alog_entry *e);

#endif

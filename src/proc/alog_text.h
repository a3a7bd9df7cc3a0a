/* The text of an access-log record, made in the logger from a binary record
 * (alog_wire.h): Combined Log Format or JSON, one line of at most
 * ALOG_RECORD_MAX bytes whatever the request. The fields a client writes
 * (method, target, Referer, User-Agent) are escaped, and each is cut at its
 * share of the record, ending in "..." (BW_CUT_MARK).
 *
 * The worker calls alog_text_keep to cut the raw fields to what the text
 * can show, so records stay small and bounded without formatting there. */
#ifndef HERD_PROC_ALOG_TEXT_H
#define HERD_PROC_ALOG_TEXT_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "proc/alog_wire.h"

#define ALOG_RECORD_MAX 8192

/* The largest record on the wire: the head, and raw fields cut by
 * alog_text_keep: the method's 257 bytes and, for the other three, the
 * text they could fill (under ALOG_RECORD_MAX) plus a few bytes each. */
#define ALOG_WIRE_MAX (sizeof(struct alog_wire) + ALOG_RECORD_MAX + 512)

/* len[k]: the raw length of field k (enum ALOG_F_*). Replaces each by how
 * many of its first bytes the text could ever use: a field longer than
 * that is cut whatever its bytes, and at the same place as when whole. */
void alog_text_keep(size_t len[ALOG_NFIELDS]);

/* Text already made, reused while it stays the same: the time stamp of
 * each format (per second), and the last client address (inet_ntop
 * formats through printf: a quarter of the logger's time before). */
struct alog_cache {
    int64_t sec[2];
    char text[2][40]; /* "22/Nov/2026:01:58:48 +0000" or ISO 8601 */
    uint8_t family;   /* of addr_text; 0: none yet */
    uint8_t addr[16];
    char addr_text[64];
};

void alog_cache_init(struct alog_cache *s);

/* Writes the record's line, newline included, to out (room for
 * ALOG_RECORD_MAX bytes); returns its length (0 would be a bug: nothing
 * is written then). */
size_t alog_text(struct alog_cache *s, const struct alog_entry *e, char *out);

#endif

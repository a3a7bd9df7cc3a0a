/* Precompressed sidecars: "file.br", "file.zst", "file.gz" next to "file",
 * found through the open-file cache. A sidecar counts only while it is a
 * regular file not older than "file" (an older one is stale: the file was
 * edited after it was compressed). What exists is remembered in the file's
 * entry and looked up again at most once per wall second, so a warm request
 * costs no open() or stat() for sidecars either. */
#ifndef HERD_HTTP_SIDECAR_H
#define HERD_HTTP_SIDECAR_H

#include <time.h>

#include "http/filecache.h"

/* The mask of codings (1 << CODING_*) with a usable sidecar for e at wall
 * second now. A file whose own name ends in a sidecar suffix has none: it
 * is served as itself. */
unsigned sidecar_available(struct filecache *fc, struct fc_entry *e, time_t now);

/* A referenced entry for e's sidecar of coding c, or NULL when it went
 * away or became stale since sidecar_available said it was there. */
struct fc_entry *sidecar_open(struct filecache *fc, const struct fc_entry *e, int coding,
                              time_t now);

#endif

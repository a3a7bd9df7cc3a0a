/* Directory listings (`autoindex`): the HTML page for a directory that has
 * no index.html.
 *
 * Bounded: at most AUTOINDEX_MAX_ENTRIES entries are listed (the first ones
 * in byte order of their names: a directory of 100k names is read once,
 * keeping the smallest in a heap) and the page never exceeds
 * AUTOINDEX_MAX_BYTES; what did not fit is counted in a closing line
 * "N more entries not listed". The listing is built per request while the
 * worker waits (no cache): it is an opt-in for small trees. */
#ifndef HERD_HTTP_AUTOINDEX_H
#define HERD_HTTP_AUTOINDEX_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "http/filecache.h"

#define AUTOINDEX_MAX_ENTRIES 10000
#define AUTOINDEX_MAX_BYTES (2 * 1024 * 1024)

struct ai_item {
    char *name; /* NUL-terminated, no '/' */
    size_t len;
    uint8_t dir;
    off_t size;
    time_t mtime;
};

/* Lists directory rel[0..rlen) below the docroot fd root ("" for the root
 * itself) for URL path url[0..ulen) (decoded, ending in '/'). Entries whose
 * name starts with '.' are left out unless dotfiles; so are entries that are
 * neither files nor directories, and symlinks that dangle or leave the
 * docroot. Returns 0 and a memory entry holding the page in *out
 * (fc_memory_entry), or -errno: -ENOENT, -EACCES, -ENOMEM... */
int autoindex_build(int root, const char *rel, size_t rlen, const char *url, size_t ulen,
                    int dotfiles, struct fc_entry **out);

/* The page for items[0..n) (sorted by the caller), of which omitted more
 * were left out; malloc'd, its length in *len; NULL when out of memory.
 * Rows that would take the page past AUTOINDEX_MAX_BYTES are counted as
 * omitted too. */
char *autoindex_render(const char *url, size_t ulen, const struct ai_item *items, size_t n,
                       size_t omitted, size_t *len);

#endif

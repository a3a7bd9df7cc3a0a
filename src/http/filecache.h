/* The open-file cache: per event loop (no locks), keyed by the normalised
 * path below the docroot. An entry holds what a response needs: an fd for
 * sendfile, or the whole body in memory for small files, plus its size,
 * mtime and the prebuilt Content-Type / Last-Modified / ETag header lines.
 * Entries are revalidated (re-opened and compared) at most once a second,
 * so a warm request costs no open() and no stat().
 *
 * Files are opened with openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)
 * from the docroot's fd, so nothing outside the docroot, symlinks that leave
 * it included, is ever opened. Only regular files are served. */
#ifndef HERD_HTTP_FILECACHE_H
#define HERD_HTTP_FILECACHE_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

struct filecache;

/* The longest rel fc_lookup accepts: what openat2 takes (PATH_MAX with
 * its NUL). Any shorter name can be a file's, and the handler cuts paths
 * of PATH_MAX or more before they come here. */
#define FC_PATH_MAX (PATH_MAX - 1)

struct fc_lru {              /* a link of the LRU list (filecache.c) */
    struct fc_lru *prev, *next;
};

struct fc_entry {
    struct fc_entry *hnext;  /* hash chain */
    struct fc_lru lru;
    uint32_t hash;
    uint32_t refs;     /* one for the table, one per response in flight */
    int fd;            /* -1 when the body is in data */
    uint8_t in_table;
    off_t size;
    time_t mtime;
    struct timespec mtim;
    struct timespec ctim; /* changed by every write, whatever mtime says */
    dev_t dev;
    ino_t ino;
    time_t checked;    /* wall second of the last revalidation */
    time_t codings_checked; /* http/sidecar.c: wall second codings was found */
    uint8_t codings;   /* http/sidecar.c: sidecars that exist (1 << CODING_*) */
    time_t cached_checked; /* models/file_window.c: wall second the whole file was
                            * last found in the page cache */
    char *data;        /* the body of a small file, or NULL */
    const char *etag;  /* points into hdr */
    const char *last_modified;
    uint16_t etag_len, lm_len, hdr_len;
    char hdr[192];     /* "Content-Type: ..\r\nLast-Modified: ..\r\nETag: ..\r\nAccept-Ranges: bytes\r\n" */
    uint16_t path_len;
    char path[];
};

struct filecache_limits {
    uint32_t max_entries;     /* open entries kept (each large one holds an fd) */
    size_t max_inline_size;   /* files up to this size are kept in memory */
    size_t max_inline_total;  /* bytes of file bodies kept in memory */
};

/* Returns NULL with errno set when the docroot cannot be opened. */
struct filecache *fc_create(const char *docroot, const struct filecache_limits *lim);
void fc_destroy(struct filecache *fc);

/* The docroot's directory fd (O_PATH). */
int fc_root_fd(const struct filecache *fc);

/* Looks up rel (no leading '/', "" or "." for the docroot itself) at wall
 * second now. Returns 0 and a referenced entry in *out, or -ENOENT,
 * -EACCES, -EISDIR (a directory), -ENODEV (neither a file nor a directory:
 * a FIFO, a socket, a device), -ENOTDIR, -EXDEV (escapes the docroot),
 * -ELOOP, -ENAMETOOLONG, -EMFILE... Release the entry with fc_release. */
int fc_lookup(struct filecache *fc, const char *rel, size_t len, time_t now,
              struct fc_entry **out);

/* The same for rel[0..len) followed by suffix[0..slen): "app.css" + ".gz",
 * without building the name on the warm path. */
int fc_lookup_suffixed(struct filecache *fc, const char *rel, size_t len, const char *suffix,
                       size_t slen, time_t now, struct fc_entry **out);

static inline void fc_ref(struct fc_entry *e) { e->refs++; }
void fc_release(struct fc_entry *e);

/* The "Content-Type: ...\r\n" line at the start of e->hdr. */
static inline size_t fc_type_line_len(const struct fc_entry *e)
{
    return (size_t)(e->last_modified - (sizeof "Last-Modified: " - 1) - e->hdr);
}

/* An entry outside the table that carries a generated body (a directory
 * listing) to the driver like a small file: it owns data (malloc'd, len
 * bytes) and frees it on its last fc_release. NULL when out of memory (data
 * is freed then too). */
struct fc_entry *fc_memory_entry(char *data, size_t len);

/* Directory listings (fc_memory_entry) shared by the requests that get
 * the same page: the memory is per distinct page, not per connection.
 * fc_listing_recent: the listing of key (a directory's URL path) built at
 * wall second now, referenced, or NULL (build it). fc_listing_keep: takes
 * fresh, just built for key at now, and returns what to send, referenced:
 * the kept copy when fresh is byte for byte the same (fresh is released),
 * else fresh, now kept. */
struct fc_entry *fc_listing_recent(struct filecache *fc, const char *key, size_t klen,
                                   time_t now);
struct fc_entry *fc_listing_keep(struct filecache *fc, const char *key, size_t klen,
                                 struct fc_entry *fresh, time_t now);

/* 1 when rel is a directory below the docroot (used for 403 vs 404). */
int fc_is_dir(struct filecache *fc, const char *rel, size_t len);

#endif

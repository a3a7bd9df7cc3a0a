#include "http/filecache.h"

#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/beneath.h"
#include "core/fnv.h"
#include "core/httpdate.h"
#include "http/mime.h"

#define FC_BUCKETS 4096 /* power of two */

/* Seconds an entry may go unused before it is closed, as nginx's
 * open_file_cache inactive: without it a large file deleted (or replaced)
 * in the docroot stayed open, its disk space with it, until the same name
 * was asked for again or 1024 other files pushed it out, which on a quiet
 * site is never (red-team pass 22). Reopening a file nobody asked for in
 * this long costs an open and a stat. */
#define FC_INACTIVE 10

/* Directory listings kept for sharing (fc_listing_*): a few, each with
 * the wall second it was last built. */
#define FC_LISTINGS 4
struct fc_listing {
    struct fc_entry *e;  /* NULL: free */
    time_t built;
    char *key;
    size_t klen;
};

struct filecache {
    struct fc_listing listings[FC_LISTINGS];
    int root_fd;
    struct filecache_limits lim;
    time_t swept;        /* wall second of the last expire() */
    uint32_t count;
    size_t inline_total;
    struct fc_lru lru;   /* sentinel: lru.next is the most recently used */
    struct fc_entry *buckets[FC_BUCKETS];
};

struct filecache *fc_create(const char *docroot, const struct filecache_limits *lim)
{
    int fd = open(docroot, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct filecache *fc = calloc(1, sizeof *fc);
    if (!fc) {
        close(fd);
        errno = ENOMEM;
        return NULL;
    }
    fc->root_fd = fd;
    fc->lim = *lim;
    fc->lru.next = fc->lru.prev = &fc->lru;
    return fc;
}

int fc_root_fd(const struct filecache *fc) { return fc->root_fd; }

static void entry_free(struct fc_entry *e)
{
    if (e->fd >= 0)
        close(e->fd);
    free(e->data);
    free(e);
}

void fc_release(struct fc_entry *e)
{
    if (--e->refs == 0)
        entry_free(e);
}

static struct fc_entry *entry_of(struct fc_lru *l)
{
    return (struct fc_entry *)(void *)((char *)l - offsetof(struct fc_entry, lru));
}

static void lru_unlink(struct fc_entry *e)
{
    e->lru.prev->next = e->lru.next;
    e->lru.next->prev = e->lru.prev;
}

static void lru_push_front(struct filecache *fc, struct fc_entry *e)
{
    e->lru.next = fc->lru.next;
    e->lru.prev = &fc->lru;
    fc->lru.next->prev = &e->lru;
    fc->lru.next = &e->lru;
}

static void table_remove(struct filecache *fc, struct fc_entry *e)
{
    struct fc_entry **pp = &fc->buckets[e->hash & (FC_BUCKETS - 1)];
    while (*pp != e)
        pp = &(*pp)->hnext;
    *pp = e->hnext;
    lru_unlink(e);
    e->in_table = 0;
    fc->count--;
    if (e->data)
        fc->inline_total -= (size_t)e->size;
    fc_release(e);
}

static int read_all(int fd, char *buf, size_t size)
{
    size_t got = 0;
    while (got < size) {
        ssize_t n = pread(fd, buf + got, size - got, (off_t)got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        got += (size_t)n;
    }
    return 0;
}

static void build_headers(struct fc_entry *e)
{
    char lm[HTTPDATE_LEN];
    httpdate_format(e->mtime, lm);
    const char *type = mime_type(e->path, e->path_len);
    int n = snprintf(e->hdr, sizeof e->hdr, "Content-Type: %s\r\nLast-Modified: ", type);
    e->last_modified = e->hdr + n;
    e->lm_len = HTTPDATE_LEN;
    memcpy(e->hdr + n, lm, HTTPDATE_LEN);
    n += HTTPDATE_LEN;
    n += snprintf(e->hdr + n, sizeof e->hdr - (size_t)n, "\r\nETag: ");
    e->etag = e->hdr + n;
    /* nginx's "<mtime hex>-<size hex>", with the mtime's nanoseconds when
     * it has them: a file rewritten in place within the same second at the
     * same size must not keep its ETag, or an If-Range would splice the
     * new bytes onto a client's copy of the old ones */
    int t = e->mtim.tv_nsec
                ? snprintf(e->hdr + n, sizeof e->hdr - (size_t)n, "\"%llx.%lx-%llx\"",
                           (unsigned long long)e->mtime, (unsigned long)e->mtim.tv_nsec,
                           (unsigned long long)e->size)
                : snprintf(e->hdr + n, sizeof e->hdr - (size_t)n, "\"%llx-%llx\"",
                           (unsigned long long)e->mtime, (unsigned long long)e->size);
    e->etag_len = (uint16_t)t;
    n += t;
    n += snprintf(e->hdr + n, sizeof e->hdr - (size_t)n, "\r\nAccept-Ranges: bytes\r\n");
    e->hdr_len = (uint16_t)n;
}

/* Makes an entry from an fd opened on rel; takes ownership of fd. */
static int entry_from_fd(struct filecache *fc, int fd, const struct stat *st, const char *rel,
                         size_t len, uint32_t hash, time_t now, struct fc_entry **out)
{
    struct fc_entry *e = calloc(1, sizeof *e + len + 1);
    if (!e) {
        close(fd);
        return -ENOMEM;
    }
    e->hash = hash;
    e->refs = 1;
    e->fd = fd;
    e->size = st->st_size;
    e->mtime = st->st_mtim.tv_sec;
    e->mtim = st->st_mtim;
    e->ctim = st->st_ctim;
    e->dev = st->st_dev;
    e->ino = st->st_ino;
    e->checked = now;
    e->path_len = (uint16_t)len;
    memcpy(e->path, rel, len);
    build_headers(e);
    if ((size_t)st->st_size <= fc->lim.max_inline_size &&
        fc->inline_total + (size_t)st->st_size <= fc->lim.max_inline_total) {
        char *data = malloc(st->st_size ? (size_t)st->st_size : 1);
        if (data && read_all(fd, data, (size_t)st->st_size) == 0) {
            e->data = data;
            close(fd);
            e->fd = -1;
        } else {
            free(data);
        }
    }
    *out = e;
    return 0;
}

static void table_insert(struct filecache *fc, struct fc_entry *e)
{
    while (fc->count >= fc->lim.max_entries && fc->lru.prev != &fc->lru)
        table_remove(fc, entry_of(fc->lru.prev));
    struct fc_entry **b = &fc->buckets[e->hash & (FC_BUCKETS - 1)];
    e->hnext = *b;
    *b = e;
    e->in_table = 1;
    e->refs++;
    fc->count++;
    if (e->data)
        fc->inline_total += (size_t)e->size;
    lru_push_front(fc, e);
}

static int open_regular(struct filecache *fc, const char *rel, struct stat *st)
{
    int fd = open_beneath(fc->root_fd, rel, O_RDONLY | O_NONBLOCK | O_NOCTTY);
    if (fd == -ENXIO) /* a unix socket: open refuses it before any fstat */
        return -ENODEV;
    if (fd < 0)
        return fd;
    if (fstat(fd, st) < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    if (S_ISDIR(st->st_mode)) {
        close(fd);
        return -EISDIR;
    }
    if (!S_ISREG(st->st_mode)) { /* a FIFO, a socket, a device */
        close(fd);
        return -ENODEV;
    }
    return fd;
}

/* The entry whose path is a[0..alen) followed by b[0..blen), or NULL. */
static struct fc_entry *find(struct filecache *fc, const char *a, size_t alen, const char *b,
                             size_t blen, uint32_t h)
{
    struct fc_entry *e = fc->buckets[h & (FC_BUCKETS - 1)];
    while (e && !(e->hash == h && e->path_len == alen + blen && memcmp(e->path, a, alen) == 0 &&
                  (blen == 0 || memcmp(e->path + alen, b, blen) == 0)))
        e = e->hnext;
    return e;
}

/* The file e was made from, as it was. The ctime too: a file rewritten in
 * place at the same size with its mtime set back (cp -p, tar, rsync -t
 * --inplace of a build whose files all carry one date) keeps size and
 * mtime, and a small file's copy in memory was served stale for as long
 * as it was asked for (red-team pass 22); no one can set a ctime back. */
static int unchanged(const struct fc_entry *e, const struct stat *st)
{
    return st->st_dev == e->dev && st->st_ino == e->ino && st->st_size == e->size &&
           st->st_mtim.tv_sec == e->mtim.tv_sec && st->st_mtim.tv_nsec == e->mtim.tv_nsec &&
           st->st_ctim.tv_sec == e->ctim.tv_sec && st->st_ctim.tv_nsec == e->ctim.tv_nsec;
}

/* Opens a+b (again) and replaces the stale entry e (or NULL) when the file
 * changed. Kept out of line: only this slow path needs the name buffer, and
 * coroutine stacks are small. */
__attribute__((noinline)) static int reopen(struct filecache *fc, struct fc_entry *e,
                                            const char *a, size_t alen, const char *b,
                                            size_t blen, uint32_t h, time_t now,
                                            struct fc_entry **out)
{
    /* openat2 needs a NUL-terminated name; a points into a request. */
    char name[FC_PATH_MAX + 1];
    size_t len = alen + blen;
    memcpy(name, a, alen);
    memcpy(name + alen, b, blen);
    name[len] = '\0';
    struct stat st;
    int fd = open_regular(fc, name, &st);
    if (e) {
        if (fd >= 0 && unchanged(e, &st)) {
            close(fd);
            e->checked = now;
            lru_unlink(e); /* the list stays in order of last use: expire() */
            lru_push_front(fc, e);
            fc_ref(e);
            *out = e;
            return 0;
        }
        /* No fd (or memory) to look again with says nothing about the
         * file: the entry still holds it open, so serve it and look on the
         * next request, rather than a 503 for a file we have. */
        if (fd == -EMFILE || fd == -ENFILE || fd == -ENOMEM) {
            fc_ref(e);
            *out = e;
            return 0;
        }
        table_remove(fc, e); /* changed or gone */
    }
    if (fd < 0)
        return fd;
    int rc = entry_from_fd(fc, fd, &st, name, len, h, now, &e);
    if (rc < 0)
        return rc;
    table_insert(fc, e);
    *out = e; /* the creation reference becomes the caller's */
    return 0;
}

/* Closes the entries unused for FC_INACTIVE seconds, once a second. The
 * LRU list is in order of last use, and checked is the second of an
 * entry's last use (a use in another second revalidates it), so they are
 * the ones at its tail. A response still sending one keeps its reference. */
static void expire(struct filecache *fc, time_t now)
{
    fc->swept = now;
    while (fc->lru.prev != &fc->lru) {
        struct fc_entry *e = entry_of(fc->lru.prev);
        if (now - e->checked < FC_INACTIVE)
            return;
        table_remove(fc, e);
    }
}

static int lookup(struct filecache *fc, const char *a, size_t alen, const char *b, size_t blen,
                  time_t now, struct fc_entry **out)
{
    if (fc->swept != now)
        expire(fc, now);
    if (alen + blen > FC_PATH_MAX)
        return -ENAMETOOLONG;
    uint32_t h = fnv_more(fnv_more(FNV_SEED, a, alen), b, blen); /* a name in two pieces */
    struct fc_entry *e = find(fc, a, alen, b, blen, h);
    if (e && e->checked == now) {
        if (fc->lru.next != &e->lru) {
            lru_unlink(e);
            lru_push_front(fc, e);
        }
        fc_ref(e);
        *out = e;
        return 0;
    }
    return reopen(fc, e, a, alen, b, blen, h, now, out);
}

int fc_lookup(struct filecache *fc, const char *rel, size_t len, time_t now,
              struct fc_entry **out)
{
    if (len == 0) {
        rel = ".";
        len = 1;
    }
    return lookup(fc, rel, len, "", 0, now, out);
}

int fc_lookup_suffixed(struct filecache *fc, const char *rel, size_t len, const char *suffix,
                       size_t slen, time_t now, struct fc_entry **out)
{
    return lookup(fc, rel, len, suffix, slen, now, out);
}

struct fc_entry *fc_memory_entry(char *data, size_t len)
{
    struct fc_entry *e = calloc(1, sizeof *e);
    if (!e) {
        free(data);
        return NULL;
    }
    e->refs = 1;
    e->fd = -1;
    e->data = data;
    e->size = (off_t)len;
    return e;
}

int fc_is_dir(struct filecache *fc, const char *rel, size_t len)
{
    char name[4096];
    if (len == 0 || len >= sizeof name)
        return len == 0;
    memcpy(name, rel, len);
    name[len] = '\0';
    int fd = open_beneath(fc->root_fd, name, O_PATH | O_DIRECTORY);
    if (fd < 0)
        return 0;
    close(fd);
    return 1;
}

/* ---- generated listings, shared while they are the same
 *
 * A listing is built per request (sizes and dates change), up to 2 MiB. A
 * connection that does not read holds its copy until the send timeout, so
 * N such connections held N copies (300 held 460 MB; red-team pass 16).
 * Within its wall second a listing is served again as it is (as the
 * open-file cache looks at a file at most once a second), and a rebuild
 * that comes out the same shares the copy already held: the memory is per
 * distinct page, not per connection. */

static struct fc_listing *listing_slot(struct filecache *fc, const char *key, size_t klen)
{
    for (int i = 0; i < FC_LISTINGS; i++) {
        struct fc_listing *l = &fc->listings[i];
        if (l->e && l->klen == klen && memcmp(l->key, key, klen) == 0)
            return l;
    }
    return NULL;
}

struct fc_entry *fc_listing_recent(struct filecache *fc, const char *key, size_t klen,
                                   time_t now)
{
    struct fc_listing *l = listing_slot(fc, key, klen);
    if (!l || l->built != now)
        return NULL;
    fc_ref(l->e);
    return l->e;
}

struct fc_entry *fc_listing_keep(struct filecache *fc, const char *key, size_t klen,
                                 struct fc_entry *fresh, time_t now)
{
    struct fc_listing *l = listing_slot(fc, key, klen);
    if (l && l->e->size == fresh->size && memcmp(l->e->data, fresh->data, (size_t)fresh->size) == 0) {
        fc_release(fresh);
        l->built = now;
        fc_ref(l->e);
        return l->e;
    }
    if (!l) { /* a free slot, else the one built longest ago */
        l = &fc->listings[0];
        for (int i = 0; i < FC_LISTINGS && l->e; i++)
            if (!fc->listings[i].e || fc->listings[i].built < l->built)
                l = &fc->listings[i];
        char *copy = malloc(klen ? klen : 1);
        if (!copy)
            return fresh; /* served, not kept */
        if (l->e)
            fc_release(l->e);
        free(l->key);
        memcpy(copy, key, klen);
        l->key = copy;
        l->klen = klen;
    } else {
        fc_release(l->e);
    }
    l->e = fresh;
    l->built = now;
    fc_ref(fresh);
    return fresh;
}

void fc_destroy(struct filecache *fc)
{
    for (int i = 0; i < FC_LISTINGS; i++) {
        if (fc->listings[i].e)
            fc_release(fc->listings[i].e);
        free(fc->listings[i].key);
    }
    while (fc->lru.next != &fc->lru)
        table_remove(fc, entry_of(fc->lru.next));
    close(fc->root_fd);
    free(fc);
}

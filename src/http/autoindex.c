/* autoindex_build: reads a directory below the docroot (see autoindex.h). */
#include "http/autoindex.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/beneath.h"

/* The names kept so far: a max-heap by name, so the largest is dropped
 * first when a smaller one comes and the heap is full. */
struct pick {
    struct ai_item *items;
    size_t n, cap;
    size_t candidates; /* every listable name seen */
};

static int name_cmp(const void *a, const void *b)
{
    return strcmp(((const struct ai_item *)a)->name, ((const struct ai_item *)b)->name);
}

static void swap(struct ai_item *a, struct ai_item *b)
{
    struct ai_item t = *a;
    *a = *b;
    *b = t;
}

static void sift_up(struct ai_item *h, size_t i)
{
    while (i > 0 && name_cmp(&h[(i - 1) / 2], &h[i]) < 0) {
        swap(&h[(i - 1) / 2], &h[i]);
        i = (i - 1) / 2;
    }
}

static void sift_down(struct ai_item *h, size_t n)
{
    for (size_t i = 0;;) {
        size_t l = 2 * i + 1, big = i;
        if (l < n && name_cmp(&h[l], &h[big]) > 0)
            big = l;
        if (l + 1 < n && name_cmp(&h[l + 1], &h[big]) > 0)
            big = l + 1;
        if (big == i)
            return;
        swap(&h[i], &h[big]);
        i = big;
    }
}

static int pick_add(struct pick *p, const char *name, uint8_t dir)
{
    p->candidates++;
    if (p->n == AUTOINDEX_MAX_ENTRIES && strcmp(name, p->items[0].name) >= 0)
        return 0;
    if (p->n == p->cap && p->n < AUTOINDEX_MAX_ENTRIES) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        cap = cap < AUTOINDEX_MAX_ENTRIES ? cap : AUTOINDEX_MAX_ENTRIES;
        struct ai_item *items = realloc(p->items, cap * sizeof *items);
        if (!items)
            return -ENOMEM;
        p->items = items;
        p->cap = cap;
    }
    size_t len = strlen(name);
    char *copy = malloc(len + 1);
    if (!copy)
        return -ENOMEM;
    memcpy(copy, name, len + 1);
    struct ai_item it = {.name = copy, .len = len, .dir = dir};
    if (p->n == AUTOINDEX_MAX_ENTRIES) {
        free(p->items[0].name);
        p->items[0] = it;
        sift_down(p->items, p->n);
    } else {
        p->items[p->n] = it;
        sift_up(p->items, p->n++);
    }
    return 0;
}

/* Size, date and kind of an item; a symlink is followed only while it stays
 * below the docroot. dir holds the directory's rel path (dlen bytes, "" for
 * the root) with room for "/NAME" after it. Returns 0, or -1 to leave the
 * item out. */
static int describe(int root, int dirfd, char *dir, size_t dlen, struct ai_item *it)
{
    struct stat st;
    if (fstatat(dirfd, it->name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return -1;
    if (S_ISLNK(st.st_mode)) {
        char *name = dir;
        if (dlen)
            dir[dlen++] = '/';
        memcpy(dir + dlen, it->name, it->len + 1);
        int fd = open_beneath(root, name, O_PATH);
        dir[dlen ? dlen - 1 : 0] = '\0';
        if (fd < 0)
            return -1;
        int rc = fstat(fd, &st);
        close(fd);
        if (rc < 0)
            return -1;
    }
    if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
        return -1;
    it->dir = S_ISDIR(st.st_mode);
    it->size = st.st_size;
    it->mtime = st.st_mtim.tv_sec;
    return 0;
}

/* Names a request could be served from, into p. A symlink (or a name of
 * unknown type) is looked at now, not only once picked: one that dangles or
 * leaves the docroot must not take a place among the first
 * AUTOINDEX_MAX_ENTRIES from a name that would be listed. */
static int read_names(int root, DIR *d, char *dir, size_t dlen, int dotfiles, struct pick *p)
{
    struct dirent *de;
    errno = 0;
    while ((de = readdir(d))) {
        const char *n = de->d_name;
        if (n[0] == '.' && (!dotfiles || n[1] == '\0' || (n[1] == '.' && n[2] == '\0')))
            continue;
        /* Devices, sockets and fifos are never served; leave them out. */
        if (de->d_type != DT_REG && de->d_type != DT_DIR && de->d_type != DT_LNK &&
            de->d_type != DT_UNKNOWN)
            continue;
        if (de->d_type == DT_LNK || de->d_type == DT_UNKNOWN) {
            struct ai_item probe = {.name = de->d_name, .len = strlen(de->d_name)};
            if (describe(root, dirfd(d), dir, dlen, &probe) < 0) {
                errno = 0;
                continue;
            }
        }
        int rc = pick_add(p, n, de->d_type == DT_DIR);
        if (rc < 0)
            return rc;
        errno = 0;
    }
    return errno ? -errno : 0;
}

static void pick_free(struct pick *p)
{
    for (size_t i = 0; i < p->n; i++)
        free(p->items[i].name);
    free(p->items);
}

int autoindex_build(int root, const char *rel, size_t rlen, const char *url, size_t ulen,
                    int dotfiles, struct fc_entry **out)
{
    if (rlen > FC_PATH_MAX)
        return -ENAMETOOLONG;
    /* On the heap: coroutine stacks are small, and this is no hot path. */
    char *dir = malloc(FC_PATH_MAX + NAME_MAX + 2);
    if (!dir)
        return -ENOMEM;
    memcpy(dir, rel, rlen);
    dir[rlen] = '\0';
    int fd = open_beneath(root, rlen ? dir : ".", O_RDONLY | O_DIRECTORY);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    if (!d) {
        if (fd >= 0)
            close(fd);
        free(dir);
        return fd < 0 ? fd : -ENOMEM;
    }
    struct pick p = {NULL, 0, 0, 0};
    int rc = read_names(root, d, dir, rlen, dotfiles, &p);
    size_t kept = 0;
    for (size_t i = 0; rc == 0 && i < p.n; i++) {
        if (describe(root, dirfd(d), dir, rlen, &p.items[i]) == 0)
            p.items[kept++] = p.items[i];
        else
            free(p.items[i].name);
    }
    closedir(d);
    free(dir);
    if (rc == 0) {
        size_t omitted = p.candidates - p.n;
        p.n = kept;
        if (p.n > 1) /* an empty directory has no array: qsort(NULL) is undefined */
            qsort(p.items, p.n, sizeof *p.items, name_cmp);
        size_t len;
        char *page = autoindex_render(url, ulen, p.items, p.n, omitted, &len);
        *out = page ? fc_memory_entry(page, len) : NULL;
        rc = *out ? 0 : -ENOMEM;
    }
    pick_free(&p);
    return rc;
}

#include "http/fcgi_route.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/beneath.h"
#include "core/fnv.h"
#include "http/path.h"

/* The first fastcgi route that p[0..n) matches, or -1. */
static int route_of(const struct fcgi_rules *r, const char *p, size_t n)
{
    for (int i = 0; i < r->nroutes; i++) {
        const struct proxy_route *rt = &r->routes[i];
        if (!rt->fastcgi)
            continue;
        size_t ml = strlen(rt->prefix);
        if (ml > n)
            continue;
        if (rt->suffix ? !memcmp(p + n - ml, rt->prefix, ml) : !memcmp(p, rt->prefix, ml))
            return i;
    }
    return -1;
}

/* 1: p[0..n) is a regular file below the docroot; 0: it is something else
 * (a directory); -1: nothing there (or out of bounds). */
static int kind_asked(const struct fcgi_rules *r, const char *p, size_t n)
{
    char rel[FCGI_SCRIPT_MAX];
    if (n < 2 || n >= sizeof rel)
        return -1;
    memcpy(rel, p + 1, n - 1);
    rel[n - 1] = 0;
    int fd = open_beneath(r->root_fd, rel, O_PATH);
    if (fd < 0)
        return -1;
    struct stat st;
    int rc = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? 1 : 0;
    close(fd);
    return rc;
}

/* kind_asked, answered from r->kinds while the second it was asked in lasts. */
static int kind_of(const struct fcgi_rules *r, const char *p, size_t n)
{
    if (!r->kinds || !r->now || n > FCGI_KIND_PATH)
        return kind_asked(r, p, n);
    struct fcgi_kind *k = &r->kinds->e[fnv_more(FNV_SEED, p, n) % FCGI_KINDS];
    if (k->checked == r->now && k->len == n && !memcmp(k->path, p, n))
        return k->kind;
    int kind = kind_asked(r, p, n);
    k->checked = r->now;
    k->len = (uint16_t)n;
    k->kind = (int8_t)kind;
    memcpy(k->path, p, n);
    return kind;
}

static int take(struct fcgi_target *t, int route, const char *s, size_t n, size_t info_off,
                size_t info_len)
{
    if (n >= sizeof t->script)
        return -1;
    memcpy(t->script, s, n);
    t->script[n] = 0;
    t->script_len = n;
    t->route = route;
    t->info_off = info_off;
    t->info_len = info_len;
    return 0;
}

/* A matching script that exists: p[0..n) itself, or the first segment
 * boundary k where p[0..k) is one (the rest is PATH_INFO). */
static int script_in_path(const struct fcgi_rules *r, const char *p, size_t n,
                          struct fcgi_target *t)
{
    int rt = route_of(r, p, n);
    if (rt >= 0 && kind_of(r, p, n) == 1)
        return take(t, rt, p, n, n, 0);
    for (size_t k = 1; k < n; k++) {
        if (p[k] != '/' || (rt = route_of(r, p, k)) < 0)
            continue;
        int kind = kind_of(r, p, k);
        if (kind == 1)
            return take(t, rt, p, k, k, n - k);
        if (kind < 0)
            return -1; /* nothing deeper can exist */
    }
    return -1;
}

int fcgi_resolve(const struct fcgi_rules *r, const char *path, size_t len,
                 struct fcgi_target *t)
{
    if (path_has_dotfile(path, len))
        return -1;
    if (path[len - 1] == '/') {
        char s[FCGI_SCRIPT_MAX];
        size_t il = strlen(r->index);
        if (len + il >= sizeof s)
            return -1;
        memcpy(s, path, len);
        memcpy(s + len, r->index, il + 1);
        int rt = route_of(r, s, len + il);
        if (rt >= 0 && kind_of(r, s, len + il) == 1)
            return take(t, rt, s, len + il, len, 0);
        return -1;
    }
    if (script_in_path(r, path, len, t) == 0)
        return 0;
    if (!r->fallback[0] || kind_of(r, path, len) >= 0)
        return -1; /* the static handler's: a file, a directory, or no route */
    size_t fl = strlen(r->fallback);
    int rt = route_of(r, r->fallback, fl);
    if (rt < 0 || kind_of(r, r->fallback, fl) != 1)
        return -1;
    return take(t, rt, r->fallback, fl, len, 0);
}

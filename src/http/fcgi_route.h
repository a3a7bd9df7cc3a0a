/* Which requests run a FastCGI script, and which script: the --fastcgi
 * routes (MATCH "*.php" or "/app/"), --fastcgi-index and
 * --fastcgi-fallback. A script is a regular file below the docroot,
 * opened with the same openat2(RESOLVE_BENEATH) confinement static files
 * have (no "..", no symlink out, no magic links), and no dotfile; a path
 * that names none is the static handler's (its 404), never the
 * application's "Primary script unknown". PATH_INFO is split off only at
 * a segment that is itself an existing matching script, so
 * "/uploads/evil.jpg/x.php" never runs evil.jpg (CVE-2019-11043 and the
 * cgi.fix_pathinfo family). Touches the file system, no sockets. */
#ifndef HERD_HTTP_FCGI_ROUTE_H
#define HERD_HTTP_FCGI_ROUTE_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "http/proxy.h"

#define FCGI_SCRIPT_MAX 1024

/* What the file system said about a path, kept for the wall second it was
 * asked in: a script request (and the front-controller pattern, which
 * asks about the path and the fallback) costs no openat2 + fstat + close
 * while the second lasts, the same once-a-second revalidation the
 * open-file cache gives static files (http/filecache.h). Direct-mapped,
 * per event loop (no locks); longer paths are not kept. */
#define FCGI_KINDS 64
#define FCGI_KIND_PATH 238
struct fcgi_kinds {
    struct fcgi_kind {
        time_t checked;
        uint16_t len;
        int8_t kind;                  /* 1 a regular file, 0 something else, -1 nothing */
        char path[FCGI_KIND_PATH + 1];
    } e[FCGI_KINDS];
};

struct fcgi_rules {
    const struct proxy_route *routes; /* those marked fastcgi count */
    int nroutes;
    const char *index;                /* "index.php" */
    const char *fallback;             /* "/index.php" or "" */
    int root_fd;                      /* the docroot, O_PATH */
    struct fcgi_kinds *kinds;         /* or NULL: ask every time */
    time_t now;                       /* the wall second (with kinds) */
};

struct fcgi_target {
    int route;                        /* the route index */
    char script[FCGI_SCRIPT_MAX];     /* its normalised path, NUL-terminated */
    size_t script_len;
    size_t info_off, info_len;        /* PATH_INFO inside the request's path */
};

/* The script for the normalised path[0..len) (NUL-terminated): 0 with t
 * filled, or -1 when no FastCGI route takes it. */
int fcgi_resolve(const struct fcgi_rules *r, const char *path, size_t len,
                 struct fcgi_target *t);

#endif

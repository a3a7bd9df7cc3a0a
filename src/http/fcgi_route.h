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

#include "http/proxy.h"

#define FCGI_SCRIPT_MAX 1024

struct fcgi_rules {
    const struct proxy_route *routes; /* those marked fastcgi count */
    int nroutes;
    const char *index;                /* "index.php" */
    const char *fallback;             /* "/index.php" or "" */
    int root_fd;                      /* the docroot, O_PATH */
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

/* Opening a name below a directory fd and never outside it:
 * openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS), as the open-file
 * cache, the listings and the FastCGI routes do for the docroot. */
#ifndef HERD_CORE_BENEATH_H
#define HERD_CORE_BENEATH_H

/* rel (NUL-terminated) opened below dirfd with flags | O_CLOEXEC: the fd,
 * or -errno (EXDEV or ELOOP for a name that leaves dirfd). */
int open_beneath(int dirfd, const char *rel, int flags);

#endif

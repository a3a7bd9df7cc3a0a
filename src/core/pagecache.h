/* Whether a file's bytes are in the page cache, asked without reading
 * them (cachestat(2), Linux 6.5+): a sendfile of pages that are not there
 * blocks the whole loop on the disk, and the uring model reads those in
 * through the ring first (models/uring_send.c). */
#ifndef HERD_CORE_PAGECACHE_H
#define HERD_CORE_PAGECACHE_H

#include <sys/types.h>

/* 1: every page of [off, off + len) is cached; 0: some page is not; -1:
 * the kernel cannot tell (no cachestat, or a file system without it). */
int pagecache_resident(int fd, off_t off, off_t len);

#endif

#include "core/pagecache.h"

#include <errno.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef __NR_cachestat
#define __NR_cachestat 451 /* the same on every architecture (6.5) */
#endif

/* The kernel's ABI (include/uapi/linux/mman.h), which the C library's
 * headers here (Linux 6.1) do not have yet. */
struct pc_range {
    uint64_t off, len;
};
struct pc_stat {
    uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};

int pagecache_resident(int fd, off_t off, off_t len)
{
    static int missing; /* ENOSYS once: never ask again */
    if (missing || len <= 0)
        return len <= 0 ? 1 : -1;
    long page = sysconf(_SC_PAGESIZE);
    uint64_t first = (uint64_t)off / (uint64_t)page;
    uint64_t last = ((uint64_t)off + (uint64_t)len - 1) / (uint64_t)page;
    struct pc_range r = {first * (uint64_t)page, (last - first + 1) * (uint64_t)page};
    struct pc_stat st;
    if (syscall(__NR_cachestat, fd, &r, &st, 0) < 0) {
        if (errno == ENOSYS)
            missing = 1; /* set by any thread, read by all: only ever 0 -> 1 */
        return -1;       /* also EOPNOTSUPP (hugetlbfs) */
    }
    return st.nr_cache >= last - first + 1;
}

/* An allocation counter for tests (LD_PRELOAD): counts malloc, calloc and
 * realloc calls per process into $MALLOC_COUNT_DIR/PID (a mapped 8-byte
 * counter, readable at any time), so a test can check that warm requests
 * allocate nothing (docs/DESIGN.md's hot-path budget). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
static __thread int busy;
static int mapped_pid;
static unsigned long *counter;
static void bump(void)
{
    if (busy) return;
    busy = 1;
    int pid = (int)syscall(SYS_getpid);
    if (pid != __atomic_load_n(&mapped_pid, __ATOMIC_ACQUIRE)) {
        char path[256];
        const char *dir = getenv("MALLOC_COUNT_DIR");
        snprintf(path, sizeof path, "%s/%d", dir ? dir : "/tmp", pid);
        int fd = open(path, O_RDWR | O_CREAT, 0644);
        if (fd >= 0 && ftruncate(fd, 4096) == 0) {
            void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            if (p != MAP_FAILED) { counter = p; __atomic_store_n(&mapped_pid, pid, __ATOMIC_RELEASE); }
        }
        if (fd >= 0) close(fd);
    }
    if (counter) __atomic_add_fetch(counter, 1, __ATOMIC_RELAXED);
    busy = 0;
}
void *malloc(size_t s) { bump(); return __libc_malloc(s); }
void *calloc(size_t a, size_t b) { bump(); return __libc_calloc(a, b); }
void *realloc(void *p, size_t s) { bump(); return __libc_realloc(p, s); }

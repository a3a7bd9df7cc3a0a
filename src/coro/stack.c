#include "coro/stack.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "coro/kmutex.h"

#include "coro/asan.h"

#ifdef CORO_ASAN
#include <sanitizer/asan_interface.h>
#endif

#define POOL_MAX 1024
/* Guard bytes below each stack. More than a page: a function whose frame
 * is larger than the guard (the HTTP handler has 4 KiB path buffers) would
 * otherwise step over it into the next mapping. Virtual space only. */
#define GUARD_SIZE (64 * 1024)
#define ALTSTACK_SIZE (64 * 1024)

static struct coro_stack pool[POOL_MAX];
static int npool;
static struct kmutex pool_lock;
static size_t page;

static __thread const struct coro_stack *running;
static __thread int altstack_done;

static size_t page_size(void)
{
    if (!page)
        page = (size_t)sysconf(_SC_PAGESIZE);
    return page;
}

int coro_stack_fail_next;

int coro_stack_get(struct coro_stack *st, size_t size)
{
    if (__atomic_load_n(&coro_stack_fail_next, __ATOMIC_RELAXED) > 0 &&
        __atomic_sub_fetch(&coro_stack_fail_next, 1, __ATOMIC_RELAXED) >= 0)
        return -ENOMEM;
    size_t pg = page_size();
    size = (size + pg - 1) & ~(pg - 1);
    kmutex_lock(&pool_lock);
    for (int i = npool - 1; i >= 0; i--) {
        if (pool[i].size == size) {
            *st = pool[i];
            pool[i] = pool[--npool];
            kmutex_unlock(&pool_lock);
#ifdef CORO_ASAN
            /* Frames of a coroutine that ended by switching away never
             * returned: their redzones are still poisoned. */
            __asan_unpoison_memory_region(st->lo, st->size);
#endif
            return 0;
        }
    }
    kmutex_unlock(&pool_lock);
    char *m = mmap(NULL, size + GUARD_SIZE, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        return -errno;
    if (mprotect(m, GUARD_SIZE, PROT_NONE) < 0) {
        int e = errno;
        munmap(m, size + GUARD_SIZE);
        return -e;
    }
    st->lo = m + GUARD_SIZE;
    st->size = size;
    return 0;
}

void coro_stack_put(struct coro_stack *st)
{
    kmutex_lock(&pool_lock);
    if (npool < POOL_MAX) {
        pool[npool++] = *st;
        kmutex_unlock(&pool_lock);
        return;
    }
    kmutex_unlock(&pool_lock);
    munmap((char *)st->lo - GUARD_SIZE, st->size + GUARD_SIZE);
}

void coro_stack_running(const struct coro_stack *st)
{
    running = st;
}

static void say(const char *s)
{
    size_t n = strlen(s);
    while (n) {
        ssize_t w = write(2, s, n);
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

/* Async-signal-safe: formats with nothing but write(2). */
static void on_segv(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    const struct coro_stack *st = running;
    uintptr_t a = (uintptr_t)si->si_addr;
    char hex[19] = "0x";
    for (int i = 0; i < 16; i++)
        hex[2 + i] = "0123456789abcdef"[(a >> (60 - 4 * i)) & 15];
    hex[18] = 0;
    if (st && a < (uintptr_t)st->lo && a >= (uintptr_t)st->lo - GUARD_SIZE) {
        say("herd: coroutine stack overflow (guard page hit at ");
        say(hex);
        say("): raise --coro-stack\n");
    } else {
        say("herd: segmentation fault at ");
        say(hex);
        say("\n");
    }
    /* Die of the signal, so the exit status and a core tell the truth. */
    signal(sig, SIG_DFL);
    raise(sig);
}

int coro_stack_guard_thread(void)
{
    static int installed;
    page_size();
    if (!__atomic_exchange_n(&installed, 1, __ATOMIC_ACQ_REL)) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_segv;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGSEGV, &sa, NULL) < 0 || sigaction(SIGBUS, &sa, NULL) < 0)
            return -errno;
    }
    if (altstack_done)
        return 0;
    /* Keep one that is already there (ASan's, which it unmaps itself when
     * the thread ends). */
    stack_t old;
    if (sigaltstack(NULL, &old) == 0 && !(old.ss_flags & SS_DISABLE) && old.ss_size >= 8192) {
        altstack_done = 1;
        return 0;
    }
    /* Never freed: a thread's alternate stack must outlive any signal on it. */
    stack_t ss = {.ss_sp = malloc(ALTSTACK_SIZE), .ss_size = ALTSTACK_SIZE};
    if (!ss.ss_sp)
        return -ENOMEM;
    if (sigaltstack(&ss, NULL) < 0)
        return -errno;
    altstack_done = 1;
    return 0;
}

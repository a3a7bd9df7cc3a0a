#include "core/bufpool.h"

#include <stdlib.h>

void bufpool_init(struct bufpool *p, size_t size, unsigned max_free)
{
    p->size = size;
    p->free = NULL;
    p->nfree = 0;
    p->max_free = max_free;
}

void bufpool_destroy(struct bufpool *p)
{
    while (p->free) {
        void *next = *(void **)p->free;
        free(p->free);
        p->free = next;
    }
    p->nfree = 0;
}

char *bufpool_get(struct bufpool *p)
{
    if (p->free) {
        char *b = p->free;
        p->free = *(void **)b;
        p->nfree--;
        return b;
    }
    return malloc(p->size);
}

void bufpool_put(struct bufpool *p, char *buf)
{
    if (p->nfree >= p->max_free) {
        free(buf);
        return;
    }
    *(void **)buf = p->free;
    p->free = buf;
    p->nfree++;
}

/* Fixed-size buffers recycled through a free list, so a connection that
 * needs its own input buffer (a partial or pipelined request left over)
 * takes one without malloc, and an idle connection holds none. */
#ifndef HERD_BUFPOOL_H
#define HERD_BUFPOOL_H

#include <stddef.h>

struct bufpool {
    size_t size;     /* bytes per buffer */
    void *free;      /* singly linked through the first word */
    unsigned nfree, max_free;
};

void bufpool_init(struct bufpool *p, size_t size, unsigned max_free);
void bufpool_destroy(struct bufpool *p);
/* NULL when memory is exhausted. */
char *bufpool_get(struct bufpool *p);
void bufpool_put(struct bufpool *p, char *buf);

#endif

#include "proc/scoreboard.h"

#include <stddef.h>
#include <sys/mman.h>

static size_t sb_size(uint32_t nslots)
{
    return sizeof(struct scoreboard) + (size_t)nslots * sizeof(struct sb_slot);
}

struct scoreboard *sb_create(uint32_t nslots)
{
    if (nslots > SB_MAX_SLOTS)
        nslots = SB_MAX_SLOTS;
    struct scoreboard *sb = mmap(NULL, sb_size(nslots), PROT_READ | PROT_WRITE,
                                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sb == MAP_FAILED)
        return NULL;
    sb->nslots = nslots;
    return sb;
}

void sb_destroy(struct scoreboard *sb)
{
    if (sb)
        munmap(sb, sb_size(sb->nslots));
}

/* Scoreboard indexes of upstream servers across reloads: see
 * proc/upstream_index.h. */
#include "proc/upstream_index.h"

#include <stdio.h>
#include <string.h>

#include "proc/health.h"

void upindex_number(struct serve_config *cfg)
{
    uint32_t index = 0;
    for (int g = 0; g < cfg->nupstreams; g++)
        for (int s = 0; s < cfg->upstreams[g].nservers; s++, index++)
            cfg->upstreams[g].sb_index[s] =
                (uint16_t)(index < SB_UPSTREAMS ? index : SB_UPSTREAMS);
}

_Static_assert(SB_UPSTREAMS == 32, "an index mask is a uint32_t");

uint32_t upindex_mask(const struct serve_config *cfg)
{
    uint32_t mask = 0;
    for (int g = 0; g < cfg->nupstreams; g++)
        for (int s = 0; s < cfg->upstreams[g].nservers; s++)
            if (cfg->upstreams[g].sb_index[s] < SB_UPSTREAMS)
                mask |= 1u << cfg->upstreams[g].sb_index[s];
    return mask;
}

/* The index server s of group g of next had in cur: the same group name,
 * and of the servers with its address there the same one in turn (a
 * group may name an address twice). SB_UPSTREAMS when none. */
static uint16_t kept_index(const struct serve_config *cur, const struct serve_config *next,
                           int g, int s)
{
    const struct upstream_group *ng = &next->upstreams[g];
    const char *addr = ng->servers[s].text;
    int turn = 0;
    for (int k = 0; k < s; k++)
        turn += !strcmp(ng->servers[k].text, addr);
    for (int og = 0; og < cur->nupstreams; og++) {
        const struct upstream_group *was = &cur->upstreams[og];
        if (strcmp(was->name, ng->name))
            continue;
        for (int k = 0; k < was->nservers; k++)
            if (!strcmp(was->servers[k].text, addr) && turn-- == 0)
                return was->sb_index[k];
        break;
    }
    return SB_UPSTREAMS;
}

/* Index i changes hands: nothing of its last server's remains. */
static void clear_entry(struct scoreboard *sb, uint32_t i)
{
    SB_SET(sb->upstream_health[i], HEALTH_UNCHECKED);
    __atomic_store_n(&sb->upstream_stalled[i], 0, __ATOMIC_RELAXED);
    __atomic_store_n(&sb->upstream_nopool_until[i], 0, __ATOMIC_RELAXED);
    __atomic_store_n(&sb->upstream_answer[i].conn, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&sb->upstream_answer[i].ms, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&sb->upstream_answer[i].run, 0, __ATOMIC_RELAXED);
    for (uint32_t k = 0; k < sb->nslots; k++) {
        SB_SET(sb->slots[k].up[i].idle, 0);
        SB_SET(sb->slots[k].up[i].busy, 0);
        SB_SET(sb->slots[k].up[i].stalls, 0);
    }
}

void upindex_assign(const struct serve_config *cur, struct serve_config *next, uint32_t live,
                    struct scoreboard *sb)
{
    uint32_t taken = live | upindex_mask(cur);
    for (int g = 0; g < next->nupstreams; g++)
        for (int s = 0; s < next->upstreams[g].nservers; s++)
            next->upstreams[g].sb_index[s] = kept_index(cur, next, g, s);
    uint32_t free_from = 0;
    for (int g = 0; g < next->nupstreams; g++)
        for (int s = 0; s < next->upstreams[g].nservers; s++) {
            uint16_t *index = &next->upstreams[g].sb_index[s];
            if (*index < SB_UPSTREAMS)
                continue;
            while (free_from < SB_UPSTREAMS && (taken >> free_from & 1))
                free_from++;
            if (free_from == SB_UPSTREAMS)
                continue; /* no shared entry: proxied, not shown or checked */
            *index = (uint16_t)free_from;
            taken |= 1u << free_from;
            if (sb)
                clear_entry(sb, free_from);
        }
}

void upindex_publish(struct scoreboard *sb, const struct serve_config *cfg)
{
    if (!sb)
        return;
    uint32_t n = 0;
    for (int g = 0; g < cfg->nupstreams; g++)
        for (int s = 0; s < cfg->upstreams[g].nservers; s++) {
            uint16_t i = cfg->upstreams[g].sb_index[s];
            if (i >= SB_UPSTREAMS || n >= SB_UPSTREAMS)
                continue;
            char name[SB_UPSTREAM_NAME];
            snprintf(name, sizeof name, "%s %s", cfg->upstreams[g].name,
                     cfg->upstreams[g].servers[s].text);
            memcpy(sb->upstream_names[i], name, sizeof name);
            SB_SET(sb->upstream_order[n], (uint8_t)i);
            n++;
        }
    SB_SET(sb->nupstreams, n);
}

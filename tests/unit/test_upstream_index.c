/* proc/upstream_index.c: a server keeps its scoreboard index across a
 * reload while the new config keeps it; a new server takes an index no
 * live generation uses, with nothing of its last owner left; past the
 * shared entries a server gets none. */
#include "unit.h"

#include "proc/health.h"
#include "proc/upstream_index.h"

/* cfg with groups given as "name=addr,addr;name=addr" */
static void build(struct serve_config *cfg, const char *spec)
{
    memset(cfg, 0, sizeof *cfg);
    char copy[512], err[128];
    snprintf(copy, sizeof copy, "%s", spec);
    for (char *gs = strtok(copy, ";"); gs; gs = strtok(NULL, ";")) {
        struct upstream_group *g = &cfg->upstreams[cfg->nupstreams++];
        char *eq = strchr(gs, '=');
        *eq = 0;
        snprintf(g->name, sizeof g->name, "%s", gs);
        for (char *a = eq + 1, *next; a; a = next) {
            next = strchr(a, ',');
            if (next)
                *next++ = 0;
            if (listen_parse(a, &g->servers[g->nservers++], err, sizeof err) < 0)
                UNIT_NOTE("%s: %s", a, err);
        }
    }
    upindex_number(cfg);
}

static struct scoreboard *board(uint32_t nslots)
{
    struct scoreboard *sb = calloc(1, sizeof *sb + nslots * sizeof sb->slots[0]);
    sb->nslots = nslots;
    return sb;
}

TEST(config_order_at_first)
{
    static struct serve_config c;
    build(&c, "a=127.0.0.1:1,127.0.0.1:2;b=127.0.0.1:3");
    CHECK_EQ_INT(c.upstreams[0].sb_index[0], 0);
    CHECK_EQ_INT(c.upstreams[0].sb_index[1], 1);
    CHECK_EQ_INT(c.upstreams[1].sb_index[0], 2);
}

TEST(reordered_servers_keep_their_indexes)
{
    static struct serve_config cur, next;
    struct scoreboard *sb = board(2);
    build(&cur, "g=127.0.0.1:1,127.0.0.1:2;s=127.0.0.1:3");
    CHECK(upindex_mask(&cur) == 7);
    sb->upstream_health[0] = HEALTH_DOWN;
    build(&next, "s=127.0.0.1:3;g=127.0.0.1:2,127.0.0.1:1");
    upindex_assign(&cur, &next, upindex_mask(&cur), sb);
    CHECK_EQ_INT(next.upstreams[0].sb_index[0], 2);
    CHECK_EQ_INT(next.upstreams[1].sb_index[0], 1);
    CHECK_EQ_INT(next.upstreams[1].sb_index[1], 0);
    CHECK_EQ_INT(sb->upstream_health[0], HEALTH_DOWN); /* still 127.0.0.1:1's */
    free(sb);
}

TEST(a_new_server_takes_an_index_no_live_generation_uses_and_starts_clean)
{
    static struct serve_config cur, next, third;
    struct scoreboard *sb = board(3);
    build(&cur, "g=127.0.0.1:1,127.0.0.1:2");
    uint32_t gen1 = upindex_mask(&cur);
    /* 127.0.0.1:2 (index 1) is dropped; old workers may still use it */
    sb->upstream_health[1] = HEALTH_DOWN;
    sb->upstream_stalled[2] = 7;          /* from a generation long gone */
    sb->upstream_nopool_until[2] = 99;
    sb->upstream_answer[2].run = 5;
    sb->slots[1].up[2].stalls = 3;
    build(&next, "g=127.0.0.1:1,127.0.0.1:9");
    upindex_assign(&cur, &next, gen1, sb);
    uint32_t gen2 = upindex_mask(&next);
    CHECK_EQ_INT(next.upstreams[0].sb_index[0], 0);
    CHECK_EQ_INT(next.upstreams[0].sb_index[1], 2);
    CHECK_EQ_INT(sb->upstream_health[1], HEALTH_DOWN); /* left to the old workers */
    CHECK_EQ_INT(sb->upstream_stalled[2], 0);
    CHECK(sb->upstream_nopool_until[2] == 0 && sb->upstream_answer[2].run == 0);
    CHECK(sb->slots[1].up[2].stalls == 0);
    /* another reload while the first generation still drains: 1 and 2 are
     * both live, so a third new server goes to 3 */
    build(&third, "g=127.0.0.1:1,127.0.0.1:9,127.0.0.1:8");
    upindex_assign(&next, &third, gen1 | gen2, sb);
    CHECK_EQ_INT(third.upstreams[0].sb_index[1], 2);
    CHECK_EQ_INT(third.upstreams[0].sb_index[2], 3);
    /* once the first generation is gone, index 1 is free again, though
     * the second still drains */
    static struct serve_config fourth;
    build(&fourth, "g=127.0.0.1:7");
    upindex_assign(&third, &fourth, gen2 | upindex_mask(&third), sb);
    CHECK_EQ_INT(fourth.upstreams[0].sb_index[0], 1);
    CHECK_EQ_INT(sb->upstream_health[1], HEALTH_UNCHECKED);
    free(sb);
}

TEST(overlapping_reloads_do_not_use_up_the_indexes)
{
    /* Every reload comes while the one before still drains, each with a
     * new server: the indexes of generations that have gone come back
     * (a union kept since the last quiet moment ran out at reload 32) */
    static struct serve_config cfgs[2];
    uint32_t masks[2];
    char spec[64];
    build(&cfgs[0], "g=127.0.0.1:1");
    masks[0] = upindex_mask(&cfgs[0]);
    for (int k = 1; k <= 100; k++) {
        struct serve_config *cur = &cfgs[(k - 1) % 2], *next = &cfgs[k % 2];
        snprintf(spec, sizeof spec, "g=127.0.0.2:%d", k);
        build(next, spec);
        /* alive: the generation before (draining) and the current one */
        upindex_assign(cur, next, masks[(k - 1) % 2] | (k > 1 ? masks[k % 2] : 0), NULL);
        if (!CHECK(next->upstreams[0].sb_index[0] < SB_UPSTREAMS)) {
            UNIT_NOTE("reload %d: no index", k);
            break;
        }
        masks[k % 2] = upindex_mask(next);
    }
}

TEST(a_group_renamed_or_an_address_named_twice)
{
    static struct serve_config cur, next;
    build(&cur, "g=127.0.0.1:1,127.0.0.1:1");
    /* the same address twice keeps both indexes, in turn */
    build(&next, "g=127.0.0.1:1,127.0.0.1:1,127.0.0.1:1;h=127.0.0.1:1");
    upindex_assign(&cur, &next, upindex_mask(&cur), NULL);
    CHECK_EQ_INT(next.upstreams[0].sb_index[0], 0);
    CHECK_EQ_INT(next.upstreams[0].sb_index[1], 1);
    CHECK_EQ_INT(next.upstreams[0].sb_index[2], 2);
    /* another group's server with that address is another server */
    CHECK_EQ_INT(next.upstreams[1].sb_index[0], 3);
}

TEST(past_the_shared_entries_a_server_gets_none)
{
    static struct serve_config cur, next;
    char spec[512] = "", *p = spec;
    /* 16 + 16 servers fill the 32 entries */
    for (int g = 0; g < 2; g++) {
        p += sprintf(p, "%sg%d=", g ? ";" : "", g);
        for (int s = 0; s < 16; s++)
            p += sprintf(p, "%s127.0.0.%d:%d", s ? "," : "", g + 1, s + 1);
    }
    build(&cur, spec);
    CHECK_EQ_INT(cur.upstreams[1].sb_index[15], 31);
    CHECK(upindex_mask(&cur) == 0xffffffffu);
    snprintf(p, sizeof spec - (size_t)(p - spec), ";n=127.0.0.9:1");
    build(&next, spec);
    CHECK_EQ_INT(next.upstreams[2].sb_index[0], SB_UPSTREAMS);
    upindex_assign(&cur, &next, upindex_mask(&cur), NULL);
    CHECK_EQ_INT(next.upstreams[2].sb_index[0], SB_UPSTREAMS);
    CHECK_EQ_INT(next.upstreams[1].sb_index[15], 31);
}

TEST(publish_lists_the_current_config_in_order)
{
    static struct serve_config cur, next;
    struct scoreboard *sb = board(1);
    build(&cur, "g=127.0.0.1:1,127.0.0.1:2");
    build(&next, "g=127.0.0.1:5,127.0.0.1:2");
    upindex_assign(&cur, &next, upindex_mask(&cur), sb);
    upindex_publish(sb, &next);
    CHECK_EQ_INT(sb->nupstreams, 2);
    CHECK_EQ_INT(sb->upstream_order[0], 2);
    CHECK_EQ_INT(sb->upstream_order[1], 1);
    CHECK(!strcmp(sb->upstream_names[2], "g 127.0.0.1:5"));
    CHECK(!strcmp(sb->upstream_names[1], "g 127.0.0.1:2"));
    free(sb);
}

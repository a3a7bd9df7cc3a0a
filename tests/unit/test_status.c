/* proc/status.c: the status page stays within its buffer and, when cut,
 * ends at a whole row (no partial row, no NUL from vsnprintf). */
#include "unit.h"

#include "proc/status.h"

static struct scoreboard *board(uint32_t nslots)
{
    struct scoreboard *sb = calloc(1, sizeof *sb + nslots * sizeof sb->slots[0]);
    sb->nslots = nslots;
    strcpy(sb->model, "reuseport");
    for (uint32_t i = 0; i < nslots; i++) {
        sb->slots[i].state = SB_RUNNING;
        sb->slots[i].pid = 1000 + (int32_t)i;
        sb->slots[i].requests = 123456789;
    }
    return sb;
}

TEST(table_cut_at_a_row_boundary)
{
    struct scoreboard *sb = board(64);
    static char buf[4096 + 64];
    for (size_t cap = 0; cap <= 4096; cap += 7) {
        memset(buf, '#', sizeof buf);
        size_t len = status_render(sb, STATUS_TABLE, buf, cap);
        int ok = len <= cap && memchr(buf, '\0', len) == NULL &&
                 (len == 0 || buf[len - 1] == '\n');
        for (size_t i = cap; i < cap + 64; i++)
            ok = ok && buf[i] == '#';
        if (!CHECK(ok)) {
            UNIT_NOTE("cap %zu: len %zu", cap, len);
            break;
        }
    }
    free(sb);
}

TEST(json_whole_when_it_fits)
{
    struct scoreboard *sb = board(4);
    static char buf[8192];
    size_t len = status_render(sb, STATUS_JSON, buf, sizeof buf);
    CHECK(len > 0 && len < sizeof buf);
    CHECK(buf[0] == '{' && buf[len - 2] == '}' && buf[len - 1] == '\n');
    free(sb);
}

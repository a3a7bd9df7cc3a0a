#include "http/sidecar.h"

#include "http/encoding.h"

static int not_older(const struct fc_entry *side, const struct fc_entry *e)
{
    if (side->mtim.tv_sec != e->mtim.tv_sec)
        return side->mtim.tv_sec > e->mtim.tv_sec;
    return side->mtim.tv_nsec >= e->mtim.tv_nsec;
}

struct fc_entry *sidecar_open(struct filecache *fc, const struct fc_entry *e, int coding,
                              time_t now)
{
    struct fc_entry *side;
    if (fc_lookup_suffixed(fc, e->path, e->path_len, coding_suffix[coding],
                           coding_suffix_len[coding], now, &side) < 0)
        return NULL;
    if (!not_older(side, e)) {
        fc_release(side);
        return NULL;
    }
    return side;
}

unsigned sidecar_available(struct filecache *fc, struct fc_entry *e, time_t now)
{
    if (e->codings_checked == now)
        return e->codings;
    unsigned mask = 0;
    if (coding_of_name(e->path, e->path_len) < 0) {
        for (int c = 0; c < CODING_COUNT; c++) {
            struct fc_entry *side = sidecar_open(fc, e, c, now);
            if (side) {
                mask |= 1u << c;
                fc_release(side);
            }
        }
    }
    e->codings = (uint8_t)mask;
    e->codings_checked = now;
    return mask;
}

#include "cmd/flags.h"

#include "core/units.h"

int flag_size(const char *s, uint64_t *out) { return unit_size(s, out); }
int flag_duration_ms(const char *s, int64_t *out) { return unit_duration_ms(s, out); }
int flag_count(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    return unit_count(s, min, max, out);
}

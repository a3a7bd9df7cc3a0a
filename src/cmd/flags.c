#include "cmd/flags.h"

#include <stdio.h>

#include "core/units.h"

int flag_size(const char *s, uint64_t *out) { return unit_size(s, out); }
int flag_duration_ms(const char *s, int64_t *out) { return unit_duration_ms(s, out); }
int flag_count(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    return unit_count(s, min, max, out);
}

int flag_usage_error(const char *cmd, const char *fmt, const char *a)
{
    fprintf(stderr, "herd %s: ", cmd);
    fprintf(stderr, fmt, a);
    fprintf(stderr, " (see herd %s --help)\n", cmd);
    return 2;
}

int flag_bad_value(const char *cmd, const char *opt, const char *v)
{
    fprintf(stderr, "herd %s: invalid value '%s' for %s (see herd %s --help)\n", cmd, v, opt,
            cmd);
    return 2;
}

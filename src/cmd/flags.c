#include "cmd/flags.h"

#include <stdio.h>
#include <string.h>

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

int flag_match(const struct flag_opt *opts, size_t nopts, int argc, char **argv, int *i,
               const char **v)
{
    const char *arg = argv[*i];
    *v = NULL;
    for (size_t j = 0; j < nopts; j++) {
        size_t n = strlen(opts[j].name);
        if (strncmp(arg, opts[j].name, n))
            continue;
        if (!arg[n]) {
            if (!opts[j].takes_value)
                return (int)j;
            if (*i + 1 >= argc)
                return FLAG_NO_VALUE;
            *v = argv[++*i];
            return (int)j;
        }
        if (opts[j].takes_value && (arg[n] == '=' || n == 2)) {
            *v = arg + n + (arg[n] == '=');
            return (int)j;
        }
    }
    return FLAG_UNKNOWN;
}

/* Values of command-line flags: the same parsers as settings use
 * (core/units.h). Each returns 0, or -1 for a value that is not one. */
#ifndef HERD_CMD_FLAGS_H
#define HERD_CMD_FLAGS_H

#include <stddef.h>
#include <stdint.h>

int flag_size(const char *s, uint64_t *out);        /* bytes; k, m, g suffixes (1024) */
int flag_duration_ms(const char *s, int64_t *out);  /* ms, s (default), m, h */
/* One line "herd CMD: <fmt with a>  (see herd CMD --help)" on stderr;
 * returns 2, the usage-error exit status. */
int flag_usage_error(const char *cmd, const char *fmt, const char *a)
    __attribute__((format(printf, 2, 0)));
/* "herd CMD: invalid value 'V' for OPT (see herd CMD --help)"; returns 2. */
int flag_bad_value(const char *cmd, const char *opt, const char *v);

int flag_count(const char *s, uint64_t min, uint64_t max, uint64_t *out);

/* One entry of a subcommand's option table. */
struct flag_opt {
    const char *name;   /* "--listen", "-n" */
    int kind;           /* the caller's enum */
    int takes_value;
};

/* Matches argv[*i] against opts: "--name", "--name=V", "--name V", and
 * "-nV" for two-letter names. Returns the table index with *v set (NULL
 * for a flag without a value; *i moves past a value taken from the next
 * argument), FLAG_UNKNOWN, or FLAG_NO_VALUE when the value is missing. */
#define FLAG_UNKNOWN (-1)
#define FLAG_NO_VALUE (-2)
int flag_match(const struct flag_opt *opts, size_t nopts, int argc, char **argv, int *i,
               const char **v);

#endif

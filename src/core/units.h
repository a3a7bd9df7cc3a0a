/* Values of settings (flags and config lines): sizes ("8k"), durations ("15s", "500ms")
 * and counts. Each returns 0, or -1 for a value that is not one. */
#ifndef HERD_CORE_UNITS_H
#define HERD_CORE_UNITS_H

#include <stdint.h>

int unit_size(const char *s, uint64_t *out);        /* bytes; k, m, g suffixes (1024) */
int unit_duration_ms(const char *s, int64_t *out);  /* ms, s (default), m, h */
int unit_count(const char *s, uint64_t min, uint64_t max, uint64_t *out);

#endif

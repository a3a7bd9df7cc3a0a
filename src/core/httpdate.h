/* HTTP-date (RFC 9110 5.6.7): IMF-fixdate out; IMF-fixdate, RFC 850 and
 * asctime in. Pure functions, no locale, no syscalls. */
#ifndef HERD_HTTPDATE_H
#define HERD_HTTPDATE_H

#include <stddef.h>
#include <time.h>

#define HTTPDATE_LEN 29 /* "Sun, 06 Nov 1994 08:49:37 GMT" */

/* Writes exactly HTTPDATE_LEN bytes (no NUL) to out. */
void httpdate_format(time_t t, char out[HTTPDATE_LEN]);

/* Returns 0 and sets *t, or -1 when s is not an HTTP-date. */
int httpdate_parse(const char *s, size_t len, time_t *t);

#endif

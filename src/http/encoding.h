/* Content codings of precompressed sidecar files and the Accept-Encoding
 * negotiation between them (RFC 9110 12.5.3). Pure functions. */
#ifndef HERD_HTTP_ENCODING_H
#define HERD_HTTP_ENCODING_H

#include <stddef.h>
#include <stdint.h>

#include "http/parser.h"

/* In order of preference when the client's q-values tie: the smaller file
 * first. Bit (1 << coding) of an "available" mask says a sidecar exists. */
enum coding { CODING_BR, CODING_ZSTD, CODING_GZIP, CODING_COUNT };

#define CODING_IDENTITY (-1) /* send the file itself */
#define CODING_NONE (-2)     /* nothing acceptable: 406 */

extern const char *const coding_token[CODING_COUNT];  /* "br", "zstd", "gzip" */
extern const char *const coding_suffix[CODING_COUNT]; /* ".br", ".zst", ".gz" */
extern const uint8_t coding_token_len[CODING_COUNT], coding_suffix_len[CODING_COUNT];

/* Chooses between the file itself and the codings in available, from the
 * request's Accept-Encoding field lines values[0..n) (n == 0: no field).
 *  - no field: identity (most clients that send none cannot decode);
 *  - a coding is acceptable when listed with q > 0, or matched by "*" with
 *    q > 0 and not listed; "x-gzip" is gzip;
 *  - identity is acceptable unless "identity;q=0", or "*;q=0" without an
 *    identity entry; unlisted, it ranks below every acceptable coding;
 *  - the highest q wins; at equal q br > zstd > gzip > identity;
 *  - elements that do not parse (a bad q) are ignored.
 * Returns a coding, CODING_IDENTITY, or CODING_NONE when identity is refused
 * and no available coding is acceptable. */
int coding_negotiate(const struct http_str *values, size_t n, unsigned available);

/* The coding whose suffix name[0..len) ends with, or -1. */
int coding_of_name(const char *name, size_t len);

#endif

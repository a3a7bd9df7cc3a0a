/* Request path normalisation: percent-decoding and resolution of ".", ".."
 * and empty segments, so that the result is a clean absolute path that can
 * never climb above "/"; and the way back to a URI path. Pure string work; confinement on disk (symlinks)
 * is the job of openat2(RESOLVE_BENEATH) in static.c. */
#ifndef HERD_HTTP_PATH_H
#define HERD_HTTP_PATH_H

#include <stddef.h>

/* Decodes and normalises in[0..len) (which must start with '/') into out,
 * NUL-terminated. A trailing '/' is kept (it asks for a directory).
 * Returns the length; -1 for invalid percent-encoding, an encoded or raw
 * NUL, or a ".." above the root; PATH_TOO_LONG when the result (or the
 * work on the way to it) does not fit outcap, which is said as soon as
 * it is known: what follows is not checked. */
#define PATH_TOO_LONG (-2)
int path_normalize(const char *in, size_t len, char *out, size_t outcap);

/* Percent-encodes a normalised path for a Location header: every byte
 * that is not a pchar of RFC 3986 (unreserved, sub-delims, ':', '@') or
 * '/' becomes %XX, so '%', '?', '#', backslash, space, controls (CR, LF) and
 * bytes over 0x7f never appear raw. Writes no NUL. Returns the length, or
 * -1 when it does not fit outcap (at most 3 * len bytes are needed). */
int path_encode(const char *in, size_t len, char *out, size_t outcap);

/* 1 when a segment of the normalised path starts with '.'. */
int path_has_dotfile(const char *path, size_t len);

#endif

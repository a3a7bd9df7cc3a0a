/* Files herd reads or replaces by a name it was given (config, pid file,
 * reload answer): read only when regular, so that a FIFO in their place
 * is an error at once rather than an open that waits for a writer (a
 * master stuck there serves no signal); replaced through a temporary
 * created afresh, so that a symlink planted at the temporary's name is
 * not written through. */
#ifndef HERD_CORE_REGFILE_H
#define HERD_CORE_REGFILE_H

#include <stddef.h>
#include <stdio.h>

/* path opened for reading when it is a regular file; NULL with errno set
 * otherwise (EINVAL: it exists but is not a regular file: a FIFO, a
 * device, a socket or a directory). */
FILE *regfile_open(const char *path);

/* strerror(errno) after regfile_open, naming the EINVAL it gives. */
const char *regfile_strerror(int err);

/* Replaces path with len bytes of data: written to path + suffix, made
 * with O_EXCL | O_NOFOLLOW after removing any entry of that name, then
 * renamed over path. 0, or -1 with errno set. */
int regfile_replace(const char *path, const char *suffix, const char *data, size_t len);

#endif

/* A small file read whole, such as a /proc file, whose size stat cannot
 * tell (it reads as 0): the buffer doubles until read says the end. */
#ifndef HERD_CORE_READFILE_H
#define HERD_CORE_READFILE_H

#include <stddef.h>

/* The text of path, NUL-terminated (free it), its length in *len when len
 * is not NULL; NULL when it cannot be opened or read, or memory runs out
 * (errno says which). */
char *read_file_whole(const char *path, size_t *len);
/* The same for a file that must hold at most max bytes: NULL with errno
 * EFBIG when it holds more. */
char *read_file_bounded(const char *path, size_t max, size_t *len);

#endif

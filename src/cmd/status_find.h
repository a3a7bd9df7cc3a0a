/* Where `herd status` finds a running server when no URL is given: the
 * listen address and status path of its config file, or the TCP port its
 * master listens on, found from its pid file through /proc. */
#ifndef HERD_CMD_STATUS_FIND_H
#define HERD_CMD_STATUS_FIND_H

#include <stddef.h>

/* config and pid_file may be NULL. Writes a status URL into url and
 * returns 0, or returns -1 with a one-line reason in err. */
int status_find(const char *config, const char *pid_file, char *url, size_t urlcap, char *err,
                size_t errlen);

#endif

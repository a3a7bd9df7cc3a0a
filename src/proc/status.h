/* The status page: the scoreboard as JSON, Prometheus text or a table. */
#ifndef HERD_PROC_STATUS_H
#define HERD_PROC_STATUS_H

#include <stddef.h>

#include "proc/scoreboard.h"

enum status_format { STATUS_JSON, STATUS_PROMETHEUS, STATUS_TABLE };

/* Writes at most cap bytes; returns the length (truncated output is cut at
 * a row boundary). */
size_t status_render(const struct scoreboard *sb, enum status_format fmt, char *buf,
                     size_t cap);

/* The status page as the HTTP handler asks for it (http_status_fn): arg
 * is the scoreboard, or NULL when there is none (then no page). */
size_t status_page(void *sb, int format, char *buf, size_t cap);

#endif

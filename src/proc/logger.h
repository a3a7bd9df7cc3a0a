/* The access-log daemon: a child of the master that reads batches of
 * records from the workers' shared datagram socket and appends them to the
 * log file, so a slow disk never blocks a worker. The file only ever gets
 * whole lines; lines a full disk refuses are counted (alog_file.h). USR1
 * reopens the file (logrotate); TERM drains what is queued and exits. */
#ifndef HERD_PROC_LOGGER_H
#define HERD_PROC_LOGGER_H

#include <stdint.h>

/* Runs in the logger process; returns its exit status. out_fd: the log
 * as the master's check opened it (kept, so that a FIFO's reader never
 * sees the check's close as its end), or -1 to open path. Lines it cannot
 * write are added to *dropped (the scoreboard's log_write_dropped). */
int logger_main(int rx_fd, int out_fd, const char *path, uint64_t *dropped);

/* Opens (creating) the log file for appending; -errno on failure. The
 * master opens it at start and on a reload that names a new one, so a bad
 * path fails before serving, and hands the fd to the logger. *made (when
 * not NULL) is set to 1 when this open created the file: a reload refused
 * later removes it. A symlink is followed and never counts as made. */
int logger_open_file(const char *path, int *made);

#endif

/* The access-log daemon: a child of the master that reads batches of
 * records from the workers' shared datagram socket and appends them to the
 * log file, so a slow disk never blocks a worker. The file only ever gets
 * whole lines; lines a full disk refuses are counted (alog_file.h). USR1
 * reopens the file (logrotate); TERM drains what is queued and exits. */
#ifndef HERD_PROC_LOGGER_H
#define HERD_PROC_LOGGER_H

#include <stdint.h>

/* Runs in the logger process; returns its exit status. Lines it cannot
 * write are added to *dropped (the scoreboard's log_write_dropped). */
int logger_main(int rx_fd, const char *path, uint64_t *dropped);

/* Opens (creating) the log file for appending; -errno on failure. The
 * master calls it once at start so a bad path fails before serving. */
int logger_open_file(const char *path);

#endif

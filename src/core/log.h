/* The error log: "YYYY/MM/DD HH:MM:SS [level] message", like nginx, on
 * stderr or in a file (--error-log). Nothing a peer can trigger is logged
 * per request at the default level. Functions return 0 or -errno. */
#ifndef HERD_LOG_H
#define HERD_LOG_H

enum log_level { LOG_CRIT, LOG_ERROR, LOG_WARN, LOG_NOTICE, LOG_INFO, LOG_DEBUG };

extern enum log_level log_max_level;

void log_msg(enum log_level level, const char *fmt, ...)
    __attribute__((cold, format(printf, 2, 3)));
void log_fatal(const char *fmt, ...)
    __attribute__((cold, noreturn, format(printf, 1, 2)));

/* From now on lines go to path (appended, created 0644), in this process
 * and in every process it forks. Call before forking. */
int log_open_file(const char *path);

/* Points fd 2 at the log file too (a daemon's stray stderr output, such as
 * a sanitizer report, then lands there instead of the caller's terminal). */
void log_take_stderr(void);

/* Opens the log file's path again (after a rotation renamed it), chowned
 * to uid:gid when uid >= 0 and it is a regular file, so that processes
 * that dropped privileges can open it too. Every process of the tree
 * follows before its next line. Without a log file: 0, nothing done. */
int log_reopen(int uid, int gid);

#define log_debug(...) do { if (log_max_level >= LOG_DEBUG) log_msg(LOG_DEBUG, __VA_ARGS__); } while (0)

#endif

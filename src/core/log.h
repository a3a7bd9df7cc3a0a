/* Error log on stderr: "YYYY/MM/DD HH:MM:SS [level] message", like nginx.
 * Nothing a peer can trigger is logged per request at the default level. */
#ifndef HERD_LOG_H
#define HERD_LOG_H

enum log_level { LOG_CRIT, LOG_ERROR, LOG_WARN, LOG_NOTICE, LOG_INFO, LOG_DEBUG };

extern enum log_level log_max_level;

void log_msg(enum log_level level, const char *fmt, ...)
    __attribute__((cold, format(printf, 2, 3)));
void log_fatal(const char *fmt, ...)
    __attribute__((cold, noreturn, format(printf, 1, 2)));

#define log_debug(...) do { if (log_max_level >= LOG_DEBUG) log_msg(LOG_DEBUG, __VA_ARGS__); } while (0)

#endif

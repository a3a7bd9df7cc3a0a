#include "core/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum log_level log_max_level = LOG_INFO;

static const char *const level_names[] = {
    "crit", "error", "warn", "notice", "info", "debug",
};

static void log_write(enum log_level level, const char *fmt, va_list ap)
{
    char line[1024];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    int n = (int)strftime(line, sizeof line, "%Y/%m/%d %H:%M:%S ", &tm);
    n += snprintf(line + n, sizeof line - (size_t)n, "[%s] ", level_names[level]);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    if (m < 0)
        m = 0;
    n += m;
    if (n > (int)sizeof line - 2)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    /* One write per line, so lines from several processes never interleave. */
    ssize_t w = write(STDERR_FILENO, line, (size_t)n);
    (void)w;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
    if (level > log_max_level)
        return;
    va_list ap;
    va_start(ap, fmt);
    log_write(level, fmt, ap);
    va_end(ap);
}

void log_fatal(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_write(LOG_CRIT, fmt, ap);
    va_end(ap);
    exit(1);
}

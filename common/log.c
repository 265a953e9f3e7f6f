/* SPDX-License-Identifier: MIT */
/* stderr logger with a global max level. */
#include "common/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static enum log_level max_level = LOG_LEVEL_INFO;

static const char *const level_names[] = {
        [LOG_LEVEL_ERROR] = "error", [LOG_LEVEL_WARNING] = "warning", [LOG_LEVEL_NOTICE] = "notice",
        [LOG_LEVEL_INFO] = "info",   [LOG_LEVEL_DEBUG] = "debug",
};

void log_set_max_level(enum log_level level)
{
        max_level = level;
}

enum log_level log_get_max_level(void)
{
        return max_level;
}

int log_level_from_string(const char *s, enum log_level *ret)
{
        for (int i = LOG_LEVEL_ERROR; i <= LOG_LEVEL_DEBUG; i++)
                if (level_names[i] && strcmp(s, level_names[i]) == 0) {
                        *ret = (enum log_level)i;
                        return 0;
                }
        return -EINVAL;
}

int log_internal(enum log_level level, int error, const char *file, int line, const char *fmt, ...)
{
        int e = abs(error);
        char buf[2048];
        struct timespec ts;
        struct tm tm;
        va_list ap;

        if (level > max_level)
                return -e;
        errno = e;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        clock_gettime(CLOCK_REALTIME, &ts);
        gmtime_r(&ts.tv_sec, &tm);
        if (max_level >= LOG_LEVEL_DEBUG)
                fprintf(stderr, "%02d:%02d:%02d.%03ld %s %s:%d: %s\n", tm.tm_hour, tm.tm_min,
                        tm.tm_sec, ts.tv_nsec / 1000000, level_names[level], file, line, buf);
        else
                fprintf(stderr, "%02d:%02d:%02d.%03ld %s: %s\n", tm.tm_hour, tm.tm_min, tm.tm_sec,
                        ts.tv_nsec / 1000000, level_names[level], buf);
        errno = e;
        return -e;
}

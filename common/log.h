/* SPDX-License-Identifier: MIT */
/* Logging to stderr with levels; the *_errno variants set errno so %m prints the error and
 * return the negative errno, so callers can `return log_error_errno(r, "...: %m")`. */
#pragma once

#include <errno.h>

enum log_level {
        LOG_LEVEL_ERROR = 3,
        LOG_LEVEL_WARNING = 4,
        LOG_LEVEL_NOTICE = 5,
        LOG_LEVEL_INFO = 6,
        LOG_LEVEL_DEBUG = 7,
};

void log_set_max_level(enum log_level level);
enum log_level log_get_max_level(void);
/* Parses "error|warning|notice|info|debug"; returns -EINVAL on anything else. */
int log_level_from_string(const char *s, enum log_level *ret);

/* Logs if level <= max level. error is a negative or positive errno (0: none) and is
 * put into errno for %m. Returns -abs(error). Thread-safe (one fprintf per line). */
int log_internal(enum log_level level, int error, const char *file, int line, const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));

#define log_full_errno(level, error, ...)                                                          \
        log_internal(level, error, __FILE__, __LINE__, __VA_ARGS__)
#define log_error_errno(error, ...)   log_full_errno(LOG_LEVEL_ERROR, error, __VA_ARGS__)
#define log_warning_errno(error, ...) log_full_errno(LOG_LEVEL_WARNING, error, __VA_ARGS__)
#define log_info_errno(error, ...)    log_full_errno(LOG_LEVEL_INFO, error, __VA_ARGS__)
#define log_debug_errno(error, ...)   log_full_errno(LOG_LEVEL_DEBUG, error, __VA_ARGS__)
#define log_error(...)                (void)log_full_errno(LOG_LEVEL_ERROR, 0, __VA_ARGS__)
#define log_warning(...)              (void)log_full_errno(LOG_LEVEL_WARNING, 0, __VA_ARGS__)
#define log_notice(...)               (void)log_full_errno(LOG_LEVEL_NOTICE, 0, __VA_ARGS__)
#define log_info(...)                 (void)log_full_errno(LOG_LEVEL_INFO, 0, __VA_ARGS__)
#define log_debug(...)                (void)log_full_errno(LOG_LEVEL_DEBUG, 0, __VA_ARGS__)

/* SPDX-License-Identifier: MIT */
/* Caller-owned, human-readable errors: struct fk_error and helpers to fill it. */
#pragma once

#include <stdarg.h>

#define FK_ERROR_MSG_MAX 256

/* A failure a person will read. code is a negative errno. Nothing to free. */
struct fk_error {
        int code;
        char msg[FK_ERROR_MSG_MAX];
};

/* Fill err (if non-NULL) with code and a formatted message; returns code (negative errno) so
 * callers can write `return fk_error_set(err, -EINVAL, "...")`. Does not log. */
int fk_error_set(struct fk_error *err, int code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
int fk_error_setv(struct fk_error *err, int code, const char *fmt, va_list ap)
        __attribute__((format(printf, 3, 0)));
void fk_error_clear(struct fk_error *err);

/* SPDX-License-Identifier: MIT */
/* struct fk_error helpers. */
#include "common/error.h"

#include <stdio.h>
#include <string.h>

int fk_error_setv(struct fk_error *err, int code, const char *fmt, va_list ap)
{
        if (err) {
                err->code = code;
                vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        }
        return code;
}

int fk_error_set(struct fk_error *err, int code, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        fk_error_setv(err, code, fmt, ap);
        va_end(ap);
        return code;
}

void fk_error_clear(struct fk_error *err)
{
        if (err) {
                err->code = 0;
                err->msg[0] = '\0';
        }
}

/* SPDX-License-Identifier: MIT */
/* Scope-bound cleanup helpers: cleanup_free, cleanup_close, TAKE_PTR/TAKE_FD. */
#pragma once

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define DEFINE_CLEANUP_FUNC(type, func)                                                            \
        static inline void func##p(type *p)                                                        \
        {                                                                                          \
                if (*p)                                                                            \
                        func(*p);                                                                  \
        }

static inline void freep(void *p)
{
        free(*(void **)p);
}

static inline void closep(int *fd)
{
        if (*fd >= 0) {
                int saved = errno;
                close(*fd);
                errno = saved;
        }
}

static inline void fclosep(FILE **f)
{
        if (*f)
                fclose(*f);
}

#define cleanup_free   __attribute__((cleanup(freep)))
#define cleanup_close  __attribute__((cleanup(closep)))
#define cleanup_fclose __attribute__((cleanup(fclosep)))
#define _cleanup_(f)   __attribute__((cleanup(f)))

#define TAKE_PTR(p)                                                                                \
        ({                                                                                         \
                __typeof__(p) _tp = (p);                                                           \
                (p) = NULL;                                                                        \
                _tp;                                                                               \
        })

#define TAKE_FD(fd)                                                                                \
        ({                                                                                         \
                int _tf = (fd);                                                                    \
                (fd) = -1;                                                                         \
                _tf;                                                                               \
        })

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define FK_MIN(a, b)  ((a) < (b) ? (a) : (b))
#define FK_MAX(a, b)  ((a) > (b) ? (a) : (b))

/* SPDX-License-Identifier: MIT */
/* libcurl bound on first use: defines the curl_* functions the CLI and the etcd client call,
 * dlopen()s libcurl.so.4 the first time one is called and forwards to it. Linked instead of
 * libcurl into executables that mostly do without it (forklet: only --server and the cluster
 * verbs need it), so their start does not pay for the ~30 libraries libcurl brings. A curl_*
 * function the linked modules call but not defined here fails the link;
 * tests/layout/link-deps.sh checks that forklet does not need libcurl. */
#define CURL_DISABLE_TYPECHECK /* the typecheck macros would rename the definitions below */
#include "common/curl-load.h"
#include "common/error.h"

#include <curl/curl.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define CURL_SONAME "libcurl.so.4"

/* Every function forwarded, as its type in curl.h. */
static struct {
        CURLcode (*global_init)(long flags);
        void (*global_cleanup)(void);
        CURL *(*easy_init)(void);
        void (*easy_cleanup)(CURL *h);
        void (*easy_reset)(CURL *h);
        CURLcode (*easy_setopt)(CURL *h, CURLoption option, ...);
        CURLcode (*easy_getinfo)(CURL *h, CURLINFO info, ...);
        CURLcode (*easy_perform)(CURL *h);
        const char *(*easy_strerror)(CURLcode code);
        struct curl_slist *(*slist_append)(struct curl_slist *l, const char *s);
        void (*slist_free_all)(struct curl_slist *l);
        CURLM *(*multi_init)(void);
        CURLMcode (*multi_add_handle)(CURLM *m, CURL *h);
        CURLMcode (*multi_remove_handle)(CURLM *m, CURL *h);
        CURLMcode (*multi_cleanup)(CURLM *m);
        CURLMcode (*multi_perform)(CURLM *m, int *running);
        CURLMcode (*multi_poll)(CURLM *m, struct curl_waitfd extra[], unsigned n, int timeout_ms,
                                int *ret);
        CURLMcode (*multi_wakeup)(CURLM *m);
        CURLMsg *(*multi_info_read)(CURLM *m, int *left);
} fn;

#define SYM(name)                                                                                  \
        {                                                                                          \
                "curl_" #name, offsetof(__typeof__(fn), name)                                      \
        }
static const struct {
        const char *name;
        size_t off;
} symbols[] = {
        SYM(global_init),      SYM(global_cleanup),      SYM(easy_init),       SYM(easy_cleanup),
        SYM(easy_reset),       SYM(easy_setopt),         SYM(easy_getinfo),    SYM(easy_perform),
        SYM(easy_strerror),    SYM(slist_append),        SYM(slist_free_all),  SYM(multi_init),
        SYM(multi_add_handle), SYM(multi_remove_handle), SYM(multi_cleanup),   SYM(multi_perform),
        SYM(multi_poll),       SYM(multi_wakeup),        SYM(multi_info_read),
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool loaded;
static char load_error[FK_ERROR_MSG_MAX];

static void load(void)
{
        void *h = dlopen(CURL_SONAME, RTLD_NOW | RTLD_LOCAL);
        CURLcode cc;

        if (!h) {
                snprintf(load_error, sizeof(load_error), "%s (install the libcurl4 package)",
                         dlerror());
                return;
        }
        for (size_t i = 0; i < sizeof(symbols) / sizeof(symbols[0]); i++) {
                void *p = dlsym(h, symbols[i].name);

                if (!p) {
                        snprintf(load_error, sizeof(load_error),
                                 "%s has no %s: libcurl 7.68 or newer is needed", CURL_SONAME,
                                 symbols[i].name);
                        return; /* h stays open: dlclose of libcurl is not worth the risk */
                }
                *(void **)((char *)&fn + symbols[i].off) = p;
        }
        cc = fn.global_init(CURL_GLOBAL_DEFAULT);
        if (cc != CURLE_OK) {
                snprintf(load_error, sizeof(load_error), "curl_global_init: %s",
                         fn.easy_strerror(cc));
                return;
        }
        loaded = true;
}

static bool ready(void)
{
        pthread_once(&once, load);
        return loaded;
}

int fk_curl_load(struct fk_error *err)
{
        if (!ready())
                return fk_error_set(err, -ELIBACC, "cannot load %s: %s", CURL_SONAME, load_error);
        return 0;
}

CURLcode curl_global_init(long flags)
{
        return ready() ? fn.global_init(flags) : CURLE_FAILED_INIT;
}

void curl_global_cleanup(void)
{
        if (ready())
                fn.global_cleanup();
}

CURL *curl_easy_init(void)
{
        return ready() ? fn.easy_init() : NULL;
}

void curl_easy_cleanup(CURL *h)
{
        if (h && ready())
                fn.easy_cleanup(h);
}

void curl_easy_reset(CURL *h)
{
        if (ready())
                fn.easy_reset(h);
}

/* The option's number says the type of its argument (curl.h's CURLOPTTYPE_* ranges). */
CURLcode curl_easy_setopt(CURL *h, CURLoption option, ...)
{
        CURLcode r;
        va_list ap;

        if (!ready())
                return CURLE_FAILED_INIT;
        va_start(ap, option);
        if (option < CURLOPTTYPE_OBJECTPOINT)
                r = fn.easy_setopt(h, option, va_arg(ap, long));
        else if (option < CURLOPTTYPE_FUNCTIONPOINT)
                r = fn.easy_setopt(h, option, va_arg(ap, void *));
        else if (option < CURLOPTTYPE_OFF_T)
                r = fn.easy_setopt(h, option, va_arg(ap, void (*)(void)));
        else if (option < CURLOPTTYPE_BLOB)
                r = fn.easy_setopt(h, option, va_arg(ap, curl_off_t));
        else
                r = fn.easy_setopt(h, option, va_arg(ap, struct curl_blob *));
        va_end(ap);
        return r;
}

/* Every CURLINFO takes one pointer to where the value goes. */
CURLcode curl_easy_getinfo(CURL *h, CURLINFO info, ...)
{
        CURLcode r;
        va_list ap;

        if (!ready())
                return CURLE_FAILED_INIT;
        va_start(ap, info);
        r = fn.easy_getinfo(h, info, va_arg(ap, void *));
        va_end(ap);
        return r;
}

CURLcode curl_easy_perform(CURL *h)
{
        return ready() ? fn.easy_perform(h) : CURLE_FAILED_INIT;
}

const char *curl_easy_strerror(CURLcode code)
{
        return ready() ? fn.easy_strerror(code) : "libcurl.so.4 could not be loaded";
}

struct curl_slist *curl_slist_append(struct curl_slist *l, const char *s)
{
        return ready() ? fn.slist_append(l, s) : NULL;
}

void curl_slist_free_all(struct curl_slist *l)
{
        if (l && ready())
                fn.slist_free_all(l);
}

CURLM *curl_multi_init(void)
{
        return ready() ? fn.multi_init() : NULL;
}

CURLMcode curl_multi_add_handle(CURLM *m, CURL *h)
{
        return ready() ? fn.multi_add_handle(m, h) : CURLM_INTERNAL_ERROR;
}

CURLMcode curl_multi_remove_handle(CURLM *m, CURL *h)
{
        return ready() ? fn.multi_remove_handle(m, h) : CURLM_INTERNAL_ERROR;
}

CURLMcode curl_multi_cleanup(CURLM *m)
{
        return ready() ? fn.multi_cleanup(m) : CURLM_INTERNAL_ERROR;
}

CURLMcode curl_multi_perform(CURLM *m, int *running)
{
        return ready() ? fn.multi_perform(m, running) : CURLM_INTERNAL_ERROR;
}

CURLMcode curl_multi_poll(CURLM *m, struct curl_waitfd extra[], unsigned int n, int timeout_ms,
                          int *ret)
{
        return ready() ? fn.multi_poll(m, extra, n, timeout_ms, ret) : CURLM_INTERNAL_ERROR;
}

CURLMcode curl_multi_wakeup(CURLM *m)
{
        return ready() ? fn.multi_wakeup(m) : CURLM_INTERNAL_ERROR;
}

CURLMsg *curl_multi_info_read(CURLM *m, int *left)
{
        return ready() ? fn.multi_info_read(m, left) : NULL;
}

/* SPDX-License-Identifier: MIT */
/* fk_curl_load for executables linked against libcurl: curl_global_init, once. */
#include "common/curl-load.h"
#include "common/error.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static CURLcode init_result;

static void init(void)
{
        init_result = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int fk_curl_load(struct fk_error *err)
{
        pthread_once(&once, init);
        if (init_result != CURLE_OK)
                return fk_error_set(err, -EIO, "curl_global_init: %s",
                                    curl_easy_strerror(init_result));
        return 0;
}

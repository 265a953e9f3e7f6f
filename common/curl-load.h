/* SPDX-License-Identifier: MIT */
/* libcurl made ready for use, however the executable gets it: linked (curl-direct.c, the
 * default) or loaded with dlopen() on first use (curl-lazy.c, the forklet CLI, so that a local
 * call does not load libcurl and the ~35 libraries it pulls in). CMake picks one per
 * executable (fk_curl_api in the top-level CMakeLists.txt). */
#pragma once

struct fk_error;

/* Loads libcurl if needed and runs curl_global_init once; thread-safe. Call before the first
 * curl_* function. Returns 0, or -errno with err naming the library and the package to install
 * (or curl_global_init's failure). Does not log. */
int fk_curl_load(struct fk_error *err);

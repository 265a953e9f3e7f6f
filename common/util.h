/* SPDX-License-Identifier: MIT */
/* Small shared helpers: files, directories, time, string vectors. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Reads all of path into a NUL-terminated heap buffer (caller frees *ret). Fails with -EFBIG
 * when the file is larger than max bytes. ret_size may be NULL. Does not log. */
int fk_read_file(const char *path, size_t max, char **ret, size_t *ret_size);
/* The same for what is left to read on fd (a file, pipe or terminal; not closed). */
int fk_read_fd(int fd, size_t max, char **ret, size_t *ret_size);

/* Writes data to path atomically: a temp file of an unpredictable name in the same dir created
 * O_EXCL|O_NOFOLLOW, fsync, rename over path (a symlink at path is replaced, never followed),
 * fsync dir. mode applies to the new file. Returns 0 or -errno. Does not log. */
int fk_write_file_atomic(const char *path, const void *data, size_t size, mode_t mode);
/* The same relative to a directory fd; name is one path component. */
int fk_write_file_atomicat(int dfd, const char *name, const void *data, size_t size, mode_t mode);

/* mkdir -p with mode for each created component. Existing dirs are fine. */
int fk_mkdir_p(const char *path, mode_t mode);

/* rm -rf path (does not follow symlinks, stays on one filesystem). Missing path is success. */
int fk_rm_rf(const char *path);

/* Monotonic and wall clocks in nanoseconds. */
uint64_t fk_now_mono_ns(void);
uint64_t fk_now_real_ns(void);

/* Formats ns-since-epoch as RFC 3339 UTC ("2026-11-29T09:10:06Z") into buf (>= 32 bytes). */
char *fk_format_rfc3339(uint64_t real_ns, char *buf, size_t size);

/* NULL-terminated string vectors, heap-owned elements. */
char **fk_strv_free(char **v);
size_t fk_strv_length(char *const *v);
/* Deep copy; returns NULL on ENOMEM (or when v is NULL, with *ret NULL and 0). */
int fk_strv_copy(char *const *v, char ***ret);
/* Appends a copy of s. */
int fk_strv_push(char ***v, const char *s);
bool fk_strv_equal(char *const *a, char *const *b);

/* asprintf that returns -ENOMEM instead of -1 and writes *ret only on success. */
int fk_asprintf(char **ret, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Write or read exactly size bytes, retrying on EINTR and short transfers. read returns
 * -EPIPE on EOF before size bytes. */
int fk_write_all(int fd, const void *buf, size_t size);
int fk_read_all(int fd, void *buf, size_t size);

/* Fills buf with size random bytes from getrandom(2). */
int fk_random_bytes(void *buf, size_t size);
/* Writes 2*size hex digits plus NUL into out. */
void fk_hex(const void *data, size_t size, char *out);

/* Copies untrusted text (a guest's, a peer's) into out (out_size >= 8, NUL-terminated) so it is
 * safe to log or put in a message or reply: printable ASCII as is, every other byte and '\\' as
 * \xNN, and "..." when it was cut. NULL in gives "". */
void fk_escape_text(const char *in, char *out, size_t out_size);

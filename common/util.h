/* SPDX-License-Identifier: MIT */
/* Small shared helpers: files, directories, time, string vectors, base64, SHA-256, the host id
 * and a socket relay. */
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
/* fk_write_file_atomic without the fsyncs: readers and a restarted process find the old file or
 * the new one, whole; after a crash of the host either may be there, or an empty file. For files
 * that describe what a host crash ends anyway (network leases of running VMs). */
int fk_write_file_replace(const char *path, const void *data, size_t size, mode_t mode);

/* mkdir -p with mode for each created component. Existing dirs are fine. */
int fk_mkdir_p(const char *path, mode_t mode);

/* rm -rf path (does not follow symlinks, stays on one filesystem). Missing path is success. */
int fk_rm_rf(const char *path);
/* Runs fn(arg) in a child as posix_spawn makes it: on this process's memory (CLONE_VM) while
 * the calling thread waits for the child's exec or exit (CLONE_VFORK), on a stack of its own
 * (256 KiB), with every signal blocked (the child resets its handlers before it unblocks any:
 * they are copies, as its fd table and cwd are). Unlike fork() it copies no page tables and
 * leaves the parent no copy-on-write faults. fn may make system calls only: no malloc, no
 * stdio, raw syscalls for the credentials (glibc would broadcast those to the parent's
 * threads); it execs or _exits, and its return value is its exit status. The child's pid, or
 * -errno; the caller reaps it. An AddressSanitizer build forks instead (see util.c). A child
 * that changes its uid makes the shared mm non-dumpable (the kernel's rule), so that the new
 * uid cannot ptrace its way into this process: never make the process dumpable again while
 * such a child may run. */
pid_t fk_clone_vfork(int (*fn)(void *), void *arg);

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

/* Appends item to the list in *list (NULL: empty), after sep unless the list is empty; the
 * joins of names into one message are built with it. 0, or -ENOMEM with *list unchanged. */
int fk_list_append(char **list, const char *sep, const char *item);

/* Write or read exactly size bytes, retrying on EINTR and short transfers. read returns
 * -EPIPE on EOF before size bytes. */
int fk_write_all(int fd, const void *buf, size_t size);
int fk_read_all(int fd, void *buf, size_t size);

/* Connects a unix stream socket (SOCK_CLOEXEC, blocking) to path, trying again while nobody
 * listens there yet (ENOENT, ECONNREFUSED, EAGAIN), for at most timeout_ms: after 1 ms, then
 * twice as long each time up to 10 ms (a process just started, QEMU, creates its sockets at
 * some point of its start; many forks starting at once must not spin on their sockets). The
 * fd, or -errno: the last error when the time ran out, -ENAMETOOLONG for a path longer than
 * sun_path. */
int fk_unix_connect_wait(const char *path, unsigned timeout_ms);

/* Fills buf with size random bytes from getrandom(2). */
int fk_random_bytes(void *buf, size_t size);
/* Writes 2*size hex digits plus NUL into out. */
void fk_hex(const void *data, size_t size, char *out);

/* Copies untrusted text (a guest's, a peer's) into out (out_size >= 8, NUL-terminated) so it is
 * safe to log or put in a message or reply: printable ASCII as is, every other byte and '\\' as
 * \xNN, and "..." when it was cut. NULL in gives "". */
void fk_escape_text(const char *in, char *out, size_t out_size);

/* Standard base64 (RFC 4648, with padding). encode: *ret is a NUL-terminated heap string.
 * decode: len bytes of s (padding optional, no whitespace, canonical trailing bits) into a heap
 * buffer of *ret_size bytes plus a NUL; -EINVAL on a character outside the alphabet or a bad
 * length. Both -ENOMEM; write *ret only on success. */
int fk_base64_encode(const void *data, size_t size, char **ret);
int fk_base64_decode(const char *s, size_t len, void **ret, size_t *ret_size);

/* Streaming SHA-256 (FIPS 180-4); plain data, no allocation (common/sha256.c). */
#define FK_SHA256_SIZE 32
struct fk_sha256 {
        uint32_t h[8];
        uint64_t len;
        uint8_t buf[64];
        size_t fill;
};
void fk_sha256_init(struct fk_sha256 *c);
void fk_sha256_update(struct fk_sha256 *c, const void *data, size_t size);
void fk_sha256_final(struct fk_sha256 *c, uint8_t out[FK_SHA256_SIZE]);
/* One-shot digest as 64 lowercase hex digits + NUL. */
void fk_sha256_hex(const void *data, size_t size, char out[2 * FK_SHA256_SIZE + 1]);

/* This host's id as nodes publish it (api.hostID) and the CLI compares it: the first 32 hex
 * digits of a SHA-256 over /etc/machine-id (else the hostname), so the id itself stays
 * private. 0 or -errno; does not log. */
#define FK_HOST_ID_SIZE 33 /* 32 hex digits + NUL */
int fk_host_id(char out[FK_HOST_ID_SIZE]);

/* Copies bytes both ways between stream sockets a and b until both directions reached EOF
 * (an EOF on one side half-closes the other) or an error; the caller closes the fds. Blocks;
 * another thread may shutdown() either fd to end it. Returns 0 or -errno. Does not log. */
int fk_relay(int a, int b);

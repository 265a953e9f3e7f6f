/* SPDX-License-Identifier: MIT */
/* Shared helpers: files, directories, time, string vectors. */
#include "common/util.h"
#include "common/cleanup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

int fk_read_file(const char *path, size_t max, char **ret, size_t *ret_size)
{
        cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);

        if (fd < 0)
                return -errno;
        return fk_read_fd(fd, max, ret, ret_size);
}

int fk_read_fd(int fd, size_t max, char **ret, size_t *ret_size)
{
        cleanup_free char *buf = NULL;
        size_t size = 0, alloc = 0;
        struct stat st;

        if (fstat(fd, &st) < 0)
                return -errno;
        if (S_ISREG(st.st_mode) && (uint64_t)st.st_size > max)
                return -EFBIG;
        for (;;) {
                if (size + 1 >= alloc) {
                        size_t n = alloc ? alloc * 2 : 4096;
                        char *p;

                        if (n > max + 2)
                                n = max + 2;
                        if (n <= size + 1)
                                return -EFBIG;
                        p = realloc(buf, n);
                        if (!p)
                                return -ENOMEM;
                        buf = p;
                        alloc = n;
                }
                ssize_t k = read(fd, buf + size, alloc - size - 1);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        break;
                size += (size_t)k;
                if (size > max)
                        return -EFBIG;
        }
        if (!buf) {
                buf = malloc(1);
                if (!buf)
                        return -ENOMEM;
        }
        buf[size] = '\0';
        *ret = TAKE_PTR(buf);
        if (ret_size)
                *ret_size = size;
        return 0;
}

int fk_write_all(int fd, const void *buf, size_t size)
{
        const char *p = buf;

        while (size > 0) {
                ssize_t k = write(fd, p, size);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                p += k;
                size -= (size_t)k;
        }
        return 0;
}

int fk_read_all(int fd, void *buf, size_t size)
{
        char *p = buf;

        while (size > 0) {
                ssize_t k = read(fd, p, size);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        return -EPIPE;
                p += k;
                size -= (size_t)k;
        }
        return 0;
}

static int write_atomicat(int dfd, const char *name, const void *data, size_t size, mode_t mode,
                          bool sync)
{
        cleanup_close int fd = -1;
        char tmp[NAME_MAX + 1];
        uint64_t rnd;
        int r;

        if (!name[0] || strchr(name, '/') || strlen(name) + 22 > NAME_MAX)
                return -EINVAL;
        /* An unpredictable name created with O_EXCL|O_NOFOLLOW: whoever else can write in the
         * directory cannot pre-plant a symlink or a file for us to follow or truncate. */
        for (int i = 0; i < 8 && fd < 0; i++) {
                if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
                        return errno ? -errno : -EIO;
                snprintf(tmp, sizeof(tmp), ".%s.%016" PRIx64, name, rnd);
                fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
                if (fd < 0 && errno != EEXIST)
                        return -errno;
        }
        if (fd < 0)
                return -EEXIST;
        r = fk_write_all(fd, data, size);
        if (r >= 0 && sync && fsync(fd) < 0)
                r = -errno;
        /* rename replaces a symlink at name itself; it never writes through it */
        if (r >= 0 && renameat(dfd, tmp, dfd, name) < 0)
                r = -errno;
        if (r < 0) {
                (void)unlinkat(dfd, tmp, 0);
                return r;
        }
        if (sync)
                (void)fsync(dfd);
        return 0;
}

int fk_write_file_atomicat(int dfd, const char *name, const void *data, size_t size, mode_t mode)
{
        return write_atomicat(dfd, name, data, size, mode, true);
}

static int write_atomic(const char *path, const void *data, size_t size, mode_t mode, bool sync)
{
        cleanup_free char *dir = strdup(path);
        cleanup_close int dfd = -1;
        const char *name;
        char *slash;

        if (!dir)
                return -ENOMEM;
        slash = strrchr(dir, '/');
        if (!slash) {
                name = path;
                dfd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        } else {
                name = path + (slash - dir) + 1;
                slash[slash == dir ? 1 : 0] = '\0';
                dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        }
        if (dfd < 0)
                return -errno;
        return write_atomicat(dfd, name, data, size, mode, sync);
}

int fk_write_file_atomic(const char *path, const void *data, size_t size, mode_t mode)
{
        return write_atomic(path, data, size, mode, true);
}

int fk_write_file_replace(const char *path, const void *data, size_t size, mode_t mode)
{
        return write_atomic(path, data, size, mode, false);
}

int fk_mkdir_p(const char *path, mode_t mode)
{
        char buf[PATH_MAX];
        size_t len = strlen(path);

        if (len == 0 || len >= sizeof(buf))
                return -EINVAL;
        memcpy(buf, path, len + 1);
        for (char *p = buf + 1; *p; p++) {
                if (*p != '/')
                        continue;
                *p = '\0';
                if (mkdir(buf, mode) < 0 && errno != EEXIST)
                        return -errno;
                *p = '/';
        }
        if (mkdir(buf, mode) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

static int rm_rf_at(int parent_fd, const char *name, dev_t dev)
{
        struct stat st;

        if (fstatat(parent_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (S_ISDIR(st.st_mode)) {
                int fd;
                DIR *d;
                struct dirent *de;
                int r = 0;

                if (st.st_dev != dev)
                        return -EXDEV;
                fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0)
                        return -errno;
                d = fdopendir(fd);
                if (!d) {
                        close(fd);
                        return -errno;
                }
                while ((de = readdir(d))) {
                        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                                continue;
                        int k = rm_rf_at(dirfd(d), de->d_name, dev);
                        if (k < 0 && r == 0)
                                r = k;
                }
                closedir(d);
                if (unlinkat(parent_fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT && r == 0)
                        r = -errno;
                return r;
        }
        if (unlinkat(parent_fd, name, 0) < 0 && errno != ENOENT)
                return -errno;
        return 0;
}

int fk_rm_rf(const char *path)
{
        struct stat st;

        if (lstat(path, &st) < 0)
                return errno == ENOENT ? 0 : -errno;
        return rm_rf_at(AT_FDCWD, path, st.st_dev);
}

uint64_t fk_now_mono_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t fk_now_real_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

char *fk_format_rfc3339(uint64_t real_ns, char *buf, size_t size)
{
        time_t t = (time_t)(real_ns / 1000000000ull);
        struct tm tm;

        gmtime_r(&t, &tm);
        strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
        return buf;
}

char **fk_strv_free(char **v)
{
        if (v) {
                for (char **p = v; *p; p++)
                        free(*p);
                free(v);
        }
        return NULL;
}

size_t fk_strv_length(char *const *v)
{
        size_t n = 0;

        if (v)
                while (v[n])
                        n++;
        return n;
}

int fk_strv_copy(char *const *v, char ***ret)
{
        size_t n = fk_strv_length(v);
        char **c;

        if (!v) {
                *ret = NULL;
                return 0;
        }
        c = calloc(n + 1, sizeof(char *));
        if (!c)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                c[i] = strdup(v[i]);
                if (!c[i]) {
                        fk_strv_free(c);
                        return -ENOMEM;
                }
        }
        *ret = c;
        return 0;
}

int fk_strv_push(char ***v, const char *s)
{
        size_t n = fk_strv_length(*v);
        char *d = strdup(s);
        char **nv;

        if (!d)
                return -ENOMEM;
        nv = realloc(*v, (n + 2) * sizeof(char *));
        if (!nv) {
                free(d);
                return -ENOMEM;
        }
        nv[n] = d;
        nv[n + 1] = NULL;
        *v = nv;
        return 0;
}

bool fk_strv_equal(char *const *a, char *const *b)
{
        size_t n = fk_strv_length(a);

        if (n != fk_strv_length(b))
                return false;
        for (size_t i = 0; i < n; i++)
                if (strcmp(a[i], b[i]) != 0)
                        return false;
        return true;
}

int fk_asprintf(char **ret, const char *fmt, ...)
{
        va_list ap;
        char *s;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&s, fmt, ap);
        va_end(ap);
        if (r < 0)
                return -ENOMEM;
        *ret = s;
        return r;
}

int fk_list_append(char **list, const char *sep, const char *item)
{
        char *t;

        if (fk_asprintf(&t, "%s%s%s", *list ? *list : "", *list ? sep : "", item) < 0)
                return -ENOMEM;
        free(*list);
        *list = t;
        return 0;
}

int fk_random_bytes(void *buf, size_t size)
{
        char *p = buf;

        while (size > 0) {
                ssize_t k = getrandom(p, size, 0);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                p += k;
                size -= (size_t)k;
        }
        return 0;
}

void fk_hex(const void *data, size_t size, char *out)
{
        static const char digits[] = "0123456789abcdef";
        const unsigned char *p = data;

        for (size_t i = 0; i < size; i++) {
                out[2 * i] = digits[p[i] >> 4];
                out[2 * i + 1] = digits[p[i] & 15];
        }
        out[2 * size] = '\0';
}

void fk_escape_text(const char *in, char *out, size_t out_size)
{
        static const char hex[] = "0123456789abcdef";
        size_t o = 0;

        for (; in && *in; in++) {
                unsigned char c = (unsigned char)*in;

                /* Room for this byte's escape, "..." and the NUL, or cut here. */
                if (o + 8 > out_size) {
                        memcpy(out + o, "...", 4);
                        return;
                }
                if (c >= 0x20 && c < 0x7f && c != '\\') {
                        out[o++] = (char)c;
                        continue;
                }
                out[o++] = '\\';
                out[o++] = 'x';
                out[o++] = hex[c >> 4];
                out[o++] = hex[c & 15];
        }
        out[o] = '\0';
}

int fk_unix_connect_wait(const char *path, unsigned timeout_ms)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        uint64_t deadline = fk_now_mono_ns() + (uint64_t)timeout_ms * 1000000ull;
        long wait_ns = 1000000L;

        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, path);
        for (;;) {
                cleanup_close int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                int r;

                if (fd < 0)
                        return -errno;
                if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
                        return TAKE_FD(fd);
                r = -errno;
                if ((r != -ENOENT && r != -ECONNREFUSED && r != -EAGAIN) ||
                    fk_now_mono_ns() >= deadline)
                        return r;
                nanosleep(&(struct timespec){.tv_nsec = wait_ns}, NULL);
                wait_ns = FK_MIN(2 * wait_ns, 10000000L);
        }
}

#define CLONE_STACK_SIZE (256 * 1024)

pid_t fk_clone_vfork(int (*fn)(void *), void *arg)
{
        sigset_t all, old;
        pid_t pid;
        int e;
#if defined(__SANITIZE_ADDRESS__)
        /* AddressSanitizer's runtime cannot run instrumented code in a CLONE_VM child (it takes
         * the child's stack for a corrupt one of the parent's): the sanitizer build forks. */
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        pid = fork();
        if (pid == 0)
                _exit(fn(arg));
        e = errno;
#else
        void *stack = mmap(NULL, CLONE_STACK_SIZE, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);

        if (stack == MAP_FAILED)
                return -errno;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        pid = clone(fn, (char *)stack + CLONE_STACK_SIZE, CLONE_VM | CLONE_VFORK | SIGCHLD, arg);
        e = errno;
        munmap(stack, CLONE_STACK_SIZE);
#endif
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        return pid < 0 ? -e : pid;
}

/* SPDX-License-Identifier: MIT */
/* common/util: the atomic file writer never follows or truncates what another writer of the
 * directory planted, and leaves no temporary behind. */
#include "common/cleanup.h"
#include "common/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/socket.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

static char dir[64];

static int setup(void **state)
{
        (void)state;
        strcpy(dir, "/tmp/fk-util-XXXXXX");
        return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
        (void)state;
        return fk_rm_rf(dir);
}

static char *slurp(const char *path)
{
        char *text = NULL;
        size_t n = 0;

        if (fk_read_file(path, 1 << 20, &text, &n) < 0)
                return NULL;
        return text;
}

static unsigned count_entries(void)
{
        DIR *d = opendir(dir);
        struct dirent *e;
        unsigned n = 0;

        assert_non_null(d);
        while ((e = readdir(d)))
                if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
                        n++;
        closedir(d);
        return n;
}

static void test_write_replace(void **state)
{
        cleanup_free char *path = NULL, *text = NULL;
        struct stat st;

        (void)state;
        assert_int_equal(fk_asprintf(&path, "%s/state.json", dir) < 0, 0);
        assert_int_equal(fk_write_file_atomic(path, "one", 3, 0600), 0);
        assert_int_equal(fk_write_file_atomic(path, "two!", 4, 0640), 0);
        text = slurp(path);
        assert_non_null(text);
        assert_string_equal(text, "two!");
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0640);
        assert_int_equal(count_entries(), 1); /* no temporary left */
        /* the same without the fsyncs */
        assert_int_equal(fk_write_file_replace(path, "three", 5, 0600), 0);
        free(text);
        text = slurp(path);
        assert_non_null(text);
        assert_string_equal(text, "three");
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0600);
        assert_int_equal(count_entries(), 1);
}

/* A symlink planted at the final name is replaced by the file, its target left untouched. */
static void test_symlink_not_followed(void **state)
{
        cleanup_free char *path = NULL, *victim = NULL, *text = NULL;
        struct stat st;

        (void)state;
        assert_int_equal(fk_asprintf(&victim, "%s/victim", dir) < 0, 0);
        assert_int_equal(fk_asprintf(&path, "%s/vm.json", dir) < 0, 0);
        assert_int_equal(fk_write_file_atomic(victim, "precious", 8, 0600), 0);
        assert_int_equal(symlink(victim, path), 0);
        assert_int_equal(fk_write_file_atomic(path, "{}", 2, 0600), 0);
        assert_int_equal(lstat(path, &st), 0);
        assert_true(S_ISREG(st.st_mode));
        text = slurp(victim);
        assert_non_null(text);
        assert_string_equal(text, "precious");
        assert_int_equal(unlink(path), 0);
        assert_int_equal(symlink(victim, path), 0);
        assert_int_equal(fk_write_file_replace(path, "{}", 2, 0600), 0);
        assert_int_equal(lstat(path, &st), 0);
        assert_true(S_ISREG(st.st_mode));
        free(text);
        text = slurp(victim);
        assert_string_equal(text, "precious");
}

static void test_bad_names(void **state)
{
        cleanup_close int dfd = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        (void)state;
        assert_true(dfd >= 0);
        assert_int_equal(fk_write_file_atomicat(dfd, "a/b", "x", 1, 0600), -EINVAL);
        assert_int_equal(fk_write_file_atomicat(dfd, "", "x", 1, 0600), -EINVAL);
        assert_int_equal(fk_write_file_atomic("/nonexistent-dir-fk/x", "x", 1, 0600), -ENOENT);
}

static char sock_path[96];

/* Starts listening on sock_path 30 ms after it was started. */
static void *listen_later(void *arg)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        (void)arg;
        nanosleep(&(struct timespec){.tv_nsec = 30 * 1000000L}, NULL);
        strcpy(sa.sun_path, sock_path);
        if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 1) < 0)
                return (void *)-1;
        return (void *)(intptr_t)fd;
}

/* fk_unix_connect_wait: one try with timeout 0, the wait for a socket that appears later, the
 * last error when it never does, and a path too long for sun_path. */
static void test_unix_connect_wait(void **state)
{
        char longp[200];
        pthread_t th;
        void *lfd;
        uint64_t t0;
        int fd;

        (void)state;
        snprintf(sock_path, sizeof(sock_path), "%s/s.sock", dir);
        assert_int_equal(fk_unix_connect_wait(sock_path, 0), -ENOENT);
        t0 = fk_now_mono_ns();
        assert_int_equal(fk_unix_connect_wait(sock_path, 20), -ENOENT);
        assert_true(fk_now_mono_ns() - t0 >= 20000000ull);
        assert_int_equal(pthread_create(&th, NULL, listen_later, NULL), 0);
        fd = fk_unix_connect_wait(sock_path, 5000);
        assert_int_equal(pthread_join(th, &lfd), 0);
        assert_true(fd >= 0);
        assert_true((intptr_t)lfd >= 0);
        assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
        close(fd);
        close((int)(intptr_t)lfd);
        memset(longp, 'a', sizeof(longp) - 1);
        longp[sizeof(longp) - 1] = '\0';
        assert_int_equal(fk_unix_connect_wait(longp, 1000), -ENAMETOOLONG);
}

struct clone_probe {
        int marker;
        pid_t child_pid;
};

static int clone_fn(void *arg)
{
        struct clone_probe *c = arg;

        c->marker = 42; /* the parent's memory, not a copy */
        c->child_pid = (pid_t)syscall(SYS_getpid);
        if (chdir("/") < 0) /* its own cwd */
                _exit(1);
        _exit(7);
}

/* fk_clone_vfork: the child writes the caller's memory (but in the AddressSanitizer build,
 * which forks), has its own cwd and pid, and has exited by the time the call returns (the
 * caller reaps it). */
static void test_clone_vfork(void **state)
{
        struct clone_probe c = {0};
        char cwd[PATH_MAX], after[PATH_MAX];
        int status = 0;
        pid_t pid;

        (void)state;
        assert_non_null(getcwd(cwd, sizeof(cwd)));
        assert_int_equal(chdir("/tmp"), 0);
        pid = fk_clone_vfork(clone_fn, &c);
        assert_true(pid > 0);
#if !defined(__SANITIZE_ADDRESS__) /* the sanitizer build forks: the child had a copy */
        assert_int_equal(c.marker, 42);
        assert_int_equal(c.child_pid, pid);
#endif
        assert_non_null(getcwd(after, sizeof(after)));
        assert_string_equal(after, "/tmp");
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 7);
        assert_int_equal(chdir(cwd), 0);
}

/* fk_list_append: no separator before the first item, one before each later one. */
static void test_list_append(void **state)
{
        cleanup_free char *list = NULL;

        (void)state;
        assert_int_equal(fk_list_append(&list, ", ", "default/a"), 0);
        assert_string_equal(list, "default/a");
        assert_int_equal(fk_list_append(&list, ", ", "default/b"), 0);
        assert_int_equal(fk_list_append(&list, ", ", ""), 0);
        assert_string_equal(list, "default/a, default/b, ");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_write_replace, setup, teardown),
                cmocka_unit_test_setup_teardown(test_symlink_not_followed, setup, teardown),
                cmocka_unit_test_setup_teardown(test_bad_names, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unix_connect_wait, setup, teardown),
                cmocka_unit_test(test_clone_vfork),
                cmocka_unit_test(test_list_append),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: MIT */
/* The state layout before schemaVersion 1, converted at start: session.json, identity.json,
 * restored, lineage and disk/active in the session's state dir and vm.json in its run dir
 * become one state.json; the old files go once it is written. */
#include "agent/store/store.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define OLD_MAX (4 * 1024 * 1024)

/* The old files of the state dir, and the field each one becomes. */
static const struct {
        const char *name;
        enum agent_store_field field;
} old_files[] = {
        {"session.json", AGENT_STORE_SESSION},
        {"identity.json", AGENT_STORE_IDENTITY},
        {"restored", AGENT_STORE_RESTORED},
        {"lineage", AGENT_STORE_LINEAGE},
};

/* Reads name under dfd (no symlink, a regular file; owned by us when trusted_only): 0, -ENOENT
 * when absent, -EPERM when not to be believed. */
static int read_at(int dfd, const char *name, bool trusted_only, char **ret, size_t *ret_size)
{
        cleanup_close int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
        struct stat st;

        if (fd < 0)
                return errno == ELOOP ? -EPERM : -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode) || (trusted_only && st.st_uid != geteuid()))
                return -EPERM;
        return fk_read_fd(fd, OLD_MAX, ret, ret_size);
}

/* A one-line text file's content without its newline, as a JSON string (NULL: none). */
static json_t *text_value(const char *buf)
{
        size_t n = strcspn(buf, "\n");

        return n ? json_stringn(buf, n) : NULL;
}

static int old_field(int dfd, const char *name, bool object, bool trusted_only, json_t **ret,
                     struct fk_error *err)
{
        cleanup_free char *buf = NULL;
        size_t size = 0;
        int r = read_at(dfd, name, trusted_only, &buf, &size);

        *ret = NULL;
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return fk_error_set(err, r, "read %s: %s", name, strerror(-r));
        *ret = object ? json_loadb(buf, size, 0, NULL) : text_value(buf);
        if (object && !json_is_object(*ret)) {
                json_decref(*ret);
                *ret = NULL;
                return fk_error_set(err, -EINVAL, "%s: not a JSON object", name);
        }
        return 1;
}

static int open_dir_at(int dfd, const char *name)
{
        int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

        return fd < 0 ? -errno : fd;
}

/* <run_dir>/sessions/<key>: the jailed QEMU owns it, so its vm.json counts only when it is
 * still forkletd's own file (read without following a symlink). */
static int old_vm(const char *run_dir, const char *key, int *ret_fd, json_t **ret)
{
        cleanup_free char *dir = NULL;
        struct fk_error ignore = {0};
        int fd;

        *ret = NULL;
        *ret_fd = -1;
        if (fk_asprintf(&dir, "%s/sessions", run_dir) < 0)
                return -ENOMEM;
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return 0;
        *ret_fd = open_dir_at(fd, key);
        close(fd);
        if (*ret_fd < 0)
                return 0;
        if (faccessat(*ret_fd, "vm.json", F_OK, AT_SYMLINK_NOFOLLOW) < 0)
                return 0;
        (void)old_field(*ret_fd, "vm.json", true, true, ret, &ignore); /* untrusted: no VM */
        return 1;
}

/* disk/active: the active overlay's file name. */
static int old_disk(int dfd, int *ret_fd, json_t **ret, struct fk_error *err)
{
        int r;

        *ret = NULL;
        *ret_fd = open_dir_at(dfd, "disk");
        if (*ret_fd < 0)
                return 0;
        r = old_field(*ret_fd, "active", false, false, ret, err);
        if (r > 0 &&
            (!*ret || strchr(json_string_value(*ret), '/') || json_string_value(*ret)[0] == '.')) {
                json_decref(*ret);
                *ret = NULL;
                return fk_error_set(err, -EINVAL, "disk/active: not a file name in disk/");
        }
        return r;
}

/* Collects the old files into changes (values owned by the caller). 1 when any was there. */
static int collect(int dfd, const char *run_dir, const char *key, int *disk_fd, int *run_fd,
                   struct agent_store_change *c, size_t *n, struct fk_error *err)
{
        bool any = false;
        json_t *v;
        int r;

        for (size_t i = 0; i < sizeof(old_files) / sizeof(old_files[0]); i++) {
                bool object = old_files[i].field == AGENT_STORE_SESSION ||
                              old_files[i].field == AGENT_STORE_IDENTITY;

                r = old_field(dfd, old_files[i].name, object, false, &v, err);
                /* identity.json is names only, for status: a broken one is dropped */
                if (r < 0 && old_files[i].field != AGENT_STORE_IDENTITY)
                        return r;
                any = any || r != 0;
                if (v)
                        c[(*n)++] = (struct agent_store_change){old_files[i].field, v};
        }
        r = old_disk(dfd, disk_fd, &v, err);
        if (r < 0)
                return r;
        any = any || r > 0;
        if (v)
                c[(*n)++] = (struct agent_store_change){AGENT_STORE_DISK, v};
        r = old_vm(run_dir, key, run_fd, &v);
        if (r < 0)
                return fk_error_set(err, r, "out of memory");
        any = any || r > 0;
        if (v)
                c[(*n)++] = (struct agent_store_change){AGENT_STORE_VM, v};
        return any;
}

static int write_record(int dfd, const char *key, const struct agent_store_change *c, size_t n,
                        struct fk_error *err)
{
        cleanup_free char *text = NULL;
        json_t *doc = json_pack("{s:i, s:s}", "schemaVersion", AGENT_STORE_SCHEMA, "key", key);
        int r;

        for (size_t i = 0; doc && i < n; i++)
                json_object_set(doc, agent_store_field_to_string(c[i].field), c[i].value);
        text = doc ? agent_store_encode(doc) : NULL;
        json_decref(doc);
        if (!text)
                return fk_error_set(err, -ENOMEM, "out of memory");
        r = fk_write_file_atomicat(dfd, AGENT_STORE_FILE, text, strlen(text), 0600);
        if (r < 0)
                return fk_error_set(err, r, "write " AGENT_STORE_FILE ": %s", strerror(-r));
        return 0;
}

static void remove_old(int dfd, int disk_fd, int run_fd)
{
        for (size_t i = 0; i < sizeof(old_files) / sizeof(old_files[0]); i++)
                (void)unlinkat(dfd, old_files[i].name, 0);
        if (disk_fd >= 0)
                (void)unlinkat(disk_fd, "active", 0);
        if (run_fd >= 0)
                (void)unlinkat(run_fd, "vm.json", 0); /* unlink never follows a symlink */
        (void)fsync(dfd);
}

int agent_store_upgrade_one(int sessions_fd, const char *key, const char *run_dir,
                            struct fk_error *err)
{
        struct agent_store_change c[sizeof(old_files) / sizeof(old_files[0]) + 2];
        cleanup_close int dfd = open_dir_at(sessions_fd, key), disk_fd = -1, run_fd = -1;
        size_t n = 0;
        int r;

        if (dfd < 0)
                return 0;
        r = collect(dfd, run_dir, key, &disk_fd, &run_fd, c, &n, err);
        /* a crash after state.json was written and before the old files went: it wins */
        if (r > 0 && faccessat(dfd, AGENT_STORE_FILE, F_OK, AT_SYMLINK_NOFOLLOW) < 0) {
                int k = write_record(dfd, key, c, n, err);

                if (k < 0)
                        r = k;
        }
        if (r > 0)
                remove_old(dfd, disk_fd, run_fd);
        for (size_t i = 0; i < n; i++)
                json_decref(c[i].value);
        return r;
}

/* SPDX-License-Identifier: MIT */
/* The manifest directory: scanning *.yaml / *.yml files into Sessions (or their errors) and an
 * inotify watch that tells the reconcile loop to rescan. */
#include "agent/session/session.h"
#include "common/cleanup.h"
#include "common/util.h"
#include "manifest/manifest.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>

static bool is_manifest_name(const char *name)
{
        size_t n = strlen(name);

        if (name[0] == '.')
                return false;
        return (n > 5 && strcmp(name + n - 5, ".yaml") == 0) ||
               (n > 4 && strcmp(name + n - 4, ".yml") == 0);
}

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

static int scan_file(const char *path, const struct node_config *cfg, struct agent_dir_file *f)
{
        struct manifest_diag diag = {0};
        int r;

        f->path = strdup(path);
        if (!f->path)
                return -ENOMEM;
        r = manifest_load_sessions_file(path, cfg, &f->items, &f->n_items, &diag);
        if (r == -ENOMEM) {
                manifest_diag_done(&diag);
                return r;
        }
        if (r < 0) {
                f->items = NULL;
                f->n_items = 0;
                if (diag.n == 0)
                        manifest_diag_add(&diag, "%s: %s", path, strerror(-r));
                f->errors = TAKE_PTR(diag.messages);
                diag.n = 0;
        }
        manifest_diag_done(&diag);
        return 0;
}

static int list_dir(const char *dir, char ***ret)
{
        char **names = NULL;
        struct dirent *de;
        DIR *dp = opendir(dir);
        int r = 0;

        if (!dp)
                return errno == ENOENT ? 0 : -errno;
        while ((de = readdir(dp))) {
                cleanup_free char *path = NULL;

                if (!is_manifest_name(de->d_name))
                        continue;
                r = fk_asprintf(&path, "%s/%s", dir, de->d_name);
                if (r >= 0)
                        r = fk_strv_push(&names, path);
                if (r < 0)
                        break;
        }
        closedir(dp);
        if (r < 0) {
                fk_strv_free(names);
                return r;
        }
        if (names)
                qsort(names, fk_strv_length(names), sizeof(char *), cmp_str);
        *ret = names;
        return 0;
}

int agent_dir_scan(const char *dir, const struct node_config *cfg, struct agent_dir_scan *ret)
{
        struct agent_dir_scan s = {0};
        char **names = NULL;
        size_t n;
        int r;

        r = list_dir(dir, &names);
        if (r < 0)
                return r;
        n = fk_strv_length(names);
        if (n > 0) {
                s.files = calloc(n, sizeof(*s.files));
                if (!s.files) {
                        fk_strv_free(names);
                        return -ENOMEM;
                }
        }
        for (size_t i = 0; i < n; i++) {
                r = scan_file(names[i], cfg, &s.files[s.n++]);
                if (r < 0)
                        break;
        }
        fk_strv_free(names);
        if (r < 0) {
                agent_dir_scan_done(&s);
                return r;
        }
        *ret = s;
        return 0;
}

void agent_dir_scan_done(struct agent_dir_scan *s)
{
        for (size_t i = 0; i < s->n; i++) {
                struct agent_dir_file *f = &s->files[i];

                for (size_t k = 0; k < f->n_items; k++)
                        session_manifest_free(f->items[k]);
                free(f->items);
                fk_strv_free(f->errors);
                free(f->path);
        }
        free(s->files);
        s->files = NULL;
        s->n = 0;
}

int agent_dir_watch(const char *dir, bool create)
{
        cleanup_close int fd = -1;
        int r;

        r = create ? fk_mkdir_p(dir, 0755) : 0;
        if (r < 0)
                return r;
        fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (inotify_add_watch(fd, dir,
                              IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_CREATE |
                                      IN_DELETE_SELF | IN_MOVE_SELF) < 0)
                return -errno;
        return TAKE_FD(fd);
}

int agent_dir_watch_drain(int fd)
{
        char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
        int relevant = 0;

        for (;;) {
                ssize_t n = read(fd, buf, sizeof(buf));

                if (n <= 0)
                        return n < 0 && errno != EAGAIN && errno != EINTR ? -errno : relevant;
                for (char *p = buf; p < buf + n;) {
                        const struct inotify_event *ev = (const struct inotify_event *)p;

                        if (ev->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF))
                                relevant = 2;
                        else if (ev->mask & IN_Q_OVERFLOW)
                                relevant = FK_MAX(relevant, 1);
                        else if (ev->len > 0 && is_manifest_name(ev->name))
                                relevant = FK_MAX(relevant, 1);
                        p += sizeof(*ev) + ev->len;
                }
        }
}

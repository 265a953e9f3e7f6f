/* SPDX-License-Identifier: MIT */
/* Backend detection and manager setup: reads mountinfo, picks v2 (a cgroup2 mount with cpu,
 * memory and pids) or v1 (split controllers), opens each hierarchy and creates the parent. */
#include "cgroups/cgroups-internal.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/log.h"
#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#define CG_V2_REQUIRED (CG_CTRL_CPU | CG_CTRL_MEMORY | CG_CTRL_PIDS)
#define CG_V2_WANTED   (CG_V2_REQUIRED | CG_CTRL_BLKIO)

/* v1 controllers in hierarchy order: memory first, so hier[0] is the "primary" one. */
static const unsigned v1_order[] = {CG_CTRL_MEMORY, CG_CTRL_CPU,     CG_CTRL_CPUACCT,
                                    CG_CTRL_PIDS,   CG_CTRL_FREEZER, CG_CTRL_BLKIO};

static const char *ctrl_name(unsigned bit)
{
        static const char *names[] = {"cpu", "cpuacct", "memory", "pids", "freezer", "blkio"};

        for (size_t i = 0; i < ARRAY_SIZE(names); i++)
                if (bit == 1u << i)
                        return names[i];
        return "?";
}

static unsigned parse_controller_list(const char *s)
{
        char buf[512], *save = NULL;
        unsigned bits = 0;

        snprintf(buf, sizeof(buf), "%s", s);
        for (char *t = strtok_r(buf, " \n", &save); t; t = strtok_r(NULL, " \n", &save))
                bits |= cg_controller_from_name(t);
        return bits;
}

static char *prefixed(const struct cg_options *o, const char *path)
{
        char *s = NULL;

        (void)fk_asprintf(&s, "%s%s", o->root ? o->root : "", path);
        return s;
}

/* Bits listed in cgroup.controllers at the root of a v2 mount; 0 if unreadable or empty. */
static unsigned v2_mount_controllers(const struct cg_options *o, const struct cg_mount *mnt)
{
        cleanup_free char *dir = prefixed(o, mnt->mount_point), *file = NULL, *text = NULL;

        if (!dir || fk_asprintf(&file, "%s/cgroup.controllers", dir) < 0)
                return 0;
        if (fk_read_file(file, 65536, &text, NULL) < 0)
                return 0;
        return parse_controller_list(text);
}

static bool is_valid_relpath(const char *p)
{
        char buf[1024], *save = NULL;
        size_t n = 0;

        if (!p || !*p || p[0] == '/' || strlen(p) >= sizeof(buf))
                return false;
        strcpy(buf, p);
        for (char *t = strtok_r(buf, "/", &save); t; t = strtok_r(NULL, "/", &save), n++)
                if (!cg_name_is_valid(t))
                        return false;
        return n > 0;
}

/* The parent relative to the hierarchy root: "/<own cgroup>/<parent>" or "/<parent>". */
static int relative_parent(const struct cg_options *o, const struct cg_mount *mnt, unsigned ctrl,
                           char **ret, struct fk_error *err)
{
        const char *path = o->proc_cgroup_path ? o->proc_cgroup_path : "/proc/self/cgroup";
        cleanup_free char *text = NULL, *own = NULL;
        const char *rel;
        int r;

        if (!o->nest_in_self)
                return fk_asprintf(ret, "/%s", o->parent);
        r = fk_read_file(path, 1 << 20, &text, NULL);
        if (r < 0)
                return fk_error_set(err, r, "read %s: %s", path, strerror(-r));
        r = cg_parse_proc_cgroup(text, ctrl, mnt->v2, &own);
        if (r < 0)
                return fk_error_set(err, r, "%s: no line for the %s hierarchy", path,
                                    mnt->v2 ? "unified" : ctrl_name(ctrl));
        /* In a container the mount root is a sub-cgroup: /proc paths include it. */
        rel = own;
        if (strcmp(mnt->root, "/") != 0 && strncmp(own, mnt->root, strlen(mnt->root)) == 0)
                rel = own + strlen(mnt->root);
        while (*rel == '/')
                rel++;
        return *rel ? fk_asprintf(ret, "/%s/%s", rel, o->parent)
                    : fk_asprintf(ret, "/%s", o->parent);
}

/* Names of the bits in mask, comma-separated, into buf. */
static void ctrl_list(unsigned mask, char *buf, size_t size)
{
        static const struct {
                unsigned bit;
                const char *name;
        } v2names[] = {{CG_CTRL_CPU, "cpu"},
                       {CG_CTRL_MEMORY, "memory"},
                       {CG_CTRL_PIDS, "pids"},
                       {CG_CTRL_BLKIO, "io"}};

        *buf = '\0';
        for (size_t i = 0; i < ARRAY_SIZE(v2names); i++)
                if (mask & v2names[i].bit)
                        snprintf(buf + strlen(buf), size - strlen(buf), "%s%s", *buf ? ", " : "",
                                 v2names[i].name);
}

/* v2: enables the wanted controllers (cpu, memory, pids, io) that level (NULL: mount root)
 * offers in its cgroup.subtree_control; *enabled gets those on afterwards. strict: cpu, memory
 * and pids must be offered. */
static int v2_enable(const struct cg_hier *h, const char *level, bool strict, unsigned *enabled,
                     struct fk_error *err)
{
        cleanup_free char *avail_s = NULL, *on_s = NULL;
        unsigned avail, on, want;
        char buf[64] = "";
        int r;

        r = cg_read(h, level, "cgroup.controllers", &avail_s, err);
        if (r < 0)
                return r;
        r = cg_read(h, level, "cgroup.subtree_control", &on_s, err);
        if (r < 0)
                return r;
        avail = parse_controller_list(avail_s);
        on = parse_controller_list(on_s);
        if (strict && (avail & CG_V2_REQUIRED) != CG_V2_REQUIRED) {
                ctrl_list(CG_V2_REQUIRED & ~avail, buf, sizeof(buf));
                return fk_error_set(err, -EOPNOTSUPP,
                                    "%s/%s/cgroup.controllers: \"%.*s\" lacks %s (enable them in "
                                    "the parent's cgroup.subtree_control)",
                                    h->parent_path, level ? level : ".",
                                    (int)strcspn(avail_s, "\n"), avail_s, buf);
        }
        want = CG_V2_WANTED & avail & ~on;
        *enabled = CG_V2_WANTED & (on | want);
        static const struct {
                unsigned bit;
                const char *tok;
        } toks[] = {{CG_CTRL_CPU, "+cpu "},
                    {CG_CTRL_MEMORY, "+memory "},
                    {CG_CTRL_PIDS, "+pids "},
                    {CG_CTRL_BLKIO, "+io "}};
        for (size_t i = 0; i < ARRAY_SIZE(toks); i++)
                if (want & toks[i].bit)
                        strcat(buf, toks[i].tok);
        if (!*buf)
                return 0;
        buf[strlen(buf) - 1] = '\0';
        return cg_write(h, level, "cgroup.subtree_control", buf, err);
}

/* mkdir -p rel below h->parent_fd; v2: enable controllers at every level from the top and set
 * h->controllers to what the parent's children get. On failure the levels this call created
 * are removed again (deepest first). */
static int walk_down(struct cg_hier *h, const char *rel, bool v2, bool strict, struct fk_error *err)
{
        size_t ends[64], n_created = 0;
        unsigned enabled = 0;
        char level[1024];
        int r = 0;

        if (v2 && (r = v2_enable(h, NULL, strict, &enabled, err)) < 0)
                return r;
        for (size_t i = 0;; i++) {
                if (rel[i] != '/' && rel[i] != '\0')
                        continue;
                snprintf(level, sizeof(level), "%.*s", (int)i, rel);
                if (mkdirat(h->parent_fd, level, 0755) == 0) {
                        if (n_created < ARRAY_SIZE(ends))
                                ends[n_created++] = i;
                } else if (errno != EEXIST) {
                        r = fk_error_set(err, -errno, "mkdir %s/%s: %m", h->parent_path, level);
                        break;
                }
                if (v2 && (r = v2_enable(h, level, strict, &enabled, err)) < 0)
                        break;
                if (!rel[i])
                        break;
        }
        if (r == 0) {
                if (v2) /* freeze, kill and cpu.stat are core files: no controller needed */
                        h->controllers = enabled | CG_CTRL_CPUACCT | CG_CTRL_FREEZER;
                return 0;
        }
        while (n_created > 0) {
                snprintf(level, sizeof(level), "%.*s", (int)ends[--n_created], rel);
                (void)unlinkat(h->parent_fd, level, AT_REMOVEDIR);
        }
        return r;
}

/* Opens the mount, creates h->rel_parent (mkdir -p; v2: enabling controllers level by level)
 * and leaves h->parent_fd on it. */
static int hier_open(struct cg_hier *h, const struct cg_options *o, const char *mount_point,
                     bool v2, struct fk_error *err)
{
        cleanup_free char *mdir = prefixed(o, mount_point), *walk = NULL;
        cleanup_close int mfd = -1;
        const char *rel = h->rel_parent + 1;
        struct statfs sfs;
        int r;

        if (!mdir)
                return -ENOMEM;
        mfd = open(mdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (mfd < 0)
                return fk_error_set(err, -errno, "open cgroup mount %s: %m", mdir);
        if (fstatfs(mfd, &sfs) == 0)
                h->fake = sfs.f_type != CGROUP_SUPER_MAGIC && sfs.f_type != CGROUP2_SUPER_MAGIC;
        h->parent_path = TAKE_PTR(mdir);
        h->parent_fd = mfd; /* borrowed while walking down */
        r = walk_down(h, rel, v2, !o->partial_controllers, err);
        h->parent_fd = -1;
        if (r < 0)
                return r;
        h->parent_fd = openat(mfd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (h->parent_fd < 0)
                return fk_error_set(err, -errno, "open %s%s: %m", h->parent_path, h->rel_parent);
        free(h->parent_path);
        h->parent_path = prefixed(o, mount_point);
        if (!h->parent_path || fk_asprintf(&walk, "%s%s", h->parent_path, h->rel_parent) < 0)
                return -ENOMEM;
        free(h->parent_path);
        h->parent_path = TAKE_PTR(walk);
        return 0;
}

static int setup_v2(struct cg_manager *m, const struct cg_options *o, const struct cg_mount *mnt,
                    struct fk_error *err)
{
        struct cg_hier *h = &m->hier[0];
        int r;

        m->n_hier = 1;
        r = relative_parent(o, mnt, 0, &h->rel_parent, err);
        if (r < 0)
                return r;
        m->ops = &cg_ops_v2;
        return hier_open(h, o, mnt->mount_point, true, err);
}

static int setup_v1(struct cg_manager *m, const struct cg_options *o, struct cg_mount *mounts,
                    size_t n, struct fk_error *err)
{
        const struct cg_mount *used[CG_HIER_MAX];
        int r;

        m->ops = &cg_ops_v1;
        for (size_t c = 0; c < ARRAY_SIZE(v1_order); c++) {
                unsigned bit = v1_order[c];
                const struct cg_mount *mnt = NULL;
                size_t i;

                for (i = 0; i < n && !mnt; i++)
                        if (!mounts[i].v2 && (mounts[i].controllers & bit))
                                mnt = &mounts[i];
                if (!mnt)
                        continue;
                for (i = 0; i < m->n_hier; i++)
                        if (used[i]->dev_major == mnt->dev_major &&
                            used[i]->dev_minor == mnt->dev_minor)
                                break;
                if (i < m->n_hier)
                        continue; /* combined mount such as cpu,cpuacct: already opened */
                used[m->n_hier] = mnt;
                struct cg_hier *h = &m->hier[m->n_hier++];
                h->controllers = mnt->controllers;
                r = relative_parent(o, mnt, bit, &h->rel_parent, err);
                if (r < 0)
                        return r;
                r = hier_open(h, o, mnt->mount_point, false, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

static unsigned v1_available(const struct cg_mount *mounts, size_t n)
{
        unsigned bits = 0;

        for (size_t i = 0; i < n; i++)
                if (!mounts[i].v2)
                        bits |= mounts[i].controllers;
        return bits;
}

/* opts->v2_mount: that cgroup2 mount from mountinfo, whatever its controllers. */
static int pick_v2_mount(const struct cg_options *o, struct cg_mount *mounts, size_t n,
                         const struct cg_mount **ret_v2, struct fk_error *err)
{
        const char *mi = o->mountinfo_path ? o->mountinfo_path : "/proc/self/mountinfo";
        size_t len = strlen(o->v2_mount);

        while (len > 1 && o->v2_mount[len - 1] == '/')
                len--;
        if (o->version == CG_VERSION_1)
                return fk_error_set(err, -EINVAL, "cgroup mount %s given with cgroup v1 forced",
                                    o->v2_mount);
        for (size_t i = 0; i < n; i++)
                if (mounts[i].v2 && strlen(mounts[i].mount_point) == len &&
                    strncmp(mounts[i].mount_point, o->v2_mount, len) == 0) {
                        *ret_v2 = &mounts[i];
                        return CG_VERSION_2;
                }
        return fk_error_set(err, -ENOENT, "%s: no cgroup2 mount at %s", mi, o->v2_mount);
}

static int choose(const struct cg_options *o, struct cg_mount *mounts, size_t n,
                  const struct cg_mount **ret_v2, struct fk_error *err)
{
        const char *mi = o->mountinfo_path ? o->mountinfo_path : "/proc/self/mountinfo";
        const struct cg_mount *v2 = NULL, *v2_any = NULL;
        unsigned missing = CG_V1_REQUIRED & ~v1_available(mounts, n);
        char list[128] = "";

        if (o->v2_mount)
                return pick_v2_mount(o, mounts, n, ret_v2, err);
        for (size_t i = 0; i < n && !v2; i++) {
                if (!mounts[i].v2)
                        continue;
                unsigned bits = v2_mount_controllers(o, &mounts[i]);
                /* partial: a cgroup2 mount without our controllers still serves the core */
                if (!v2_any && (bits || o->partial_controllers))
                        v2_any = &mounts[i];
                if ((bits & CG_V2_REQUIRED) == CG_V2_REQUIRED)
                        v2 = &mounts[i];
        }
        if (o->version != CG_VERSION_1 && (v2 || v2_any) &&
            (v2 || missing || o->version == CG_VERSION_2)) {
                /* a partial v2 is chosen only when v1 cannot serve; setup names what lacks */
                *ret_v2 = v2 ? v2 : v2_any;
                return CG_VERSION_2;
        }
        if (o->version == CG_VERSION_2)
                return fk_error_set(err, -EOPNOTSUPP,
                                    "%s: no cgroup2 mount with controllers (v2 forced)", mi);
        if (!missing)
                return CG_VERSION_1;
        for (unsigned b = 1; b <= CG_CTRL_FREEZER; b <<= 1)
                if (missing & b)
                        snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s",
                                 *list ? ", " : "", ctrl_name(b));
        return fk_error_set(err, -EOPNOTSUPP,
                            "%s: no usable cgroups: no cgroup2 mount lists cpu, memory and pids "
                            "in cgroup.controllers, and no v1 mount has %s",
                            mi, list);
}

int cg_manager_new(const struct cg_options *opts, struct cg_manager **ret, struct fk_error *err)
{
        const char *mi = opts->mountinfo_path ? opts->mountinfo_path : "/proc/self/mountinfo";
        cleanup_free char *text = NULL;
        struct cg_mount *mounts = NULL;
        const struct cg_mount *v2 = NULL;
        struct cg_manager *m;
        size_t n = 0;
        int r;

        if (!is_valid_relpath(opts->parent))
                return fk_error_set(err, -EINVAL,
                                    "cgroup parent \"%s\": want a relative path of names made "
                                    "of [A-Za-z0-9._-]",
                                    opts->parent ? opts->parent : "(null)");
        r = fk_read_file(mi, 4 << 20, &text, NULL);
        if (r < 0)
                return fk_error_set(err, r, "read %s: %s", mi, strerror(-r));
        r = cg_parse_mountinfo(text, &mounts, &n);
        if (r < 0)
                return fk_error_set(err, r, "parse %s: %s", mi, strerror(-r));
        r = choose(opts, mounts, n, &v2, err);
        if (r < 0) {
                cg_mounts_free(mounts, n);
                return r;
        }
        m = calloc(1, sizeof(*m));
        if (!m) {
                cg_mounts_free(mounts, n);
                return -ENOMEM;
        }
        for (size_t i = 0; i < CG_HIER_MAX; i++)
                m->hier[i].parent_fd = -1;
        m->timeout_ns = (uint64_t)(opts->timeout_ms ? opts->timeout_ms : 5000) * 1000000;
        r = r == CG_VERSION_2 ? setup_v2(m, opts, v2, err) : setup_v1(m, opts, mounts, n, err);
        cg_mounts_free(mounts, n);
        if (r < 0) {
                cg_manager_free(m);
                return r;
        }
        log_debug("cgroups: %s backend, parent %s", cg_version_to_string(m->ops->version),
                  m->hier[0].parent_path);
        *ret = m;
        return 0;
}

struct cg_manager *cg_manager_free(struct cg_manager *m)
{
        if (!m)
                return NULL;
        for (size_t i = 0; i < CG_HIER_MAX; i++) {
                if (m->hier[i].parent_fd >= 0)
                        close(m->hier[i].parent_fd);
                free(m->hier[i].parent_path);
                free(m->hier[i].rel_parent);
        }
        free(m);
        return NULL;
}

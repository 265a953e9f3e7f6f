/* SPDX-License-Identifier: MIT */
/* Pure parsers for the cgroups module: mountinfo, /proc/PID/cgroup, "key value" files and
 * numbers. No I/O, so unit tests feed them recorded kernel text. */
#include "cgroups/cgroups-internal.h"
#include "common/cleanup.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
        const char *name;
        unsigned bit;
} controller_names[] = {
        {"cpu", CG_CTRL_CPU},   {"cpuacct", CG_CTRL_CPUACCT}, {"memory", CG_CTRL_MEMORY},
        {"pids", CG_CTRL_PIDS}, {"freezer", CG_CTRL_FREEZER}, {"blkio", CG_CTRL_BLKIO},
        {"io", CG_CTRL_BLKIO},
};

unsigned cg_controller_from_name(const char *name)
{
        for (size_t i = 0; i < ARRAY_SIZE(controller_names); i++)
                if (strcmp(controller_names[i].name, name) == 0)
                        return controller_names[i].bit;
        return 0;
}

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static char *unescape_octal(const char *s)
{
        char *out = malloc(strlen(s) + 1), *o = out;

        if (!out)
                return NULL;
        while (*s) {
                if (s[0] == '\\' && s[1] >= '0' && s[1] <= '7' && s[2] >= '0' && s[2] <= '7' &&
                    s[3] >= '0' && s[3] <= '7') {
                        *o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
                        s += 4;
                } else
                        *o++ = *s++;
        }
        *o = '\0';
        return out;
}

void cg_mounts_free(struct cg_mount *mounts, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                free(mounts[i].mount_point);
                free(mounts[i].root);
        }
        free(mounts);
}

static unsigned controllers_from_options(char *opts)
{
        unsigned bits = 0;
        char *save = NULL;

        for (char *t = strtok_r(opts, ",", &save); t; t = strtok_r(NULL, ",", &save))
                bits |= cg_controller_from_name(t);
        return bits;
}

/* Splits one mountinfo line; returns 1 and fills *mnt if it is a cgroup mount, 0 if not. */
static int parse_mountinfo_line(char *line, struct cg_mount *mnt)
{
        char *fields[6] = {0}, *save = NULL, *t, *fstype, *superopts;
        size_t n = 0;
        unsigned maj, min;

        for (t = strtok_r(line, " ", &save); t && n < ARRAY_SIZE(fields);
             t = n < ARRAY_SIZE(fields) ? strtok_r(NULL, " ", &save) : NULL)
                fields[n++] = t;
        if (n < ARRAY_SIZE(fields))
                return 0;
        /* optional fields until the lone "-" separator */
        do
                t = strtok_r(NULL, " ", &save);
        while (t && strcmp(t, "-") != 0);
        if (!t)
                return 0;
        fstype = strtok_r(NULL, " ", &save);
        (void)strtok_r(NULL, " ", &save); /* source */
        superopts = strtok_r(NULL, " \n", &save);
        if (!fstype || !superopts)
                return 0;
        if (strcmp(fstype, "cgroup") != 0 && strcmp(fstype, "cgroup2") != 0)
                return 0;
        if (sscanf(fields[2], "%u:%u", &maj, &min) != 2)
                return 0;
        *mnt = (struct cg_mount){
                .dev_major = maj,
                .dev_minor = min,
                .v2 = strcmp(fstype, "cgroup2") == 0,
        };
        if (!mnt->v2)
                mnt->controllers = controllers_from_options(superopts);
        mnt->root = unescape_octal(fields[3]);
        mnt->mount_point = unescape_octal(fields[4]);
        if (!mnt->root || !mnt->mount_point) {
                free(mnt->root);
                free(mnt->mount_point);
                return -ENOMEM;
        }
        return 1;
}

int cg_parse_mountinfo(const char *text, struct cg_mount **ret, size_t *ret_n)
{
        cleanup_free char *copy = strdup(text);
        struct cg_mount *mounts = NULL;
        size_t n = 0;
        char *save = NULL;

        if (!copy)
                return -ENOMEM;
        for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                cleanup_free char *l = strdup(line);
                struct cg_mount mnt, *p;
                int r;

                if (!l) {
                        cg_mounts_free(mounts, n);
                        return -ENOMEM;
                }
                r = parse_mountinfo_line(l, &mnt);
                if (r == 0)
                        continue;
                p = r < 0 ? NULL : realloc(mounts, (n + 1) * sizeof(*mounts));
                if (!p) {
                        if (r > 0) {
                                free(mnt.root);
                                free(mnt.mount_point);
                        }
                        cg_mounts_free(mounts, n);
                        return -ENOMEM;
                }
                mounts = p;
                mounts[n++] = mnt;
        }
        *ret = mounts;
        *ret_n = n;
        return 0;
}

/* Does the comma list (v1 "cpu,cpuacct" or "name=systemd") contain controller ctrl? */
static bool list_has_controller(const char *list, unsigned ctrl)
{
        char buf[256];
        char *save = NULL;

        if (strlen(list) >= sizeof(buf))
                return false;
        strcpy(buf, list);
        for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
                if (cg_controller_from_name(t) == ctrl)
                        return true;
        return false;
}

int cg_parse_proc_cgroup(const char *text, unsigned ctrl, bool v2, char **ret)
{
        const char *line = text;

        /* "ID:controllers:path"; v2 is "0::path" */
        while (line && *line) {
                const char *end = strchr(line, '\n');
                size_t len = end ? (size_t)(end - line) : strlen(line);
                const char *c1 = memchr(line, ':', len);
                const char *c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - line)) : NULL;

                if (c2) {
                        char list[256];
                        size_t ll = (size_t)(c2 - c1 - 1);
                        bool match;

                        if (ll < sizeof(list)) {
                                memcpy(list, c1 + 1, ll);
                                list[ll] = '\0';
                                match = v2 ? (ll == 0 && strncmp(line, "0:", 2) == 0)
                                           : (ll > 0 && list_has_controller(list, ctrl));
                                if (match) {
                                        char *p = strndup(c2 + 1, len - (size_t)(c2 + 1 - line));

                                        if (!p)
                                                return -ENOMEM;
                                        *ret = p;
                                        return 0;
                                }
                        }
                }
                line = end ? end + 1 : NULL;
        }
        return -ENOENT;
}

int cg_parse_u64(const char *s, uint64_t *ret)
{
        char *end = NULL;
        unsigned long long v;

        while (*s == ' ' || *s == '\t')
                s++;
        if (strncmp(s, "max", 3) == 0 && (s[3] == '\0' || s[3] == '\n' || s[3] == ' ')) {
                *ret = UINT64_MAX;
                return 0;
        }
        if (*s < '0' || *s > '9')
                return -EINVAL;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno == ERANGE)
                return -ERANGE;
        while (*end == ' ' || *end == '\t' || *end == '\n')
                end++;
        if (*end != '\0')
                return -EINVAL;
        *ret = v;
        return 0;
}

int cg_parse_keyed(const char *text, const char *key, uint64_t *ret)
{
        size_t klen = strlen(key);

        for (const char *line = text; line && *line;) {
                const char *end = strchr(line, '\n');

                if (strncmp(line, key, klen) == 0 && line[klen] == ' ') {
                        char buf[32];
                        size_t len = end ? (size_t)(end - line) : strlen(line);

                        len -= klen + 1;
                        if (len >= sizeof(buf))
                                return -EINVAL;
                        memcpy(buf, line + klen + 1, len);
                        buf[len] = '\0';
                        return cg_parse_u64(buf, ret);
                }
                line = end ? end + 1 : NULL;
        }
        return -ENOENT;
}

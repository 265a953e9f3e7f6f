/* SPDX-License-Identifier: MIT */
/* The images of a node config without an images section (the built-in default config among
 * them): minimal, then every other image directory found under <stateDir>/images. */
#include "manifest/node/node-internal.h"
#include "common/util.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int cmp_names(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Directory names under dir that are valid image names, sorted (minimal excluded). */
static int scan_dir(const char *dir, char ***ret)
{
        DIR *d = opendir(dir);
        struct dirent *e;
        char **names = NULL;
        int r = 0;

        while (d && r >= 0 && (e = readdir(d))) {
                struct stat st;

                if (e->d_name[0] == '.' || strcmp(e->d_name, "minimal") == 0 ||
                    !manifest_name_is_valid(e->d_name) ||
                    fstatat(dirfd(d), e->d_name, &st, 0) < 0 || !S_ISDIR(st.st_mode))
                        continue;
                r = fk_strv_push(&names, e->d_name);
        }
        if (d)
                closedir(d);
        if (r < 0) {
                fk_strv_free(names);
                return r;
        }
        if (names)
                qsort(names, fk_strv_length(names), sizeof(char *), cmp_names);
        *ret = names;
        return 0;
}

int node_config_default_images(struct node_config *c)
{
        char **found = NULL, *dir = NULL;
        size_t n;
        int r;

        if (fk_asprintf(&dir, "%s/images", c->state_dir) < 0)
                return -ENOMEM;
        r = scan_dir(dir, &found);
        n = found ? fk_strv_length(found) : 0;
        if (r >= 0 && !(c->images = calloc(n + 1, sizeof(*c->images))))
                r = -ENOMEM;
        for (size_t i = 0; r >= 0 && i <= n; i++) {
                const char *name = i == 0 ? "minimal" : found[i - 1];

                c->images[i].name = strdup(name);
                c->n_images++;
                if (!c->images[i].name || fk_asprintf(&c->images[i].dir, "%s/%s", dir, name) < 0)
                        r = -ENOMEM;
        }
        fk_strv_free(found);
        free(dir);
        return r;
}

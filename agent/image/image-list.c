/* SPDX-License-Identifier: MIT */
/* Reading and pruning the image store: the list (with the references of each digest), the
 * image config exec applies, lookups by id or reference, removal and garbage collection. */
#include "agent/image/image-internal.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *load_json(const struct agent_image_store *st, const char *digest, const char *file)
{
        cleanup_free char *dir = NULL, *path = NULL;

        if (image_dir(st, digest, &dir) < 0 || fk_asprintf(&path, "%s/%s", dir, file) < 0)
                return NULL;
        return json_load_file(path, 0, NULL);
}

static json_t *refs_of(json_t *refs, const char *digest)
{
        json_t *a = json_array(), *v;
        const char *k;

        json_object_foreach(refs, k, v)
        {
                if (a && json_is_string(v) && strcmp(json_string_value(v), digest) == 0)
                        json_array_append_new(a, json_string(k));
        }
        return a;
}

static json_t *refs_json(const struct agent_image_store *st)
{
        cleanup_free char *path = NULL;
        json_t *j = NULL;

        if (fk_asprintf(&path, "%s/refs.json", st->root) >= 0)
                j = json_load_file(path, 0, NULL);
        return json_is_object(j) ? j : (json_decref(j), json_object());
}

/* Digests in the store ("sha256:..."), a strv (caller frees). */
static char **digests(const struct agent_image_store *st)
{
        cleanup_free char *dir = NULL;
        char **v = NULL, d[72];
        struct dirent *e;
        DIR *dh;

        if (fk_asprintf(&dir, "%s/images", st->root) < 0 || !(dh = opendir(dir)))
                return NULL;
        while ((e = readdir(dh)))
                if (strlen(e->d_name) == 64) {
                        snprintf(d, sizeof(d), "sha256:%.64s", e->d_name);
                        if (fk_strv_push(&v, d) < 0)
                                break;
                }
        closedir(dh);
        return v;
}

json_t *agent_image_list_json(struct agent_image_store *st)
{
        json_t *items = json_array(), *refs;
        char **v;

        pthread_mutex_lock(&st->lock);
        refs = refs_json(st);
        v = digests(st);
        for (size_t i = 0; v && v[i] && items; i++) {
                json_t *meta = load_json(st, v[i], "image.json");
                json_t *item = json_is_object(meta) ? meta : json_object();

                if (item != meta)
                        json_decref(meta);
                json_object_set_new(item, "digest", json_string(v[i]));
                json_object_set_new(item, "references", refs_of(refs, v[i]));
                json_object_set_new(item, "config", load_json(st, v[i], "config.json"));
                json_array_append_new(items, item);
        }
        pthread_mutex_unlock(&st->lock);
        fk_strv_free(v);
        json_decref(refs);
        return items;
}

static int strv_from_json(json_t *a, char ***ret)
{
        size_t i;
        json_t *v;

        json_array_foreach(a, i, v)
        {
                if (json_is_string(v) && fk_strv_push(ret, json_string_value(v)) < 0)
                        return -ENOMEM;
        }
        return 0;
}

int agent_image_config(struct agent_image_store *st, const char *digest,
                       struct agent_image_config *ret)
{
        struct agent_image_config c = {0};
        const char *wd, *user;
        json_t *j;
        int r;

        pthread_mutex_lock(&st->lock);
        j = load_json(st, digest, "config.json");
        pthread_mutex_unlock(&st->lock);
        if (!json_is_object(j)) {
                json_decref(j);
                return -ENOENT;
        }
        wd = json_string_value(json_object_get(j, "WorkingDir"));
        user = json_string_value(json_object_get(j, "User"));
        r = strv_from_json(json_object_get(j, "Env"), &c.env);
        if (r >= 0)
                r = strv_from_json(json_object_get(j, "Entrypoint"), &c.command);
        if (r >= 0)
                r = strv_from_json(json_object_get(j, "Cmd"), &c.command);
        if (r >= 0 && wd && *wd && !(c.working_dir = strdup(wd)))
                r = -ENOMEM;
        if (r >= 0 && user && *user && !(c.user = strdup(user)))
                r = -ENOMEM;
        json_decref(j);
        if (r < 0) {
                agent_image_config_done(&c);
                return r;
        }
        *ret = c;
        return 0;
}

static bool is_hex(const char *s)
{
        for (; *s; s++)
                if (!isdigit((unsigned char)*s) && !(*s >= 'a' && *s <= 'f'))
                        return false;
        return true;
}

int agent_image_find(struct agent_image_store *st, const char *id, char *ret, size_t size)
{
        const char *hex = strncmp(id, "sha256:", 7) == 0 ? id + 7 : id;
        char **v = NULL, found[72] = "";
        json_t *refs;
        int r = -ENOENT;

        pthread_mutex_lock(&st->lock);
        refs = refs_json(st);
        if (json_is_string(json_object_get(refs, id))) {
                snprintf(found, sizeof(found), "%s", json_string_value(json_object_get(refs, id)));
                r = 0;
        } else if (strlen(hex) >= 12 && strlen(hex) <= 64 && is_hex(hex)) {
                v = digests(st);
                for (size_t i = 0; v && v[i]; i++)
                        if (strncmp(v[i] + 7, hex, strlen(hex)) == 0) {
                                r = found[0] ? -EINVAL : 0;
                                snprintf(found, sizeof(found), "%s", v[i]);
                        }
        }
        pthread_mutex_unlock(&st->lock);
        json_decref(refs);
        fk_strv_free(v);
        if (r >= 0)
                snprintf(ret, size, "%s", found);
        return r;
}

/* Under st->lock. */
static int remove_locked(struct agent_image_store *st, const char *digest)
{
        cleanup_free char *dir = NULL;
        json_t *refs = refs_json(st), *v;
        const char *k;
        void *tmp;
        int r;

        json_object_foreach_safe(refs, tmp, k, v)
        {
                if (json_is_string(v) && strcmp(json_string_value(v), digest) == 0)
                        (void)image_refs_set(st, k, NULL);
        }
        json_decref(refs);
        /* a pull that made it is done: the next resolve pulls again */
        for (struct image_pull *p = st->pulls; p; p = p->next)
                if (p->state == IMAGE_PULL_DONE && strcmp(p->digest, digest) == 0)
                        p->state = IMAGE_PULL_FAILED, p->retry_at_ns = 0;
        if (image_dir(st, digest, &dir) < 0)
                return -ENOMEM;
        r = fk_rm_rf(dir);
        return r < 0 ? r : 0;
}

int agent_image_remove(struct agent_image_store *st, const char *digest)
{
        char **v;
        bool known = false;
        int r;

        pthread_mutex_lock(&st->lock);
        v = digests(st);
        for (size_t i = 0; v && v[i]; i++)
                known = known || strcmp(v[i], digest) == 0;
        r = known ? remove_locked(st, digest) : -ENOENT;
        pthread_mutex_unlock(&st->lock);
        fk_strv_free(v);
        return r;
}

int image_pin(struct agent_image_store *st, const char *digest)
{
        cleanup_free char *dir = NULL, *path = NULL;
        json_t *meta = load_json(st, digest, "image.json");
        int r;

        if (!json_is_object(meta) || image_dir(st, digest, &dir) < 0 ||
            fk_asprintf(&path, "%s/image.json", dir) < 0) {
                json_decref(meta);
                return -ENOENT;
        }
        json_object_set_new(meta, "pinned", json_true());
        r = json_dump_file(meta, path, JSON_SORT_KEYS) < 0 ? -EIO : 0;
        json_decref(meta);
        return r;
}

int agent_image_gc(struct agent_image_store *st, char *const *in_use)
{
        char **v;
        int n = 0;

        pthread_mutex_lock(&st->lock);
        v = digests(st);
        for (size_t i = 0; v && v[i]; i++) {
                json_t *meta = load_json(st, v[i], "image.json");
                bool used = json_is_true(json_object_get(meta, "pinned"));

                json_decref(meta);
                for (size_t k = 0; in_use && in_use[k] && !used; k++)
                        used = strcmp(in_use[k], v[i]) == 0;
                for (struct image_pull *p = st->pulls; p && !used; p = p->next)
                        used = p->state == IMAGE_PULL_RUNNING && strcmp(p->digest, v[i]) == 0;
                if (!used && remove_locked(st, v[i]) >= 0) {
                        log_info("image %s: removed, nothing uses it", v[i]);
                        n++;
                }
        }
        pthread_mutex_unlock(&st->lock);
        fk_strv_free(v);
        return n;
}

/* SPDX-License-Identifier: MIT */
/* Filesystem snapshots once taken: list, inspect and delete. A snapshot is the bottom of the disk
 * chain of every session restored from it, of their checkpoints and of those checkpoints' forks
 * (their overlays name stateDir/snapshots/ID/disk.qcow2 as backing), so it is deleted only once no
 * layer under stateDir/sessions has it in its chain and no restored session waits to boot on it. */
#include "agent/daemon/daemon-internal.h"
#include "agent/disk/disk.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* One snapshot being listed: its API object and its disk's inode, which chains are matched by. */
struct snap_item {
        json_t *obj; /* owned */
        json_t *users;
        dev_t dev;
        ino_t ino;
};

#define WHO_MAX 160 /* NS/NAME: two DNS labels */

struct snap_set {
        struct snap_item *v;
        size_t n;
};

static void snap_set_done(struct snap_set *set)
{
        for (size_t i = 0; i < set->n; i++)
                json_decref(set->v[i].obj);
        free(set->v);
        *set = (struct snap_set){0};
}

static void add_user(json_t *users, const char *who)
{
        size_t i;
        json_t *u;

        json_array_foreach(users, i, u)
        {
                if (strcmp(json_string_value(u), who) == 0)
                        return;
        }
        json_array_append_new(users, json_string(who));
}

/* fn on stateDir/snapshots/ID when its meta.json reads; 0 when it does not. */
static int visit(const char *root, const char *id, agent_snapshot_fn *fn, void *arg)
{
        cleanup_free char *meta = NULL;
        json_t *m;
        int r;

        if (fk_asprintf(&meta, "%s/%s/meta.json", root, id) < 0)
                return -ENOMEM;
        m = json_load_file(meta, 0, NULL);
        r = m ? fn(root, id, m, arg) : 0;
        json_decref(m);
        return r;
}

int agent_snapshot_each(const char *state_dir, const char *only, agent_snapshot_fn *fn, void *arg)
{
        cleanup_free char *root = NULL;
        struct dirent *e;
        DIR *dh;
        int r = 0;

        if (fk_asprintf(&root, "%s/snapshots", state_dir) < 0)
                return -ENOMEM;
        if (only) /* one lookup: no other meta.json is read */
                return agent_snapshot_id_is_valid(only) ? visit(root, only, fn, arg) : 0;
        dh = opendir(root);
        /* .ID.partial (a delete or an export cut short) is not valid */
        while (dh && r >= 0 && (e = readdir(dh)))
                if (agent_snapshot_id_is_valid(e->d_name))
                        r = visit(root, e->d_name, fn, arg);
        if (dh)
                closedir(dh);
        return r;
}

/* What snap_collect keeps: the snapshots of ns (NULL: any). */
struct snap_filter {
        const char *ns;
        struct snap_set *set;
};

/* stateDir/snapshots/ID as an API object into the filter's set, unless it is not one of its
 * namespace's or its disk is gone. */
static int snap_load(const char *root, const char *id, json_t *m, void *arg)
{
        const struct snap_filter *f = arg;
        cleanup_free char *disk = NULL;
        json_t *md = json_object_get(json_object_get(m, "manifest"), "metadata");
        const char *sns = json_string_value(json_object_get(md, "namespace"));
        const char *sname = json_string_value(json_object_get(md, "name"));
        const char *image = json_string_value(
                json_object_get(json_object_get(json_object_get(m, "manifest"), "spec"), "image"));
        struct snap_item *nv, *it;
        struct stat st;
        char created[40];

        if (!sns || !sname || (f->ns && strcmp(sns, f->ns) != 0))
                return 0;
        if (fk_asprintf(&disk, "%s/%s/disk.qcow2", root, id) < 0)
                return -ENOMEM;
        if (stat(disk, &st) < 0)
                return 0;
        nv = realloc(f->set->v, (f->set->n + 1) * sizeof(*nv));
        if (!nv)
                return -ENOMEM;
        f->set->v = nv;
        fk_format_rfc3339((uint64_t)json_integer_value(json_object_get(m, "createdNs")), created,
                          sizeof(created));
        it = &nv[f->set->n];
        *it = (struct snap_item){
                .obj = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:s?, s:[]}", "kind", "Snapshot",
                                 "id", id, "namespace", sns, "session", sname, "created", created,
                                 "sizeBytes", (json_int_t)st.st_blocks * 512, "image", image,
                                 "usedBy"),
                .dev = st.st_dev,
                .ino = st.st_ino,
        };
        if (!it->obj)
                return -ENOMEM;
        it->users = json_object_get(it->obj, "usedBy");
        f->set->n++;
        return 0;
}

static int snap_collect(struct agent_daemon *d, const char *ns, const char *id,
                        struct snap_set *set)
{
        struct snap_filter f = {.ns = ns, .set = set};

        return agent_snapshot_each(d->cfg->state_dir, id, snap_load, &f);
}

/* The snapshots in the chain of layer, as users NS/NAME (the session dir's key). */
static void chain_users(struct snap_set *set, const char *layer, const char *who)
{
        char **files = NULL;
        size_t n = 0;

        if (agent_disk_chain_files(layer, &files, &n) < 0)
                return;
        for (size_t i = 1; i < n; i++) {
                struct stat st;

                if (stat(files[i], &st) < 0)
                        continue;
                for (size_t k = 0; k < set->n; k++)
                        if (set->v[k].dev == st.st_dev && set->v[k].ino == st.st_ino)
                                add_user(set->v[k].users, who);
        }
        fk_strv_free(files);
}

/* Every qcow2 of a session's disk/ and origin/ dirs, matched against set. */
static void layer_users(struct agent_daemon *d, struct snap_set *set)
{
        cleanup_free char *root = NULL;
        struct dirent *e;
        DIR *dh;

        if (fk_asprintf(&root, "%s/sessions", d->cfg->state_dir) < 0)
                return;
        dh = opendir(root);
        while (set->n && dh && (e = readdir(dh))) {
                char who[WHO_MAX], *dot;

                if (e->d_name[0] == '.' || strlen(e->d_name) >= sizeof(who))
                        continue;
                strcpy(who, e->d_name); /* NS.NAME: names are DNS labels, without dots */
                if ((dot = strchr(who, '.')))
                        *dot = '/';
                for (const char *const *sub = (const char *const[]){"disk", "origin", NULL}; *sub;
                     sub++) {
                        cleanup_free char *dir = NULL;
                        struct dirent *f;
                        DIR *fh;

                        if (fk_asprintf(&dir, "%s/%s/%s", root, e->d_name, *sub) < 0 ||
                            !(fh = opendir(dir)))
                                continue;
                        while ((f = readdir(fh))) {
                                cleanup_free char *p = NULL;
                                size_t k = strlen(f->d_name);

                                if (k > 6 && strcmp(f->d_name + k - 6, ".qcow2") == 0 &&
                                    fk_asprintf(&p, "%s/%s", dir, f->d_name) >= 0)
                                        chain_users(set, p, who);
                        }
                        closedir(fh);
                }
        }
        if (dh)
                closedir(dh);
}

/* Under the lock: sessions restored from a snapshot of set (they may not have a disk yet). */
static void restored_users(struct agent_daemon *d, struct snap_set *set)
{
        for (size_t i = 0; i < d->n_sessions; i++) {
                const struct agent_session *s = d->sessions[i];
                char who[WHO_MAX];

                if (!s->from_snapshot)
                        continue;
                snprintf(who, sizeof(who), "%s/%s", s->namespace, s->name);
                for (size_t k = 0; k < set->n; k++)
                        if (strcmp(json_string_value(json_object_get(set->v[k].obj, "id")),
                                   s->from_snapshot) == 0)
                                add_user(set->v[k].users, who);
        }
}

int agent_daemon_snapshot_list(struct agent_daemon *d, const char *ns, const char *id, json_t **ret,
                               struct fk_error *err)
{
        struct snap_set set = {0};
        json_t *items;
        int r;

        if (id && !agent_snapshot_id_is_valid(id))
                return fk_error_set(err, -EINVAL, "%s: not a snapshot id (snap_ and hex digits)",
                                    id);
        r = snap_collect(d, ns, id, &set);
        if (r >= 0) {
                layer_users(d, &set);
                pthread_mutex_lock(&d->lock);
                restored_users(d, &set);
                pthread_mutex_unlock(&d->lock);
        }
        if (r >= 0 && id && set.n == 0)
                r = fk_error_set(err, -ENOENT, "snapshot %s not found in namespace %s", id, ns);
        if (r >= 0 && id) {
                *ret = json_incref(set.v[0].obj);
        } else if (r >= 0) {
                items = json_array();
                for (size_t i = 0; items && i < set.n; i++)
                        json_array_append(items, set.v[i].obj);
                *ret = json_pack("{s:s, s:o*}", "kind", "SnapshotList", "items", items);
                r = *ret ? 0 : -ENOMEM;
        }
        snap_set_done(&set);
        return r;
}

/* "a, b, c" (heap) or NULL. */
static char *join_users(json_t *users)
{
        char *all = NULL;
        json_t *u;
        size_t i;

        json_array_foreach(users, i, u)
        {
                if (fk_list_append(&all, ", ", json_string_value(u)) < 0)
                        break;
        }
        return all;
}

int agent_daemon_snapshot_delete(struct agent_daemon *d, const char *ns, const char *id,
                                 struct fk_error *err)
{
        cleanup_free char *dir = NULL, *gone = NULL, *users = NULL;
        struct snap_set set = {0};
        int r;

        if (!agent_snapshot_id_is_valid(id))
                return fk_error_set(err, -EINVAL, "%s: not a snapshot id (snap_ and hex digits)",
                                    id);
        if (fk_asprintf(&dir, "%s/snapshots/%s", d->cfg->state_dir, id) < 0 ||
            fk_asprintf(&gone, "%s/snapshots/.%s.partial", d->cfg->state_dir, id) < 0)
                return -ENOMEM;
        r = snap_collect(d, ns, id, &set);
        if (r >= 0 && set.n == 0)
                r = fk_error_set(err, -ENOENT, "snapshot %s not found in namespace %s", id, ns);
        if (r < 0) {
                snap_set_done(&set);
                return r;
        }
        /* a layer that has the snapshot in its chain comes only from one that had it, or from
         * a restore, which inserts its session under the lock and checks the snapshot there */
        layer_users(d, &set);
        pthread_mutex_lock(&d->lock);
        restored_users(d, &set);
        if (json_array_size(set.v[0].users) > 0) {
                users = join_users(set.v[0].users);
                r = fk_error_set(err, -EBUSY,
                                 "snapshot %s is under the disks of %s: delete those sessions "
                                 "first",
                                 id, users ? users : "its sessions");
        } else if (rename(dir, gone) < 0) {
                r = fk_error_set(err, -errno, "rename %s: %m", dir);
        }
        pthread_mutex_unlock(&d->lock);
        snap_set_done(&set);
        if (r < 0)
                return r;
        /* a crash from here on leaves a .partial dir, removed at the next start */
        r = fk_rm_rf(gone);
        if (r < 0)
                log_warning("snapshot %s: removing %s: %s", id, gone, strerror(-r));
        log_info("snapshot %s deleted", id);
        return 0;
}

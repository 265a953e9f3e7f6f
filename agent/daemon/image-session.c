/* SPDX-License-Identifier: MIT */
/* Sessions on OCI images: the store of the daemon (made on first use), the boot files of a
 * reference with the ImageReady condition, the image config applied to exec and afterStart,
 * and who uses an image (sessions with their checkpoints, snapshots) for rm and the GC. */
#include "agent/daemon/daemon-internal.h"
#include "agent/image/image.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DIGEST_FILE "image-digest"

static void wake(void *ctx)
{
        agent_daemon_wake(ctx);
}

struct agent_image_store *agent_daemon_images(struct agent_daemon *d)
{
        struct agent_image_store *st;

        pthread_mutex_lock(&d->images_lock);
        if (!d->images && agent_image_store_new(d->cfg, wake, d, &st) >= 0)
                d->images = st;
        st = d->images;
        pthread_mutex_unlock(&d->images_lock);
        return st;
}

int agent_image_session_digest(const char *sd, char *ret, size_t size)
{
        cleanup_free char *path = NULL, *text = NULL;
        size_t n = 0;
        int r;

        ret[0] = '\0';
        if (fk_asprintf(&path, "%s/" DIGEST_FILE, sd) < 0)
                return -ENOMEM;
        r = fk_read_file(path, 128, &text, &n);
        if (r < 0)
                return r;
        snprintf(ret, size, "%.*s", (int)strcspn(text, "\n"), text);
        return 0;
}

int agent_image_session_record(const char *sd, const char *digest)
{
        cleanup_free char *path = NULL;
        char old[80];
        int r;

        if (agent_image_session_digest(sd, old, sizeof(old)) >= 0 && strcmp(old, digest) == 0)
                return 0;
        if (fk_asprintf(&path, "%s/" DIGEST_FILE, sd) < 0)
                return -ENOMEM;
        r = fk_mkdir_p(sd, 0700);
        if (r >= 0)
                r = fk_write_file_atomic(path, digest, strlen(digest), 0644);
        return r < 0 ? r : 0;
}

int agent_image_job_rootfs(struct agent_daemon *d, struct agent_session *s, const char *sd,
                           char **ret_rootfs, struct fk_error *err)
{
        struct agent_image_store *st = agent_daemon_images(d);
        struct agent_image_boot b = {0};
        uint64_t now = agent_now_real(d);
        int r;

        if (!st)
                return fk_error_set(err, -ENOMEM, "the image store is not available");
        r = agent_image_resolve(st, s->spec->image, &b, err);
        if (r == -EAGAIN || r == -EIO || r == -EPERM) {
                agent_session_set_condition(s, AGENT_COND_IMAGE_READY, "False",
                                            r == -EAGAIN ? "Pulling" : "PullFailed", now, "%s",
                                            err->msg);
                return r;
        }
        if (r < 0)
                return r;
        r = agent_image_session_record(sd, b.digest);
        if (r < 0) {
                agent_image_boot_done(&b);
                return fk_error_set(err, r, "record the image of %s: %s", s->key, strerror(-r));
        }
        agent_session_set_condition(s, AGENT_COND_IMAGE_READY, "True", "Pulled", now, "%s",
                                    b.digest);
        *ret_rootfs = TAKE_PTR(b.rootfs);
        agent_image_boot_done(&b);
        return 0;
}

void agent_image_exec_done(struct agent_image_exec *x)
{
        fk_strv_free(x->env);
        free(x->cwd);
        free(x->user);
        fk_strv_free(x->argv);
        *x = (struct agent_image_exec){0};
}

int agent_image_exec_prepare(struct agent_daemon *d, const char *key, char *const *env,
                             bool want_command, struct agent_image_exec *ret)
{
        struct agent_image_config c = {0};
        struct agent_image_exec x = {0};
        cleanup_free char *sd = NULL;
        char digest[80];
        int r;

        if (agent_session_state_dir(d->cfg->state_dir, key, &sd) < 0)
                return -ENOMEM;
        if (agent_image_session_digest(sd, digest, sizeof(digest)) < 0 || !digest[0])
                return -ENOENT;
        r = agent_image_config(agent_daemon_images(d), digest, &c);
        if (r < 0)
                return r;
        /* the image's Env first: spec.env and the request's entries come later and win */
        for (size_t i = 0; c.env && c.env[i] && r >= 0; i++)
                r = fk_strv_push(&x.env, c.env[i]);
        for (size_t i = 0; env && env[i] && r >= 0; i++)
                r = fk_strv_push(&x.env, env[i]);
        x.cwd = TAKE_PTR(c.working_dir);
        x.user = TAKE_PTR(c.user);
        if (want_command)
                x.argv = TAKE_PTR(c.command);
        agent_image_config_done(&c);
        if (r < 0) {
                agent_image_exec_done(&x);
                return r;
        }
        *ret = x;
        return 0;
}

/* "session NS/NAME (N checkpoints)" of every session using digest. */
static int session_users(struct agent_daemon *d, const char *digest, char ***users, char ***in_use)
{
        for (size_t i = 0; i < d->n_sessions; i++) {
                struct agent_session *s = d->sessions[i];
                cleanup_free char *sd = NULL, *who = NULL;
                char dg[80];
                json_t *cks;

                if (agent_session_state_dir(d->cfg->state_dir, s->key, &sd) < 0)
                        return -ENOMEM;
                /* not booted yet (a fork, a pending session): what its reference points at */
                if (in_use && s->spec && manifest_image_is_ref(s->spec->image) &&
                    agent_image_find(d->images, s->spec->image, dg, sizeof(dg)) >= 0 &&
                    fk_strv_push(in_use, dg) < 0)
                        return -ENOMEM;
                if (agent_image_session_digest(sd, dg, sizeof(dg)) < 0 || !dg[0])
                        continue;
                if (in_use && fk_strv_push(in_use, dg) < 0)
                        return -ENOMEM;
                if (!digest || strcmp(dg, digest) != 0)
                        continue;
                cks = agent_ck_cache(d, s);
                if (fk_asprintf(&who, "session %s/%s (%zu checkpoints)", s->namespace, s->name,
                                json_array_size(cks)) < 0 ||
                    fk_strv_push(users, who) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* What snapshot_user looks for, and where it puts what it finds. */
struct snapshot_users {
        struct agent_daemon *d;
        const char *digest;
        char ***users, ***in_use;
};

/* A snapshot whose stored spec names a reference that points at digest (or any, in_use). */
static int snapshot_user(const char *root, const char *id, json_t *m, void *arg)
{
        const struct snapshot_users *u = arg;
        cleanup_free char *who = NULL;
        const char *image = json_string_value(
                json_object_get(json_object_get(json_object_get(m, "manifest"), "spec"), "image"));
        char dg[80] = "";
        int r = 0;

        (void)root;
        if (image && manifest_image_is_ref(image))
                (void)agent_image_find(agent_daemon_images(u->d), image, dg, sizeof(dg));
        if (!dg[0])
                return 0;
        if (u->in_use)
                r = fk_strv_push(u->in_use, dg);
        if (r >= 0 && u->digest && strcmp(dg, u->digest) == 0)
                r = fk_asprintf(&who, "snapshot %s", id) < 0 ? -ENOMEM
                                                             : fk_strv_push(u->users, who);
        return r;
}

static int snapshot_users(struct agent_daemon *d, const char *digest, char ***users, char ***in_use)
{
        struct snapshot_users u = {.d = d, .digest = digest, .users = users, .in_use = in_use};

        return agent_snapshot_each(d->cfg->state_dir, NULL, snapshot_user, &u);
}

int agent_image_users(struct agent_daemon *d, const char *digest, char ***ret_users,
                      char ***ret_in_use)
{
        char **users = NULL, **in_use = NULL;
        int r;

        pthread_mutex_lock(&d->lock);
        if (!agent_daemon_images(d))
                return -ENOMEM;
        r = session_users(d, digest, &users, ret_in_use ? &in_use : NULL);
        pthread_mutex_unlock(&d->lock);
        if (r >= 0)
                r = snapshot_users(d, digest, &users, ret_in_use ? &in_use : NULL);
        if (r < 0) {
                fk_strv_free(users);
                fk_strv_free(in_use);
                return r;
        }
        *ret_users = users;
        if (ret_in_use)
                *ret_in_use = in_use;
        else
                fk_strv_free(in_use);
        return 0;
}

void agent_image_collect(struct agent_daemon *d)
{
        char **users = NULL, **in_use = NULL;

        if (!d->images || agent_image_users(d, NULL, &users, &in_use) < 0)
                return;
        (void)agent_image_gc(d->images, in_use);
        fk_strv_free(users);
        fk_strv_free(in_use);
}

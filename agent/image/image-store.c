/* SPDX-License-Identifier: MIT */
/* The OCI image store under <stateDir>/oci: images/<hex>/{rootfs.img,config.json,image.json}
 * (one per manifest digest), refs.json (reference -> digest), tmp/ (pulls in progress, removed
 * at start), and the pulls table that resolve, pull and the API read. */
#include "agent/image/image-internal.h"
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
#include <unistd.h>

#define IMAGE_BACKOFF_MAX_S 300

void agent_image_boot_done(struct agent_image_boot *b)
{
        free(b->digest);
        free(b->rootfs);
        *b = (struct agent_image_boot){0};
}

void agent_image_config_done(struct agent_image_config *c)
{
        fk_strv_free(c->env);
        free(c->working_dir);
        free(c->user);
        fk_strv_free(c->command);
        *c = (struct agent_image_config){0};
}

int image_dir(const struct agent_image_store *st, const char *digest, char **ret)
{
        const char *hex = strncmp(digest, "sha256:", 7) == 0 ? digest + 7 : digest;

        return fk_asprintf(ret, "%s/images/%s", st->root, hex);
}

static json_t *refs_load(const struct agent_image_store *st)
{
        cleanup_free char *path = NULL;
        json_t *j;

        if (fk_asprintf(&path, "%s/refs.json", st->root) < 0)
                return NULL;
        j = json_load_file(path, 0, NULL);
        if (!json_is_object(j)) {
                json_decref(j);
                j = json_object();
        }
        return j;
}

int image_refs_set(struct agent_image_store *st, const char *ref, const char *digest)
{
        cleanup_free char *path = NULL, *text = NULL;
        json_t *j = refs_load(st);
        int r;

        if (!j || fk_asprintf(&path, "%s/refs.json", st->root) < 0) {
                json_decref(j);
                return -ENOMEM;
        }
        if (digest)
                json_object_set_new(j, ref, json_string(digest));
        else
                json_object_del(j, ref);
        text = json_dumps(j, JSON_SORT_KEYS | JSON_INDENT(1));
        json_decref(j);
        if (!text)
                return -ENOMEM;
        r = fk_write_file_atomic(path, text, strlen(text), 0644);
        return r < 0 ? r : 0;
}

int agent_image_store_new(const struct node_config *cfg, void (*wake)(void *), void *wake_ctx,
                          struct agent_image_store **ret)
{
        struct agent_image_store *st = calloc(1, sizeof(*st));
        cleanup_free char *tmp = NULL, *images = NULL;
        int r;

        if (!st)
                return -ENOMEM;
        pthread_mutex_init(&st->lock, NULL);
        pthread_cond_init(&st->idle, NULL);
        st->cfg = cfg;
        st->wake = wake;
        st->wake_ctx = wake_ctx;
        if (fk_asprintf(&st->root, "%s/oci", cfg->state_dir) < 0 ||
            fk_asprintf(&tmp, "%s/tmp", st->root) < 0 ||
            fk_asprintf(&images, "%s/images", st->root) < 0) {
                agent_image_store_free(st);
                return -ENOMEM;
        }
        /* Nothing half-pulled survives: a pull builds in tmp/ and renames when complete. */
        r = fk_rm_rf(tmp);
        if (r >= 0)
                r = fk_mkdir_p(tmp, 0700);
        if (r >= 0)
                r = fk_mkdir_p(images, 0755);
        if (r < 0) {
                log_error_errno(r, "image store %s: %m", st->root);
                agent_image_store_free(st);
                return r;
        }
        *ret = st;
        return 0;
}

struct agent_image_store *agent_image_store_free(struct agent_image_store *st)
{
        if (!st)
                return NULL;
        pthread_mutex_lock(&st->lock);
        st->stopping = true;
        while (st->running)
                pthread_cond_wait(&st->idle, &st->lock);
        pthread_mutex_unlock(&st->lock);
        while (st->pulls) {
                struct image_pull *p = st->pulls;

                st->pulls = p->next;
                free(p);
        }
        pthread_cond_destroy(&st->idle);
        pthread_mutex_destroy(&st->lock);
        free(st->root);
        free(st);
        return NULL;
}

static struct image_pull *pull_find(struct agent_image_store *st, const char *ref)
{
        for (struct image_pull *p = st->pulls; p; p = p->next)
                if (strcmp(p->ref, ref) == 0)
                        return p;
        return NULL;
}

static void *pull_thread(void *userdata)
{
        struct image_pull *p = userdata;
        struct agent_image_store *st = p->st;

        image_pull_run(p);
        pthread_mutex_lock(&st->lock);
        if (p->state == IMAGE_PULL_FAILED) {
                unsigned shift = p->failures < 8 ? p->failures : 8;
                uint64_t backoff = FK_MIN(5ull << shift, IMAGE_BACKOFF_MAX_S);

                p->failures++;
                p->retry_at_ns = fk_now_mono_ns() + backoff * 1000000000ull;
                log_warning("image %s: pull failed (next try in %llu s): %s", p->ref,
                            (unsigned long long)backoff, p->msg);
        } else {
                p->failures = 0;
                log_info("image %s: pulled (%s)", p->ref, p->digest);
        }
        if (st->wake && !st->stopping)
                st->wake(st->wake_ctx);
        st->running--;
        pthread_cond_broadcast(&st->idle);
        pthread_mutex_unlock(&st->lock);
        return NULL;
}

/* Under st->lock: a new or restarted pull of ref. */
static int pull_start_locked(struct agent_image_store *st, const char *ref,
                             const struct oci_ref *oref, bool pin, struct fk_error *err)
{
        struct image_pull *p = pull_find(st, ref);
        pthread_attr_t attr;
        pthread_t t;
        int r;

        if (p && p->state == IMAGE_PULL_RUNNING) {
                p->pin = p->pin || pin;
                return 0;
        }
        if (st->stopping)
                return fk_error_set(err, -ESHUTDOWN, "forkletd is shutting down");
        if (!p) {
                p = calloc(1, sizeof(*p));
                if (!p)
                        return fk_error_set(err, -ENOMEM, "out of memory");
                p->st = st;
                snprintf(p->ref, sizeof(p->ref), "%s", ref);
                p->next = st->pulls;
                st->pulls = p;
        }
        p->oref = *oref;
        p->state = IMAGE_PULL_RUNNING;
        p->bytes_done = p->bytes_total = 0;
        p->msg[0] = '\0';
        p->pin = pin;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        st->running++;
        r = -pthread_create(&t, &attr, pull_thread, p);
        pthread_attr_destroy(&attr);
        if (r < 0) {
                st->running--;
                p->state = IMAGE_PULL_FAILED;
                return fk_error_set(err, r, "start a pull thread: %s", strerror(-r));
        }
        log_info("image %s: pulling", ref);
        return 0;
}

/* Under st->lock: the digest ref points at when its image is in the store. */
static bool present_locked(struct agent_image_store *st, const char *ref,
                           const struct oci_ref *oref, char *digest, size_t size)
{
        cleanup_free char *dir = NULL, *rootfs = NULL;
        json_t *refs = NULL;
        const char *d = oref->digest[0] ? oref->digest : NULL;

        if (!d) {
                refs = refs_load(st);
                d = json_string_value(json_object_get(refs, ref));
        }
        if (d)
                snprintf(digest, size, "%s", d);
        json_decref(refs);
        return d && image_dir(st, digest, &dir) >= 0 &&
               fk_asprintf(&rootfs, "%s/rootfs.img", dir) >= 0 && access(rootfs, R_OK) == 0;
}

static void bytes_text(uint64_t b, char *buf, size_t size)
{
        if (b >= 1024 * 1024)
                snprintf(buf, size, "%.1f MiB", (double)b / (1024.0 * 1024.0));
        else
                snprintf(buf, size, "%llu KiB", (unsigned long long)(b / 1024));
}

int agent_image_resolve(struct agent_image_store *st, const char *ref, struct agent_image_boot *ret,
                        struct fk_error *err)
{
        char digest[72] = "", done[32], total[32];
        struct image_pull *p;
        struct oci_ref oref;
        int r;

        r = manifest_check_image_ref(st->cfg, ref, &oref, err);
        if (r < 0)
                return r;
        pthread_mutex_lock(&st->lock);
        if (present_locked(st, ref, &oref, digest, sizeof(digest))) {
                pthread_mutex_unlock(&st->lock);
                ret->digest = strdup(digest);
                if (!ret->digest || fk_asprintf(&ret->rootfs, "%s/images/%s/rootfs.img", st->root,
                                                digest + 7) < 0) {
                        agent_image_boot_done(ret);
                        return fk_error_set(err, -ENOMEM, "out of memory");
                }
                return 0;
        }
        p = pull_find(st, ref);
        if (!p || p->state == IMAGE_PULL_DONE ||
            (p->state == IMAGE_PULL_FAILED && fk_now_mono_ns() >= p->retry_at_ns))
                r = pull_start_locked(st, ref, &oref, false, err);
        p = pull_find(st, ref);
        if (r >= 0 && p && p->state == IMAGE_PULL_FAILED) {
                r = fk_error_set(err, -EIO, "pull %s failed: %s", ref, p->msg);
        } else if (r >= 0 && p) {
                bytes_text(p->bytes_done, done, sizeof(done));
                bytes_text(p->bytes_total, total, sizeof(total));
                r = fk_error_set(err, -EAGAIN, "pulling %s: %s of %s", ref, done,
                                 p->bytes_total ? total : "?");
        }
        pthread_mutex_unlock(&st->lock);
        return r;
}

int agent_image_pull_start(struct agent_image_store *st, const char *ref, struct fk_error *err)
{
        struct oci_ref oref;
        int r;

        r = manifest_check_image_ref(st->cfg, ref, &oref, err);
        if (r < 0)
                return r;
        pthread_mutex_lock(&st->lock);
        r = pull_start_locked(st, ref, &oref, true, err);
        pthread_mutex_unlock(&st->lock);
        return r;
}

json_t *agent_image_pull_json(struct agent_image_store *st, const char *ref)
{
        static const char *const states[] = {"Pulling", "Failed", "Ready"};
        struct image_pull *p;
        json_t *j = NULL;

        pthread_mutex_lock(&st->lock);
        p = pull_find(st, ref);
        if (p)
                j = json_pack("{s:s, s:s, s:I, s:I, s:s, s:s}", "reference", p->ref, "state",
                              states[p->state], "bytesDone", (json_int_t)p->bytes_done,
                              "bytesTotal", (json_int_t)p->bytes_total, "digest", p->digest,
                              "message", p->msg);
        pthread_mutex_unlock(&st->lock);
        return j;
}

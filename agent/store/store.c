/* SPDX-License-Identifier: MIT */
/* The state store: every session's record (state.json) in memory, the codec, and the only code
 * that writes a record: through a directory fd, never by path. */
#include "agent/store/store.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/log.h"
#include "common/util.h"
#include "manifest/manifest.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define STORE_MAX_SIZE (MANIFEST_MAX_FILE_SIZE * 2 + 256 * 1024)

struct store_rec {
        char *key;    /* owned */
        json_t *doc;  /* owned: the record as written, NULL when damaged */
        bool damaged; /* state.json could not be read: kept as it is, never written */
};

struct agent_store {
        pthread_mutex_t lock;
        char *state_dir;     /* owned: the node's stateDir */
        int sessions_fd;     /* <stateDir>/sessions, O_DIRECTORY */
        struct store_rec *v; /* owned array */
        size_t n;
};

static const char *const field_names[_AGENT_STORE_FIELD_MAX] = {
        [AGENT_STORE_SESSION] = "session",   [AGENT_STORE_VM] = "vm",
        [AGENT_STORE_IDENTITY] = "identity", [AGENT_STORE_RESTORED] = "restored",
        [AGENT_STORE_LINEAGE] = "lineage",   [AGENT_STORE_DISK] = "disk",
};

const char *agent_store_field_to_string(enum agent_store_field f)
{
        return f < _AGENT_STORE_FIELD_MAX ? field_names[f] : NULL;
}

static bool field_is_object(enum agent_store_field f)
{
        return f == AGENT_STORE_SESSION || f == AGENT_STORE_VM || f == AGENT_STORE_IDENTITY;
}

/* A file name in one directory: no slash, not "." or "..". */
static bool plain_name(const char *s)
{
        return s[0] && !strchr(s, '/') && strcmp(s, ".") && strcmp(s, "..");
}

int agent_store_decode(const char *text, size_t size, json_t **ret, struct fk_error *err)
{
        json_error_t jerr;
        json_t *j, *ver;

        j = json_loadb(text, size, JSON_REJECT_DUPLICATES, &jerr);
        if (!j)
                return fk_error_set(err, -EINVAL, "line %d: %s", jerr.line, jerr.text);
        ver = json_object_get(j, "schemaVersion");
        if (!json_is_object(j) || !ver) {
                json_decref(j);
                return fk_error_set(err, -EINVAL, "not a state record (no schemaVersion)");
        }
        if (!json_is_integer(ver) || json_integer_value(ver) != AGENT_STORE_SCHEMA) {
                char got[32] = "?";

                if (json_is_integer(ver))
                        snprintf(got, sizeof(got), "%lld", (long long)json_integer_value(ver));
                json_decref(j);
                return fk_error_set(err, -EPROTO,
                                    "schemaVersion %s is not one this forkletd knows (it reads "
                                    "%d); run the forkletd that wrote it",
                                    got, AGENT_STORE_SCHEMA);
        }
        for (int f = 0; f < _AGENT_STORE_FIELD_MAX; f++) {
                json_t *v = json_object_get(j, field_names[f]);
                bool ok = !v || (field_is_object(f) ? json_is_object(v) : json_is_string(v));

                if (ok && v && f == AGENT_STORE_DISK)
                        ok = plain_name(json_string_value(v));
                if (!ok) {
                        json_decref(j);
                        return fk_error_set(err, -EINVAL, "%s: must be %s", field_names[f],
                                            f == AGENT_STORE_DISK ? "a file name"
                                            : field_is_object(f)  ? "an object"
                                                                  : "a string");
                }
        }
        *ret = j;
        return 0;
}

char *agent_store_encode(const json_t *rec)
{
        return json_dumps(rec, JSON_INDENT(2) | JSON_SORT_KEYS);
}

/* Under st->lock. */
static struct store_rec *rec_find(struct agent_store *st, const char *key)
{
        for (size_t i = 0; i < st->n; i++)
                if (strcmp(st->v[i].key, key) == 0)
                        return &st->v[i];
        return NULL;
}

static struct store_rec *rec_add(struct agent_store *st, const char *key)
{
        struct store_rec *v = realloc(st->v, (st->n + 1) * sizeof(*v));
        char *k = strdup(key);

        if (v)
                st->v = v;
        if (!v || !k) {
                free(k);
                return NULL;
        }
        v[st->n] = (struct store_rec){.key = k};
        return &v[st->n++];
}

/* The session dir of key (made 0700 when missing), never through a symlink. */
static int session_dir_fd(struct agent_store *st, const char *key)
{
        int fd;

        if (!plain_name(key))
                return -EINVAL;
        fd = openat(st->sessions_fd, key, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT) {
                if (mkdirat(st->sessions_fd, key, 0700) < 0 && errno != EEXIST)
                        return -errno;
                fd = openat(st->sessions_fd, key, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        return fd < 0 ? -errno : fd;
}

static int rec_write(struct agent_store *st, const char *key, const json_t *doc,
                     struct fk_error *err)
{
        cleanup_free char *text = agent_store_encode(doc);
        cleanup_close int dfd = -1;
        char op[200];
        int r;

        if (!text)
                return fk_error_set(err, -ENOMEM, "store session %s: out of memory", key);
        dfd = session_dir_fd(st, key);
        r = dfd < 0 ? dfd : fk_write_file_atomicat(dfd, AGENT_STORE_FILE, text, strlen(text), 0600);
        if (r >= 0)
                return 0;
        if (r == -ENOSPC) {
                snprintf(op, sizeof(op), "store session %s", key);
                return agent_space_error(st->state_dir, "stateDir", strlen(text), op, err);
        }
        return fk_error_set(err, -AGENT_STORE_EFAIL,
                            "store session %s: write %s/sessions/%s/" AGENT_STORE_FILE ": %s", key,
                            st->state_dir, key, strerror(-r));
}

int agent_store_update(struct agent_store *st, const char *key, const struct agent_store_change *c,
                       size_t n, struct fk_error *err)
{
        struct store_rec *rec;
        json_t *doc = NULL;
        int r = 0;

        pthread_mutex_lock(&st->lock);
        rec = rec_find(st, key);
        if (rec && rec->damaged)
                r = fk_error_set(err, -AGENT_STORE_EFAIL,
                                 "store session %s: %s/sessions/%s/" AGENT_STORE_FILE
                                 " could not be read at start; repair or remove it",
                                 key, st->state_dir, key);
        else if (rec)
                doc = json_copy(rec->doc); /* shallow: the values are not modified */
        else
                doc = json_pack("{s:i, s:s}", "schemaVersion", AGENT_STORE_SCHEMA, "key", key);
        if (r >= 0 && !doc)
                r = fk_error_set(err, -ENOMEM, "store session %s: out of memory", key);
        for (size_t i = 0; i < n; i++) {
                const char *name = agent_store_field_to_string(c[i].field);

                if (r >= 0 && !name)
                        r = fk_error_set(err, -EINVAL, "store session %s: unknown field", key);
                else if (r >= 0 && c[i].value) /* a copy: the caller may change its own */
                        r = json_object_set_new(doc, name, json_deep_copy(c[i].value)) < 0 ? -ENOMEM
                                                                                           : 0;
                else if (r >= 0)
                        (void)json_object_del(doc, name);
                json_decref(c[i].value);
        }
        if (r >= 0)
                r = rec_write(st, key, doc, err);
        if (r >= 0 && !rec && !(rec = rec_add(st, key)))
                r = fk_error_set(err, -ENOMEM, "store session %s: out of memory", key);
        if (r >= 0) {
                json_decref(rec->doc);
                rec->doc = TAKE_PTR(doc);
        }
        pthread_mutex_unlock(&st->lock);
        json_decref(doc);
        return r;
}

int agent_store_set(struct agent_store *st, const char *key, enum agent_store_field f,
                    json_t *value, struct fk_error *err)
{
        struct agent_store_change c = {f, value};

        return agent_store_update(st, key, &c, 1, err);
}

int agent_store_set_string(struct agent_store *st, const char *key, enum agent_store_field f,
                           const char *value, struct fk_error *err)
{
        json_t *v = value ? json_string(value) : NULL;

        if (value && !v)
                return fk_error_set(err, -ENOMEM, "out of memory");
        return agent_store_set(st, key, f, v, err);
}

json_t *agent_store_get(struct agent_store *st, const char *key, enum agent_store_field f)
{
        const char *name = agent_store_field_to_string(f);
        struct store_rec *rec;
        json_t *v = NULL;

        pthread_mutex_lock(&st->lock);
        rec = rec_find(st, key);
        if (rec && rec->doc && name)
                v = json_deep_copy(json_object_get(rec->doc, name));
        pthread_mutex_unlock(&st->lock);
        return v;
}

char *agent_store_get_string(struct agent_store *st, const char *key, enum agent_store_field f)
{
        json_t *v = agent_store_get(st, key, f);
        char *s = json_is_string(v) ? strdup(json_string_value(v)) : NULL;

        json_decref(v);
        return s;
}

void agent_store_forget(struct agent_store *st, const char *key)
{
        pthread_mutex_lock(&st->lock);
        for (size_t i = 0; i < st->n; i++) {
                if (strcmp(st->v[i].key, key) != 0)
                        continue;
                free(st->v[i].key);
                json_decref(st->v[i].doc);
                st->v[i] = st->v[--st->n];
                break;
        }
        pthread_mutex_unlock(&st->lock);
}

int agent_store_keys(struct agent_store *st, char ***ret)
{
        char **v = NULL;
        int r = 0;

        pthread_mutex_lock(&st->lock);
        for (size_t i = 0; i < st->n && r >= 0; i++)
                r = fk_strv_push(&v, st->v[i].key);
        pthread_mutex_unlock(&st->lock);
        if (r >= 0 && !v && !(v = calloc(1, sizeof(*v))))
                r = -ENOMEM;
        if (r < 0) {
                fk_strv_free(v);
                return r;
        }
        *ret = v;
        return 0;
}

bool agent_store_keeps(struct agent_store *st, const char *key)
{
        struct store_rec *rec;
        bool keep;

        pthread_mutex_lock(&st->lock);
        rec = rec_find(st, key);
        keep = rec && (rec->damaged || json_object_get(rec->doc, "session"));
        pthread_mutex_unlock(&st->lock);
        return keep;
}

/* Temp files of a write a crash interrupted (".state.json.<random>"). */
static void remove_temps(int dfd)
{
        int fd = dup(dfd);
        DIR *dp = fd >= 0 ? fdopendir(fd) : NULL;
        struct dirent *de;

        if (!dp) {
                if (fd >= 0)
                        close(fd);
                return;
        }
        while ((de = readdir(dp)))
                if (strncmp(de->d_name, "." AGENT_STORE_FILE ".", sizeof(AGENT_STORE_FILE) + 1) ==
                    0)
                        (void)unlinkat(dfd, de->d_name, 0);
        closedir(dp);
}

/* Reads key's state.json: 1 loaded, 0 none, -EPROTO (refuse to run), else damaged (logged);
 * without one after a failed upgrade, damaged too: the old files stay as they are. */
static int load_one(struct agent_store *st, const char *key, bool upgrade_failed,
                    struct fk_error *err)
{
        cleanup_close int dfd = -1, fd = -1;
        cleanup_free char *buf = NULL;
        struct store_rec *rec;
        json_t *doc = NULL;
        size_t size = 0;
        int r;

        dfd = openat(st->sessions_fd, key, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return 0; /* not a directory: not a session's */
        remove_temps(dfd);
        fd = openat(dfd, AGENT_STORE_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT && !upgrade_failed)
                return 0;
        r = fd < 0 ? -errno : fk_read_fd(fd, STORE_MAX_SIZE, &buf, &size);
        if (r >= 0)
                r = agent_store_decode(buf, size, &doc, err);
        else
                fk_error_set(err, r, "%s", strerror(-r));
        if (r == -EPROTO) {
                char why[FK_ERROR_MSG_MAX];

                snprintf(why, sizeof(why), "%s", err->msg);
                return fk_error_set(err, r, "%s/sessions/%s/" AGENT_STORE_FILE ": %s",
                                    st->state_dir, key, why);
        }
        if (!(rec = rec_add(st, key))) {
                json_decref(doc);
                return fk_error_set(err, -ENOMEM, "out of memory");
        }
        if (r < 0 && !(r == -ENOENT && upgrade_failed)) /* that failure is logged already */
                log_error("%s/sessions/%s/" AGENT_STORE_FILE ": %s; session %s not loaded, its "
                          "state dir is kept",
                          st->state_dir, key, err->msg, key);
        if (r < 0) {
                rec->damaged = true;
                return 0;
        }
        rec->doc = doc;
        return 1;
}

static int store_scan(struct agent_store *st, const char *run_dir, struct fk_error *err)
{
        int fd = dup(st->sessions_fd);
        DIR *dp = fd >= 0 ? fdopendir(fd) : NULL;
        struct dirent *de;
        int r = 0;

        if (!dp) {
                if (fd >= 0)
                        close(fd);
                return fk_error_set(err, -errno, "read %s/sessions: %m", st->state_dir);
        }
        while (r >= 0 && (de = readdir(dp))) {
                struct fk_error uerr = {0};
                int k;

                if (de->d_name[0] == '.')
                        continue;
                k = agent_store_upgrade_one(st->sessions_fd, de->d_name, run_dir, &uerr);
                if (k > 0)
                        log_info("session %s: state upgraded to " AGENT_STORE_FILE
                                 " (schemaVersion %d)",
                                 de->d_name, AGENT_STORE_SCHEMA);
                else if (k < 0)
                        log_error("session %s: upgrade of the old state files failed: %s",
                                  de->d_name, uerr.msg);
                r = load_one(st, de->d_name, k < 0, err);
        }
        closedir(dp);
        return r < 0 ? r : 0;
}

int agent_store_open(const char *state_dir, const char *run_dir, struct agent_store **ret,
                     struct fk_error *err)
{
        cleanup_free char *dir = NULL;
        struct agent_store *st;
        int r;

        if (fk_asprintf(&dir, "%s/sessions", state_dir) < 0 || !(st = calloc(1, sizeof(*st))))
                return fk_error_set(err, -ENOMEM, "out of memory");
        pthread_mutex_init(&st->lock, NULL);
        st->sessions_fd = -1;
        if (!(st->state_dir = strdup(state_dir))) {
                agent_store_free(st);
                return fk_error_set(err, -ENOMEM, "out of memory");
        }
        r = fk_mkdir_p(dir, 0700);
        if (r >= 0 && (st->sessions_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
                r = -errno;
        if (r < 0)
                fk_error_set(err, r, "open %s: %s", dir, strerror(-r));
        if (r >= 0)
                r = store_scan(st, run_dir, err);
        if (r < 0) {
                agent_store_free(st);
                return r;
        }
        *ret = st;
        return 0;
}

struct agent_store *agent_store_free(struct agent_store *st)
{
        if (!st)
                return NULL;
        for (size_t i = 0; i < st->n; i++) {
                free(st->v[i].key);
                json_decref(st->v[i].doc);
        }
        free(st->v);
        if (st->sessions_fd >= 0)
                close(st->sessions_fd);
        free(st->state_dir);
        pthread_mutex_destroy(&st->lock);
        free(st);
        return NULL;
}

/* SPDX-License-Identifier: MIT */
/* The durable store of API-applied sessions: <stateDir>/sessions/<key>/session.json, written
 * atomically, loaded back at start so applied sessions survive a restart. */
#include "agent/agent-internal.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "manifest/manifest.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STORE_FILE     "session.json"
#define STORE_MAX_SIZE (MANIFEST_MAX_FILE_SIZE * 2)

int agent_session_run_dir(const char *run_dir, const char *key, char **ret)
{
        return fk_asprintf(ret, "%s/sessions/%s", run_dir, key);
}

int agent_session_state_dir(const char *state_dir, const char *key, char **ret)
{
        return fk_asprintf(ret, "%s/sessions/%s", state_dir, key);
}

int agent_store_save(const char *state_dir, const struct agent_session *s, struct fk_error *err)
{
        cleanup_free char *dir = NULL, *path = NULL, *text = NULL;
        json_t *j;
        int r;

        r = agent_session_state_dir(state_dir, s->key, &dir);
        if (r < 0)
                return fk_error_set(err, r, "out of memory");
        /* cluster: "source" marks sessions assigned by the control plane (re-synced at start) */
        j = json_pack("{s:o, s:I, s:I, s:s, s:s?, s:s?, s:b, s:s?, s:s?}", "manifest",
                      session_manifest_to_json(s->spec), "generation", (json_int_t)s->generation,
                      "createdNs", (json_int_t)s->created_ns, "source",
                      s->source == AGENT_SOURCE_CLUSTER ? "cluster" : "api", "forkParent",
                      s->fork_parent, "forkCheckpoint", s->fork_checkpoint, "forkBySpec",
                      s->fork_by_spec, "fromSnapshot", s->from_snapshot, "rollbackTo",
                      s->rollback_to);
        text = j ? json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
        json_decref(j);
        if (!text || fk_asprintf(&path, "%s/" STORE_FILE, dir) < 0)
                return fk_error_set(err, -ENOMEM, "out of memory");
        r = fk_mkdir_p(dir, 0700);
        if (r >= 0)
                r = fk_write_file_atomic(path, text, strlen(text), 0600);
        if (r == -ENOSPC) {
                char op[200];

                snprintf(op, sizeof(op), "store session %s", s->key);
                return agent_space_error(state_dir, "stateDir", strlen(text), op, err);
        }
        if (r < 0)
                return fk_error_set(err, r, "store session %s in %s: %s", s->key, path,
                                    strerror(-r));
        return 0;
}

int agent_store_remove(const char *state_dir, const char *key)
{
        cleanup_free char *path = NULL;
        int r;

        r = fk_asprintf(&path, "%s/sessions/%s/" STORE_FILE, state_dir, key);
        if (r < 0)
                return r;
        if (unlink(path) < 0 && errno != ENOENT)
                return -errno;
        return 0;
}

static int opt_strdup(json_t *j, const char *key, char **ret)
{
        const char *v = json_string_value(json_object_get(j, key));

        if (v && !(*ret = strdup(v)))
                return -ENOMEM;
        return 0;
}

/* The fork-engine fields: where a fork came from, a pending rollback, a snapshot restore. */
static int store_load_fork(struct agent_session *s, json_t *j)
{
        s->fork_by_spec = json_is_true(json_object_get(j, "forkBySpec"));
        if (opt_strdup(j, "forkParent", &s->fork_parent) < 0 ||
            opt_strdup(j, "forkCheckpoint", &s->fork_checkpoint) < 0 ||
            opt_strdup(j, "fromSnapshot", &s->from_snapshot) < 0 ||
            opt_strdup(j, "rollbackTo", &s->rollback_to) < 0)
                return -ENOMEM;
        if (!s->fork_parent != !s->fork_checkpoint)
                return -EINVAL;
        return 0;
}

/* The fork id the guest got on its last restore (written next to session.json). */
static void store_load_fork_id(const char *session_json, struct agent_session *s)
{
        cleanup_free char *mark = NULL;
        char *id = NULL;
        const char *slash = strrchr(session_json, '/');

        if (!slash ||
            fk_asprintf(&mark, "%.*s/restored", (int)(slash - session_json), session_json) < 0)
                return;
        if (fk_read_file(mark, 128, &id, NULL) >= 0) {
                free(s->fork_id);
                s->fork_id = id;
        }
}

static int store_load_one(const char *path, const struct node_config *cfg,
                          struct agent_session **ret)
{
        cleanup_free char *buf = NULL;
        struct session_manifest *m = NULL;
        struct manifest_diag diag = {0};
        struct agent_session *s;
        json_error_t jerr;
        json_t *j;
        int r;

        r = fk_read_file(path, STORE_MAX_SIZE, &buf, NULL);
        if (r < 0)
                return log_warning_errno(r, "read %s: %m", path);
        j = json_loads(buf, 0, &jerr);
        if (!j)
                return log_warning_errno(-EINVAL, "%s:%d: %s", path, jerr.line, jerr.text);
        r = session_manifest_from_json(json_object_get(j, "manifest"), cfg, &m, &diag);
        if (r < 0) {
                log_warning("%s: stored manifest no longer valid: %s", path,
                            diag.n > 0 ? diag.messages[0] : "unknown error");
                manifest_diag_done(&diag);
                json_decref(j);
                return r;
        }
        s = agent_session_new(m->namespace, m->name);
        if (!s) {
                session_manifest_free(m);
                json_decref(j);
                return -ENOMEM;
        }
        s->spec = m;
        s->source = AGENT_SOURCE_API;
        if (json_is_string(json_object_get(j, "source")) &&
            strcmp(json_string_value(json_object_get(j, "source")), "cluster") == 0)
                s->source = AGENT_SOURCE_CLUSTER; /* cluster mode */
        s->generation = (uint64_t)json_integer_value(json_object_get(j, "generation"));
        s->created_ns = (uint64_t)json_integer_value(json_object_get(j, "createdNs"));
        if (s->generation == 0)
                s->generation = 1;
        r = store_load_fork(s, j);
        json_decref(j);
        if (r < 0) {
                agent_session_free(s);
                return r;
        }
        *ret = s;
        return 0;
}

static int push_session(struct agent_session ***v, size_t *n, struct agent_session *s)
{
        struct agent_session **p = realloc(*v, (*n + 1) * sizeof(*p));

        if (!p)
                return -ENOMEM;
        p[(*n)++] = s;
        *v = p;
        return 0;
}

int agent_store_load(const char *state_dir, const struct node_config *cfg,
                     struct agent_session ***ret, size_t *ret_n)
{
        cleanup_free char *dir = NULL;
        struct agent_session **v = NULL;
        struct dirent *de;
        size_t n = 0;
        DIR *dp;
        int r = 0;

        if (fk_asprintf(&dir, "%s/sessions", state_dir) < 0)
                return -ENOMEM;
        dp = opendir(dir);
        if (!dp && errno != ENOENT)
                return -errno;
        while (dp && (de = readdir(dp)) && r >= 0) {
                cleanup_free char *path = NULL;
                struct agent_session *s = NULL;

                if (de->d_name[0] == '.')
                        continue;
                if (fk_asprintf(&path, "%s/%s/" STORE_FILE, dir, de->d_name) < 0) {
                        r = -ENOMEM;
                        break;
                }
                if (access(path, F_OK) < 0)
                        continue; /* a manifest-dir session's state, or a leftover */
                if (store_load_one(path, cfg, &s) < 0)
                        continue;
                store_load_fork_id(path, s);
                r = push_session(&v, &n, s);
                if (r < 0)
                        agent_session_free(s);
        }
        if (dp)
                closedir(dp);
        if (r < 0) {
                for (size_t i = 0; i < n; i++)
                        agent_session_free(v[i]);
                free(v);
                return r;
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

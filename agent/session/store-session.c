/* SPDX-License-Identifier: MIT */
/* The session half of the state store: an API or cluster session's desired state (manifest,
 * generation, fork origin, pending rollback) as the "session" field of its record, and the
 * sessions loaded back at start so they survive a restart. */
#include "agent/store/store.h"
#include "agent/session/session.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "manifest/manifest.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

int agent_session_run_dir(const char *run_dir, const char *key, char **ret)
{
        return fk_asprintf(ret, "%s/sessions/%s", run_dir, key);
}

int agent_session_state_dir(const char *state_dir, const char *key, char **ret)
{
        return fk_asprintf(ret, "%s/sessions/%s", state_dir, key);
}

json_t *agent_store_session_json(const struct agent_session *s)
{
        /* cluster: "source" marks sessions assigned by the control plane (re-synced at start) */
        return json_pack("{s:o, s:I, s:I, s:s, s:s?, s:s?, s:b, s:s?, s:s?}", "manifest",
                         session_manifest_to_json(s->spec), "generation", (json_int_t)s->generation,
                         "createdNs", (json_int_t)s->created_ns, "source",
                         s->source == AGENT_SOURCE_CLUSTER ? "cluster" : "api", "forkParent",
                         s->fork_parent, "forkCheckpoint", s->fork_checkpoint, "forkBySpec",
                         s->fork_by_spec, "fromSnapshot", s->from_snapshot, "rollbackTo",
                         s->rollback_to);
}

int agent_store_save(struct agent_store *st, const struct agent_session *s, struct fk_error *err)
{
        json_t *j = agent_store_session_json(s);

        if (!j)
                return fk_error_set(err, -ENOMEM, "store session %s: out of memory", s->key);
        return agent_store_set(st, s->key, AGENT_STORE_SESSION, j, err);
}

int agent_store_remove(struct agent_store *st, const char *key, struct fk_error *err)
{
        return agent_store_set(st, key, AGENT_STORE_SESSION, NULL, err);
}

static int opt_strdup(json_t *j, const char *key, char **ret)
{
        const char *v = json_string_value(json_object_get(j, key));

        if (v && !(*ret = strdup(v)))
                return -ENOMEM;
        return 0;
}

/* The fork-engine fields: where a fork came from, a pending rollback, a snapshot restore. */
static int load_fork(struct agent_session *s, json_t *j)
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

static int load_one(struct agent_store *st, const char *key, const struct node_config *cfg,
                    struct agent_session **ret)
{
        json_t *j = agent_store_get(st, key, AGENT_STORE_SESSION);
        struct session_manifest *m = NULL;
        struct manifest_diag diag = {0};
        struct agent_session *s;
        const char *src;
        int r;

        if (!j)
                return 0;
        r = session_manifest_from_json(json_object_get(j, "manifest"), cfg, &m, &diag);
        if (r < 0) {
                log_warning("session %s: stored manifest no longer valid: %s", key,
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
        src = json_string_value(json_object_get(j, "source"));
        s->source = src && !strcmp(src, "cluster") ? AGENT_SOURCE_CLUSTER : AGENT_SOURCE_API;
        s->generation = (uint64_t)json_integer_value(json_object_get(j, "generation"));
        s->created_ns = (uint64_t)json_integer_value(json_object_get(j, "createdNs"));
        if (s->generation == 0)
                s->generation = 1;
        r = load_fork(s, j);
        json_decref(j);
        if (r >= 0 && strcmp(s->key, key) != 0)
                r = log_warning_errno(-EINVAL, "session %s: stored manifest names %s", key, s->key);
        if (r < 0) {
                agent_session_free(s);
                return r;
        }
        s->fork_id = agent_store_get_string(st, key, AGENT_STORE_RESTORED);
        *ret = s;
        return 1;
}

int agent_store_load_sessions(struct agent_store *st, const struct node_config *cfg,
                              struct agent_session ***ret, size_t *ret_n)
{
        char **keys = NULL;
        struct agent_session **v = NULL;
        size_t n = 0;
        int r;

        r = agent_store_keys(st, &keys);
        for (size_t i = 0; r >= 0 && keys[i]; i++) {
                struct agent_session *s = NULL, **p;

                if (load_one(st, keys[i], cfg, &s) <= 0)
                        continue;
                p = realloc(v, (n + 1) * sizeof(*p));
                if (!p) {
                        agent_session_free(s);
                        r = -ENOMEM;
                        break;
                }
                v = p;
                v[n++] = s;
        }
        fk_strv_free(keys);
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

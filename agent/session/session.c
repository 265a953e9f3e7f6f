/* SPDX-License-Identifier: MIT */
/* The session record: lifetime, conditions, refcounted VM handles and the Session JSON
 * (metadata + spec from the manifest, status from what the node observed). */
#include "agent/session/session.h"
#include "agent/net/net.h"
#include "common/util.h"
#include "manifest/manifest.h"
#include "vmm/vmm.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const condition_names[_AGENT_COND_MAX] = {
        [AGENT_COND_READY] = "Ready",
        [AGENT_COND_MANIFEST_VALID] = "ManifestValid",
        [AGENT_COND_RESOURCES] = "ResourcesApplied",
        [AGENT_COND_AFTER_START] = "AfterStart",
        [AGENT_COND_CHECKPOINTS] = "CheckpointsTaken",
        [AGENT_COND_FORKS] = "ForksReady",
        [AGENT_COND_DISK_PRESSURE] = "DiskPressure",
        [AGENT_COND_IMAGE_READY] = "ImageReady",
};

struct agent_vm_ref *agent_vm_ref_new(void *vm, const struct agent_vm_ops *ops)
{
        struct agent_vm_ref *r = calloc(1, sizeof(*r));

        if (!r)
                return NULL;
        atomic_init(&r->refs, 1);
        r->vm = vm;
        r->ops = ops;
        return r;
}

struct agent_vm_ref *agent_vm_ref_get(struct agent_vm_ref *r)
{
        if (r)
                atomic_fetch_add(&r->refs, 1);
        return r;
}

struct agent_vm_ref *agent_vm_ref_put(struct agent_vm_ref *r)
{
        if (!r)
                return NULL;
        if (atomic_fetch_sub(&r->refs, 1) == 1) {
                r->ops->free(r->ops->userdata, r->vm);
                free(r);
        }
        return NULL;
}

struct agent_session *agent_session_new(const char *ns, const char *name)
{
        struct agent_session *s = calloc(1, sizeof(*s));

        if (!s)
                return NULL;
        s->namespace = strdup(ns);
        s->name = strdup(name);
        if (!s->namespace || !s->name || fk_asprintf(&s->key, "%s.%s", ns, name) < 0)
                return agent_session_free(s);
        s->phase = SESSION_PHASE_PENDING;
        s->audited_phase = -1;
        return s;
}

struct agent_session *agent_session_free(struct agent_session *s)
{
        if (!s)
                return NULL;
        agent_vm_ref_put(s->vm);
        if (s->net)
                s->net_ops->free(s->net);
        session_manifest_free(s->spec);
        free(s->res.cgroup_path);
        free(s->source_file);
        free(s->fork_parent);
        free(s->fork_checkpoint);
        free(s->fork_id);
        json_decref(s->identity);
        json_decref(s->ck_cache);
        json_decref(s->res.sample);
        free(s->rollback_to);
        free(s->from_snapshot);
        free(s->key);
        free(s->name);
        free(s->namespace);
        free(s);
        return NULL;
}

/* Appends to the ring of recent events; the oldest goes once it is full. */
static void record_event(struct agent_session *s, uint64_t now_ns, bool warning, const char *reason,
                         const char *message)
{
        struct agent_event *e = &s->events[s->events_next];

        e->time_ns = now_ns;
        e->warning = warning;
        snprintf(e->reason, sizeof(e->reason), "%s", reason);
        snprintf(e->message, sizeof(e->message), "%s", message);
        s->events_next = (s->events_next + 1) % AGENT_EVENTS_MAX;
        if (s->n_events < AGENT_EVENTS_MAX)
                s->n_events++;
}

/* Ready going False for one of these is what was asked for, not a problem. */
static bool reason_is_requested(const char *reason)
{
        static const char *const requested[] = {"Booting", "Forking", "RollingBack", "Restoring",
                                                "Paused",  "Stopped", NULL};

        for (size_t i = 0; requested[i]; i++)
                if (strcmp(reason, requested[i]) == 0)
                        return true;
        return false;
}

void agent_session_add_event(struct agent_session *s, uint64_t now_ns, bool warning,
                             const char *reason, const char *fmt, ...)
{
        char msg[sizeof(s->events[0].message)];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        record_event(s, now_ns, warning, reason, msg);
}

void agent_session_set_condition(struct agent_session *s, enum agent_condition_type t,
                                 const char *status, const char *reason, uint64_t now_ns,
                                 const char *fmt, ...)
{
        struct agent_condition *c = &s->conditions[t];
        bool changed = !c->set || strcmp(c->status, status) != 0 || strcmp(c->reason, reason) != 0;
        va_list ap;

        if (!c->set || strcmp(c->status, status) != 0)
                c->last_transition_ns = now_ns;
        c->set = true;
        c->status = status;
        snprintf(c->reason, sizeof(c->reason), "%s", reason);
        va_start(ap, fmt);
        vsnprintf(c->message, sizeof(c->message), fmt, ap);
        va_end(ap);
        if (changed)
                record_event(s, now_ns, strcmp(status, "True") != 0 && !reason_is_requested(reason),
                             reason, c->message);
}

static json_t *time_json(uint64_t ns)
{
        char buf[64];

        if (ns == 0)
                return json_null();
        return json_string(fk_format_rfc3339(ns, buf, sizeof(buf)));
}

/* status.events: oldest first. */
static json_t *events_json(const struct agent_session *s)
{
        unsigned first = (s->events_next + AGENT_EVENTS_MAX - s->n_events) % AGENT_EVENTS_MAX;
        json_t *a = json_array();

        for (unsigned i = 0; a && i < s->n_events; i++) {
                const struct agent_event *e = &s->events[(first + i) % AGENT_EVENTS_MAX];

                json_array_append_new(a, json_pack("{s:o, s:s, s:s, s:s}", "time",
                                                   time_json(e->time_ns), "type",
                                                   e->warning ? "Warning" : "Normal", "reason",
                                                   e->reason, "message", e->message));
        }
        return a;
}

static json_t *conditions_json(const struct agent_session *s)
{
        json_t *a = json_array();

        for (int i = 0; a && i < _AGENT_COND_MAX; i++) {
                const struct agent_condition *c = &s->conditions[i];

                if (!c->set)
                        continue;
                json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:s, s:o}", "type",
                                                   condition_names[i], "status", c->status,
                                                   "reason", c->reason, "message", c->message,
                                                   "lastTransitionTime",
                                                   time_json(c->last_transition_ns)));
        }
        return a;
}

static json_t *vm_json(const struct agent_session *s, int accel)
{
        if (!s->vm && s->pid <= 0)
                return json_null();
        return json_pack("{s:I, s:s}", "pid", (json_int_t)s->pid, "accel",
                         vmm_accel_to_string((enum vmm_accel)accel));
}

json_t *agent_session_status_json(const struct agent_session *s, int accel)
{
        json_t *net = s->net ? s->net_ops->status(s->net) : NULL;

        if (!net)
                net = json_pack("{s:n}", "netns");
        return json_pack("{s:s, s:o, s:o, s:o, s:n, s:[], s:[], s:I, s:o, s:o, s:o}", "phase",
                         session_phase_to_string(s->phase), "conditions", conditions_json(s), "vm",
                         vm_json(s, accel), "network", net, "cgroup", "checkpoints", "forks",
                         "observedGeneration", (json_int_t)s->observed_generation, "startedAt",
                         time_json(s->started_ns), "events", events_json(s), "lastFailure",
                         agent_failure_json(&s->last_failure));
}

json_t *agent_failure_json(const struct agent_failure *f)
{
        json_t *tail;

        if (!f->time_ns)
                return json_null();
        tail = json_array();
        for (unsigned i = 0; tail && i < f->n_tail; i++)
                json_array_append_new(tail, json_string(f->tail[i]));
        return json_pack("{s:o, s:s, s:s, s:o*}", "time", time_json(f->time_ns), "reason",
                         f->reason, "message", f->message, "consoleTail", tail);
}

static int metadata_extend(json_t *meta, const struct agent_session *s)
{
        int r = 0;

        r |= json_object_set_new(meta, "generation", json_integer((json_int_t)s->generation));
        r |= json_object_set_new(meta, "creationTimestamp", time_json(s->created_ns));
        if (s->deleted_ns)
                r |= json_object_set_new(meta, "deletionTimestamp", time_json(s->deleted_ns));
        r |= json_object_set_new(meta, "source",
                                 json_string(s->source == AGENT_SOURCE_FILE      ? s->source_file
                                             : s->source == AGENT_SOURCE_CLUSTER ? "cluster"
                                                                                 : "api"));
        return r ? -ENOMEM : 0;
}

json_t *agent_session_to_json(const struct agent_session *s, int accel)
{
        json_t *j, *meta;

        if (s->spec)
                j = session_manifest_to_json(s->spec);
        else
                j = json_pack("{s:s, s:s, s:{s:s, s:s}}", "apiVersion", MANIFEST_API_VERSION,
                              "kind", "Session", "metadata", "name", s->name, "namespace",
                              s->namespace);
        if (!j)
                return NULL;
        meta = json_object_get(j, "metadata");
        if (!json_is_object(meta) || metadata_extend(meta, s) < 0 ||
            json_object_set_new(j, "status", agent_session_status_json(s, accel)) < 0) {
                json_decref(j);
                return NULL;
        }
        return j;
}

/* SPDX-License-Identifier: MIT */
/* The Session field table: names, types, bounds and descriptions of every field. The validator
 * takes its known keys from here and the OpenAPI schema is generated from it. Also decodes
 * metadata.annotations (qualified-name keys, any string values). */
#include "manifest/manifest-internal.h"

#include <stdlib.h>
#include <string.h>

#define ANNOTATIONS_MAX_BYTES (256 * 1024) /* Kubernetes' limit on all annotations together */

static const char *const states[] = {"Running", "Paused", "Stopped", NULL};
static const char *const policies[] = {"Never", "OnFailure", NULL};
static const char *const phases[] = {"Pending", "Starting", "Running", "Paused",
                                     "Stopped", "Failed",   NULL};
static const char *const cond_status[] = {"True", "False", "Unknown", NULL};

#define OUT(n, t, d)                                                                               \
        {                                                                                          \
                .name = n, .type = t, .flags = MF_OUTPUT, .description = d                         \
        }
#define FIELD(n, t, d)                                                                             \
        {                                                                                          \
                .name = n, .type = t, .description = d                                             \
        }
#define OBJECT(n, f, d)                                                                            \
        {                                                                                          \
                .name = n, .type = MF_OBJECT, .fields = f, .description = d                        \
        }
#define ARRAY(n, it, f, d)                                                                         \
        {                                                                                          \
                .name = n, .type = MF_ARRAY, .items = it, .fields = f, .description = d            \
        }

static const struct manifest_field metadata[] = {
        {.name = "name",
         .type = MF_STRING,
         .flags = MF_REQUIRED,
         .description = "The session's name, a DNS-1123 label (lowercase letters, digits and "
                        "'-', at most 63 characters), unique in its namespace."},
        FIELD("namespace", MF_STRING, "The namespace (a DNS-1123 label); default \"default\"."),
        FIELD("labels", MF_MAP,
              "String keys and values for selecting sessions (kubectl get -l); keys are "
              "qualified names, values at most 63 characters."),
        FIELD("annotations", MF_MAP,
              "Arbitrary string metadata kept with the session (kubectl keeps "
              "kubectl.kubernetes.io/last-applied-configuration here); at most 256 KiB."),
        OUT("uid", MF_STRING, "Unique for this session's lifetime; a new one after re-creation."),
        OUT("resourceVersion", MF_STRING,
            "Opaque version of this object; changes whenever it changes. Send it back on an "
            "update to refuse lost updates (409 Conflict)."),
        OUT("generation", MF_INT, "Incremented on each change of the desired state."),
        OUT("creationTimestamp", MF_TIME, "When the session was created."),
        OUT("deletionTimestamp", MF_TIME, "When deletion was requested; set while tearing down."),
        OUT("source", MF_STRING, "Where the manifest came from: api, cluster or a file path."),
        OUT("managedFields", MF_ANY, "Accepted and ignored (forklet does not track field owners)."),
        OUT("selfLink", MF_STRING, "Accepted and ignored."),
        {0},
};

static const struct manifest_field lifecycle[] = {
        {.name = "afterStart",
         .type = MF_ARRAY,
         .items = MF_STRING,
         .description = "A command and its arguments run in the guest once the session is "
                        "Running; checkpoints are taken after it succeeded."},
        {.name = "runImageCommand",
         .type = MF_BOOL,
         .description = "With an OCI image reference and no afterStart: run the image's "
                        "Entrypoint and Cmd in the background after a cold boot."},
        {0},
};

static const struct manifest_field checkpoint[] = {
        {.name = "name",
         .type = MF_STRING,
         .flags = MF_REQUIRED,
         .description = "The checkpoint's name (a DNS-1123 label), unique in the session."},
        {0},
};

static const struct manifest_field forks[] = {
        {.name = "from",
         .type = MF_STRING,
         .flags = MF_REQUIRED,
         .description = "The name of an entry of spec.checkpoints to fork from."},
        {.name = "count",
         .type = MF_INT,
         .flags = MF_REQUIRED,
         .description = "How many forks to keep (NAME-fork-0 ...); at most the node's "
                        "capacity.maxForksPerSession."},
        {0},
};

static const struct manifest_field secret[] = {
        {.name = "name",
         .type = MF_STRING,
         .flags = MF_REQUIRED,
         .description = "The secret's name: the environment variable (or file name under "
                        "/run/secrets) it appears as in the guest."},
        FIELD("file", MF_STRING, "An absolute node path under secrets.fileDirs to read it from."),
        FIELD("mint", MF_BOOL, "Mint a fresh value per session and per fork (node mintCommand)."),
        {0},
};

static const struct manifest_field spec[] = {
        FIELD("sizeClass", MF_STRING,
              "A size class of the node config (vCPUs, memory, CPU quota); default small."),
        FIELD("image", MF_STRING,
              "An image the node lists (default minimal) or an OCI reference "
              "(host[:port]/repo[:tag][@sha256:...]) from a registry the node allows."),
        {.name = "state",
         .type = MF_STRING,
         .enums = states,
         .description = "Desired state: Running, Paused (processes and memory kept) or Stopped; "
                        "default Running."},
        {.name = "restartPolicy",
         .type = MF_STRING,
         .enums = policies,
         .description = "Never (default) or OnFailure (restart a failed VM)."},
        FIELD("env", MF_MAP, "Environment variables of afterStart and exec."),
        {.name = "egress",
         .type = MF_ARRAY,
         .items = MF_STRING,
         .description = "Hosts (api.github.com), wildcards (*.example.com) and CIDRs "
                        "(203.0.113.0/24) the guest may reach; absent or empty: open, any "
                        "entry: everything else is denied."},
        {.name = "ports",
         .type = MF_ARRAY,
         .items = MF_INT,
         .min = 1,
         .max = 65535,
         .description = "Guest ports port-forward may reach."},
        OBJECT("lifecycle", lifecycle, "Hooks run in the guest."),
        ARRAY("checkpoints", MF_OBJECT, checkpoint,
              "Checkpoints taken once, after afterStart succeeded."),
        OBJECT("forks", forks, "Keep exactly count forks of a checkpoint: NAME-fork-0..count-1."),
        FIELD("nodeSelector", MF_MAP, "Cluster mode: node labels the session requires."),
        ARRAY("secrets", MF_OBJECT, secret, "Secrets given to the guest (never stored here)."),
        {0},
};

static const struct manifest_field condition[] = {
        OUT("type", MF_STRING, "Ready, ManifestValid, ResourcesApplied, AfterStart, ..."),
        {.name = "status",
         .type = MF_STRING,
         .enums = cond_status,
         .flags = MF_OUTPUT,
         .description = "True, False or Unknown."},
        OUT("reason", MF_STRING, "A CamelCase reason."),
        OUT("message", MF_STRING, "What happened, for people."),
        OUT("lastTransitionTime", MF_TIME, "When status last changed."),
        {0},
};

static const struct manifest_field vm[] = {
        OUT("pid", MF_INT, "The QEMU process on the node."),
        OUT("accel", MF_STRING, "kvm or tcg."),
        {0},
};

static const struct manifest_field status[] = {
        {.name = "phase",
         .type = MF_STRING,
         .enums = phases,
         .flags = MF_OUTPUT,
         .description = "Pending, Starting, Running, Paused, Stopped or Failed."},
        {.name = "conditions",
         .type = MF_ARRAY,
         .items = MF_OBJECT,
         .fields = condition,
         .flags = MF_OUTPUT,
         .description = "Conditions (Ready: the guest agent answers)."},
        {.name = "vm",
         .type = MF_OBJECT,
         .fields = vm,
         .flags = MF_OUTPUT,
         .description = "The VM process, null when none runs."},
        OUT("network", MF_ANY, "The session network (netns, addresses)."),
        OUT("cgroup", MF_STRING, "The session's cgroup."),
        OUT("checkpoints", MF_ANY, "Checkpoints taken (id, name, time)."),
        OUT("forks", MF_ANY, "Forks made from this session's checkpoints."),
        OUT("observedGeneration", MF_INT, "The metadata.generation the node acted on last."),
        OUT("startedAt", MF_TIME, "When the VM started."),
        OUT("events", MF_ANY, "Recent events, oldest first."),
        OUT("lastFailure", MF_ANY, "The last failure, with the console tail."),
        {0},
};

static const struct manifest_field root_fields[] = {
        {.name = "apiVersion",
         .type = MF_STRING,
         .flags = MF_REQUIRED,
         .description = "forklet.dev/v1alpha1"},
        {.name = "kind", .type = MF_STRING, .flags = MF_REQUIRED, .description = "Session"},
        {.name = "metadata",
         .type = MF_OBJECT,
         .fields = metadata,
         .flags = MF_REQUIRED,
         .description = "Standard object metadata."},
        OBJECT("spec", spec, "The desired state of the session's microVM."),
        {.name = "status",
         .type = MF_OBJECT,
         .fields = status,
         .flags = MF_OUTPUT,
         .description = "The observed state, written by the node; ignored on input."},
        {0},
};

static const struct manifest_field root = {
        .name = "Session",
        .type = MF_OBJECT,
        .fields = root_fields,
        .description = "A sandbox: one QEMU microVM with its own network namespace, egress "
                       "policy and cgroup, which can be checkpointed, forked and rolled back.",
};

const struct manifest_field *manifest_session_fields(void)
{
        return &root;
}

const struct manifest_field *manifest_field_find(const char *path)
{
        const struct manifest_field *f = &root;
        const char *p = path;

        while (p && *p) {
                size_t len = strcspn(p, ".");
                const struct manifest_field *c = f->fields;

                while (c && c->name && (strlen(c->name) != len || strncmp(c->name, p, len) != 0))
                        c++;
                if (!c || !c->name)
                        return NULL;
                f = c;
                p = p[len] ? p + len + 1 : NULL;
        }
        return f;
}

const char *const *manifest_field_names(const struct manifest_field *f, const char **buf)
{
        size_t n = 0;

        for (const struct manifest_field *c = f ? f->fields : NULL; c && c->name; c++)
                if (n < MANIFEST_FIELDS_MAX)
                        buf[n++] = c->name;
        buf[n] = NULL;
        return buf;
}

void manifest_decode_annotations(struct mctx *c, const struct mnode *n, struct kv **ret,
                                 size_t *ret_n)
{
        size_t total = 0;
        char p[MPATH_MAX];

        if (!mget_map(c, n, "metadata.annotations", NULL))
                return;
        for (size_t i = 0; i + 1 < n->n_items; i += 2) {
                const struct mnode *k = n->items[i], *v = n->items[i + 1];
                const char *val, *why;
                struct kv *a;

                if (k->type != MNODE_SCALAR || k->kind == MSCALAR_NULL ||
                    mnode_get(n, k->text) != v)
                        continue; /* reported by mget_map */
                mpath_key(p, sizeof(p), "metadata.annotations", k->text);
                why = manifest_label_key_problem(k->text);
                if (why) {
                        mctx_err(c, k, p, "invalid annotation key \"%s\": %s", k->text, why);
                        continue;
                }
                val = mget_string(c, v, p);
                if (!val)
                        continue;
                total += strlen(k->text) + strlen(val);
                if (total > ANNOTATIONS_MAX_BYTES) {
                        mctx_err(c, v, "metadata.annotations",
                                 "annotations hold more than %d bytes: keep less here",
                                 ANNOTATIONS_MAX_BYTES);
                        return;
                }
                a = realloc(*ret, (*ret_n + 1) * sizeof(**ret));
                if (!a) {
                        c->oom = true;
                        return;
                }
                *ret = a;
                a[*ret_n] = (struct kv){strdup(k->text), strdup(val)};
                if (!a[*ret_n].key || !a[*ret_n].value) {
                        free(a[*ret_n].key);
                        free(a[*ret_n].value);
                        c->oom = true;
                        return;
                }
                (*ret_n)++;
        }
}

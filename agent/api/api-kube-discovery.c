/* SPDX-License-Identifier: MIT */
/* Discovery documents: /version, /api (no core group here), /apis, /apis/forklet.dev and the
 * APIResourceList of forklet.dev/v1alpha1 (sessions and their subresources). */
#include "agent/api/api-internal.h"
#include "common/cleanup.h"
#include "common/util.h"
#include "manifest/manifest.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef FORKLET_VERSION
#define FORKLET_VERSION "0.0.0"
#endif

#define GROUP "forklet.dev"
#define GV    "forklet.dev/v1alpha1"

json_t *api_kube_version_json(void)
{
        unsigned major = 0, minor = 0;

        sscanf(FORKLET_VERSION, "%u.%u", &major, &minor);
        char smajor[16], sminor[16];
        snprintf(smajor, sizeof(smajor), "%u", major);
        snprintf(sminor, sizeof(sminor), "%u", minor);
        return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "version", FORKLET_VERSION,
                         "apiVersion", MANIFEST_API_VERSION, "major", smajor, "minor", sminor,
                         "gitVersion", "v" FORKLET_VERSION "+forklet", "platform", "linux/amd64",
                         "compiler", "gc", "goVersion", "none (forkletd is C)");
}

static json_t *group_json(void)
{
        return json_pack("{s:s, s:[{s:s, s:s}], s:{s:s, s:s}}", "name", GROUP, "versions",
                         "groupVersion", GV, "version", "v1alpha1", "preferredVersion",
                         "groupVersion", GV, "version", "v1alpha1");
}

/* The subresources forklet serves under .../sessions/NAME/ and what they do (docs). */
static const struct {
        const char *name, *kind;
        const char *verbs[4];
} subresources[] = {
        {"status", "Session", {"get"}},
        {"checkpoints", "Checkpoint", {"create", "get", "list", "delete"}},
        {"forks", "Session", {"create"}},
        {"rollback", "Session", {"create"}},
        {"snapshots", "Snapshot", {"create"}},
        {"restore", "Session", {"create"}},
        {"exec", "Exec", {"create"}},
        {"portforward", "PortForward", {"create", "get"}},
        {"log", "Log", {"get"}},
        {"files", "File", {"get", "update"}},
        {"pause", "Session", {"create"}},
        {"resume", "Session", {"create"}},
        {"stop", "Session", {"create"}},
        {"start", "Session", {"create"}},
};

static json_t *verbs(const char *const *v, size_t max)
{
        json_t *a = json_array();

        for (size_t i = 0; a && i < max && v[i]; i++)
                json_array_append_new(a, json_string(v[i]));
        return a;
}

static json_t *resources_json(void)
{
        static const char *const session_verbs[] = {"create", "delete", "get",   "list",
                                                    "patch",  "update", "watch", NULL};
        json_t *res = json_array();

        if (!res)
                return NULL;
        json_array_append_new(res, json_pack("{s:s, s:s, s:b, s:s, s:o, s:[s], s:[s]}", "name",
                                             "sessions", "singularName", "session", "namespaced", 1,
                                             "kind", "Session", "verbs", verbs(session_verbs, 8),
                                             "shortNames", "sess", "categories", "forklet"));
        for (size_t i = 0; i < ARRAY_SIZE(subresources); i++) {
                char name[64];

                snprintf(name, sizeof(name), "sessions/%s", subresources[i].name);
                json_array_append_new(res, json_pack("{s:s, s:s, s:b, s:s, s:o}", "name", name,
                                                     "singularName", "", "namespaced", 1, "kind",
                                                     subresources[i].kind, "verbs",
                                                     verbs(subresources[i].verbs, 4)));
        }
        return json_pack("{s:s, s:s, s:s, s:o}", "kind", "APIResourceList", "apiVersion", "v1",
                         "groupVersion", GV, "resources", res);
}

json_t *api_kube_discovery_json(enum api_kube_path p)
{
        json_t *g;

        switch (p) {
        case API_KUBE_VERSION:
                return api_kube_version_json();
        case API_KUBE_API:
                /* forklet has no core ("") group: an empty version list */
                return json_pack("{s:s, s:[], s:[]}", "kind", "APIVersions", "versions",
                                 "serverAddressByClientCIDRs");
        case API_KUBE_APIS:
                return json_pack("{s:s, s:s, s:[o]}", "kind", "APIGroupList", "apiVersion", "v1",
                                 "groups", group_json());
        case API_KUBE_GROUP:
                g = group_json();
                if (g) {
                        json_object_set_new(g, "kind", json_string("APIGroup"));
                        json_object_set_new(g, "apiVersion", json_string("v1"));
                }
                return g;
        case API_KUBE_RESOURCES:
                return resources_json();
        default:
                return NULL;
        }
}

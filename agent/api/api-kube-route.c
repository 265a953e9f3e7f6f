/* SPDX-License-Identifier: MIT */
/* Pure: which Kubernetes-convention path a split URL is (discovery, OpenAPI, the sessions
 * resource of forklet.dev/v1alpha1 and its subresources). */
#include "agent/api/api.h"
#include "manifest/manifest.h"

#include <string.h>

#define GROUP   "forklet.dev"
#define VERSION "v1alpha1"

static bool is(const char *seg, const char *s)
{
        return strcmp(seg, s) == 0;
}

static bool kube(struct api_route *r, enum api_kube_path p)
{
        r->kind = API_ROUTE_KUBE;
        r->kube = p;
        return true;
}

/* seg[0..2] = apis forklet.dev v1alpha1; the rest names sessions. */
static bool route_resource(char seg[][API_PATH_SEGMENT_MAX], size_t n, struct api_route *r)
{
        if (n == 3)
                return kube(r, API_KUBE_RESOURCES);
        if (n == 4 && is(seg[3], "sessions"))
                return kube(r, API_KUBE_SESSIONS);
        if (n < 6 || !is(seg[3], "namespaces") || !is(seg[5], "sessions"))
                return false;
        /* the same layout as /api/v1alpha1 one segment further on */
        api_route_session(seg + 1, n - 1, r);
        if (r->kind == API_ROUTE_BAD_NAME)
                return true;
        if (n == 6)
                return kube(r, API_KUBE_NS_SESSIONS);
        if (n == 7)
                return kube(r, API_KUBE_SESSION);
        if (n == 8 && is(seg[7], "status"))
                return kube(r, API_KUBE_STATUS);
        return true; /* another subresource: served as under /api/v1alpha1 */
}

bool api_kube_route(char seg[][API_PATH_SEGMENT_MAX], size_t n, struct api_route *r)
{
        if (n == 1 && is(seg[0], "version"))
                return kube(r, API_KUBE_VERSION);
        if (n == 1 && is(seg[0], "api"))
                return kube(r, API_KUBE_API);
        if (n >= 1 && is(seg[0], "apis")) {
                if (n == 1)
                        return kube(r, API_KUBE_APIS);
                if (!is(seg[1], GROUP))
                        return false;
                if (n == 2)
                        return kube(r, API_KUBE_GROUP);
                return is(seg[2], VERSION) && route_resource(seg, n, r);
        }
        if (n >= 2 && is(seg[0], "openapi") && is(seg[1], "v3")) {
                if (n == 2)
                        return kube(r, API_KUBE_OPENAPI);
                if (n == 5 && is(seg[2], "apis") && is(seg[3], GROUP) && is(seg[4], VERSION))
                        return kube(r, API_KUBE_OPENAPI_GV);
        }
        return false;
}

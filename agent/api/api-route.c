/* SPDX-License-Identifier: MIT */
/* Pure pieces of the API: URL path -> route. */
#include "agent/api/api.h"
#include "manifest/manifest.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define API_MAX_SEGMENTS 9

/* Splits path on '/', rejecting empty segments (//) except a trailing slash. */
static int split_path(const char *path, char seg[][API_PATH_SEGMENT_MAX], size_t *ret_n)
{
        size_t n = 0;

        if (path[0] != '/')
                return -EINVAL;
        for (const char *p = path + 1; *p;) {
                const char *e = strchrnul(p, '/');
                size_t len = (size_t)(e - p);

                if (len == 0 || len >= API_PATH_SEGMENT_MAX || n == API_MAX_SEGMENTS)
                        return -EINVAL;
                memcpy(seg[n], p, len);
                seg[n++][len] = '\0';
                p = *e ? e + 1 : e;
        }
        *ret_n = n;
        return 0;
}

void api_route_session(char seg[][API_PATH_SEGMENT_MAX], size_t n, struct api_route *r)
{
        /* seg: api v1alpha1 namespaces NS sessions [NAME [SUB]] */
        if (!manifest_name_is_valid(seg[3])) {
                r->kind = API_ROUTE_BAD_NAME;
                return;
        }
        strcpy(r->ns, seg[3]);
        if (n == 5) {
                r->kind = API_ROUTE_NS_SESSIONS;
                return;
        }
        if (!manifest_name_is_valid(seg[5])) {
                r->kind = API_ROUTE_BAD_NAME;
                return;
        }
        strcpy(r->name, seg[5]);
        if (n == 6) {
                r->kind = API_ROUTE_SESSION;
                return;
        }
        strcpy(r->subresource, seg[6]);
        if (n == 8) {
                strcpy(r->item, seg[7]);
                r->kind = strcmp(seg[6], "checkpoints") == 0 ? API_ROUTE_SESSION_FORK
                                                             : API_ROUTE_NOT_FOUND;
                return;
        }
        if (strcmp(seg[6], "checkpoints") == 0 || strcmp(seg[6], "forks") == 0 ||
            strcmp(seg[6], "rollback") == 0 || strcmp(seg[6], "snapshots") == 0 ||
            strcmp(seg[6], "restore") == 0)
                r->kind = API_ROUTE_SESSION_FORK;
        else if (strcmp(seg[6], "exec") == 0)
                r->kind = API_ROUTE_SESSION_EXEC;
        else if (strcmp(seg[6], "log") == 0)
                r->kind = API_ROUTE_SESSION_LOG;
        else if (strcmp(seg[6], "files") == 0)
                r->kind = API_ROUTE_SESSION_FILES;
        else if (!strcmp(seg[6], "pause") || !strcmp(seg[6], "resume") || !strcmp(seg[6], "stop") ||
                 !strcmp(seg[6], "start"))
                r->kind = API_ROUTE_SESSION_ACTION;
        else
                r->kind = API_ROUTE_SESSION_SUBRES;
}

void api_route_parse(const char *path, struct api_route *ret)
{
        char seg[API_MAX_SEGMENTS][API_PATH_SEGMENT_MAX];
        struct api_route r = {.kind = API_ROUTE_NOT_FOUND};
        size_t n = 0;

        if (!path || split_path(path, seg, &n) < 0) {
                *ret = r;
                return;
        }
        if (n == 1 && strcmp(seg[0], "healthz") == 0)
                r.kind = API_ROUTE_HEALTHZ;
        else if (api_kube_route(seg, n, &r))
                ; /* Kubernetes conventions: api-kube-route.c */
        else if (n == 1 && strcmp(seg[0], "metrics") == 0)
                r.kind = API_ROUTE_METRICS;
        else if (n >= 3 && strcmp(seg[0], "api") == 0 && strcmp(seg[1], "v1alpha1") == 0) {
                if (n == 3 && strcmp(seg[2], "sessions") == 0)
                        r.kind = API_ROUTE_SESSIONS;
                else if (n == 3 && strcmp(seg[2], "node") == 0)
                        r.kind = API_ROUTE_NODE;
                else if ((n == 3 || n == 4) && strcmp(seg[2], "images") == 0) {
                        r.kind = API_ROUTE_IMAGES;
                        if (n == 4)
                                strcpy(r.item, seg[3]);
                } else if (n == 4 && strcmp(seg[2], "audit") == 0 && strcmp(seg[3], "verify") == 0)
                        r.kind = API_ROUTE_AUDIT_VERIFY;
                else if (n >= 5 && n <= 8 && strcmp(seg[2], "namespaces") == 0 &&
                         strcmp(seg[4], "sessions") == 0)
                        api_route_session(seg, n, &r);
                else if ((n == 5 || n == 6) && strcmp(seg[2], "namespaces") == 0 &&
                         strcmp(seg[4], "snapshots") == 0) {
                        r.kind = manifest_name_is_valid(seg[3]) ? API_ROUTE_SNAPSHOTS
                                                                : API_ROUTE_BAD_NAME;
                        strcpy(r.ns, seg[3]);
                        if (n == 6)
                                strcpy(r.item, seg[5]);
                }
        }
        *ret = r;
}

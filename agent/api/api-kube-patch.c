/* SPDX-License-Identifier: MIT */
/* JSON merge patch (RFC 7386): objects merge key by key, null removes a key, anything else
 * (arrays included) replaces the target's value. */
#include "agent/api/api-internal.h"

#include <jansson.h>

json_t *api_kube_merge_patch(const json_t *target, const json_t *patch)
{
        json_t *out;
        const char *k;
        json_t *v;

        if (!json_is_object(patch))
                return json_deep_copy(patch);
        out = json_is_object(target) ? json_deep_copy(target) : json_object();
        if (!out)
                return NULL;
        json_object_foreach((json_t *)patch, k, v)
        {
                json_t *merged;

                if (json_is_null(v)) {
                        json_object_del(out, k);
                        continue;
                }
                merged = api_kube_merge_patch(json_object_get(out, k), v);
                if (!merged || json_object_set_new(out, k, merged) < 0) {
                        json_decref(out);
                        return NULL;
                }
        }
        return out;
}

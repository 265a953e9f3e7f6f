/* SPDX-License-Identifier: MIT */
/* NodeConfig sections about guests that die or stall: health (liveness probes) and
 * diskPressure (a VM stopped by a disk write error). */
#include "manifest/node/node-internal.h"

#include <stdbool.h>
#include <string.h>

static const char *const health_fields[] = {"livenessIntervalSeconds", "failureThreshold", NULL};
static const char *const disk_fields[] = {"resume", "minFreeMiB", NULL};

static const struct mnode *opt(const struct mnode *map, const char *key)
{
        const struct mnode *v = mnode_get(map, key);

        return v && !mnode_is_null(v) ? v : NULL;
}

void node_config_decode_health(struct mctx *c, const struct mnode *v, struct node_config *cfg)
{
        const struct mnode *f;
        uint64_t x;

        if (!mget_map(c, v, "health", health_fields))
                return;
        if ((f = opt(v, "livenessIntervalSeconds")) &&
            mget_uint(c, f, "health.livenessIntervalSeconds", 0, 3600, &x))
                cfg->liveness_interval_s = (unsigned)x;
        if ((f = opt(v, "failureThreshold")) &&
            mget_uint(c, f, "health.failureThreshold", 1, 100, &x))
                cfg->liveness_failure_threshold = (unsigned)x;
}

void node_config_decode_disk_pressure(struct mctx *c, const struct mnode *v,
                                      struct node_config *cfg)
{
        static const char *const modes[] = {"auto", "manual"};
        const struct mnode *f;
        const char *s;
        uint64_t x;

        if (!mget_map(c, v, "diskPressure", disk_fields))
                return;
        if ((f = opt(v, "resume")) && (s = mget_string(c, f, "diskPressure.resume"))) {
                if (strcmp(s, "auto") == 0 || strcmp(s, "manual") == 0)
                        cfg->disk_pressure_auto_resume = strcmp(s, "auto") == 0;
                else
                        mctx_err_unknown(c, f, "diskPressure.resume", "resume mode", s, modes, 2);
        }
        if ((f = opt(v, "minFreeMiB")) &&
            mget_uint(c, f, "diskPressure.minFreeMiB", 1, 1u << 20, &x))
                cfg->disk_pressure_min_free_mib = (unsigned)x;
}

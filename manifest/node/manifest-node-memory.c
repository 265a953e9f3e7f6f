/* SPDX-License-Identifier: MIT */
/* NodeConfig memoryGiveBack: when forkletd takes a booted guest's free memory back from its RAM
 * file through the balloon (agent/give-back.c). */
#include "manifest/node/node-internal.h"

#include <stdbool.h>

static const char *const fields[] = {"enabled", "intervalSeconds", "thresholdMiB", "marginMiB",
                                     NULL};

static const struct mnode *opt(const struct mnode *map, const char *key)
{
        const struct mnode *v = mnode_get(map, key);

        return v && !mnode_is_null(v) ? v : NULL;
}

void node_config_decode_give_back(struct mctx *c, const struct mnode *v, struct node_config *cfg)
{
        const struct mnode *f;
        uint64_t x;

        if (!mget_map(c, v, "memoryGiveBack", fields))
                return;
        if ((f = opt(v, "enabled"))) {
                if (f->type != MNODE_SCALAR || f->kind != MSCALAR_BOOL)
                        mctx_err(c, f, "memoryGiveBack.enabled", "must be true or false, got %s",
                                 mnode_type_name(f));
                else
                        cfg->give_back_enabled = f->text[0] == 't' || f->text[0] == 'T';
        }
        if ((f = opt(v, "intervalSeconds")) &&
            mget_uint(c, f, "memoryGiveBack.intervalSeconds", 0, 86400, &x))
                cfg->give_back_interval_s = (unsigned)x;
        if ((f = opt(v, "thresholdMiB")) &&
            mget_uint(c, f, "memoryGiveBack.thresholdMiB", 1, 1u << 20, &x))
                cfg->give_back_threshold_mib = (unsigned)x;
        if ((f = opt(v, "marginMiB")) &&
            mget_uint(c, f, "memoryGiveBack.marginMiB", 0, 1u << 20, &x))
                cfg->give_back_margin_mib = (unsigned)x;
}

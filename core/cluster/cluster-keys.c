/* SPDX-License-Identifier: MIT */
/* The etcd key layout of cluster mode (see core.h): building and classifying keys. Pure. */
#include "core/cluster/cluster.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <errno.h>
#include <string.h>

static bool copy_segment(const char *s, size_t len, char *out)
{
        if (len == 0 || len >= CORE_CLUSTER_NAME_MAX || memchr(s, '/', len))
                return false;
        memcpy(out, s, len);
        out[len] = '\0';
        return true;
}

/* Splits rest into up to 4 '/'-separated segments; returns how many. */
static size_t split(const char *rest, const char *seg[4], size_t len[4])
{
        size_t n = 0;

        while (n < 4) {
                const char *slash = strchr(rest, '/');

                seg[n] = rest;
                len[n] = slash ? (size_t)(slash - rest) : strlen(rest);
                n++;
                if (!slash)
                        return n;
                rest = slash + 1;
        }
        return 5; /* too many */
}

static enum core_cluster_key_kind leaf_kind(const char *s, size_t len, bool session)
{
        static const struct {
                const char *leaf;
                bool session;
                enum core_cluster_key_kind kind;
        } t[] = {
                {"status", false, CORE_CLUSTER_KEY_NODE_STATUS},
                {"lease", false, CORE_CLUSTER_KEY_NODE_LEASE},
                {"spec", true, CORE_CLUSTER_KEY_SESSION_SPEC},
                {"node", true, CORE_CLUSTER_KEY_SESSION_NODE},
                {"status", true, CORE_CLUSTER_KEY_SESSION_STATUS},
        };

        for (size_t i = 0; i < ARRAY_SIZE(t); i++)
                if (t[i].session == session && strlen(t[i].leaf) == len &&
                    memcmp(t[i].leaf, s, len) == 0)
                        return t[i].kind;
        return CORE_CLUSTER_KEY_OTHER;
}

void core_cluster_key_parse(const char *prefix, const char *key, struct core_cluster_key *ret)
{
        size_t plen = strlen(prefix), len[4];
        const char *seg[4];
        size_t n;

        *ret = (struct core_cluster_key){.kind = CORE_CLUSTER_KEY_OTHER};
        if (strncmp(key, prefix, plen) != 0 || key[plen] != '/')
                return;
        n = split(key + plen + 1, seg, len);
        if (n == 3 && len[0] == 5 && memcmp(seg[0], "nodes", 5) == 0 &&
            copy_segment(seg[1], len[1], ret->name))
                ret->kind = leaf_kind(seg[2], len[2], false);
        else if (n == 4 && len[0] == 8 && memcmp(seg[0], "sessions", 8) == 0 &&
                 copy_segment(seg[1], len[1], ret->ns) && copy_segment(seg[2], len[2], ret->name))
                ret->kind = leaf_kind(seg[3], len[3], true);
        if (ret->kind == CORE_CLUSTER_KEY_OTHER)
                *ret = (struct core_cluster_key){.kind = CORE_CLUSTER_KEY_OTHER};
}

int core_cluster_session_key(const char *prefix, const char *ns, const char *name, const char *leaf,
                             char **ret)
{
        return fk_asprintf(ret, "%s/sessions/%s/%s/%s", prefix, ns, name, leaf);
}

int core_cluster_node_key(const char *prefix, const char *node, const char *leaf, char **ret)
{
        return fk_asprintf(ret, "%s/nodes/%s/%s", prefix, node, leaf);
}

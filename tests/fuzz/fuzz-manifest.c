/* SPDX-License-Identifier: MIT */
/* libFuzzer target: any input through the Session and NodeConfig parsers; accepted Sessions
 * must survive struct -> JSON -> struct, JSON -> YAML -> struct and copy unchanged. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "manifest/manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_roundtrip(const struct session_manifest *m, const struct node_config *cfg)
{
        struct session_manifest *back = NULL, **v = NULL;
        struct manifest_diag d = {0};
        json_t *j = session_manifest_to_json(m);
        char *yaml = NULL;
        size_t n = 0;

        if (!j)
                abort();
        if (session_manifest_from_json(j, cfg, &back, &d) < 0 || !session_manifest_equal(m, back))
                abort();
        session_manifest_free(back);
        if (manifest_json_to_yaml(j, &yaml) < 0)
                abort();
        if (manifest_parse_sessions(yaml, strlen(yaml), "<yaml>", cfg, &v, &n, &d) < 0 || n != 1 ||
            !session_manifest_equal(m, v[0]))
                abort();
        session_manifest_free(v[0]);
        free(v);
        free(yaml);
        if (session_manifest_copy(m, &back) < 0 || !session_manifest_equal(m, back))
                abort();
        session_manifest_free(back);
        json_decref(j);
        manifest_diag_done(&d);
}

static void sessions(const uint8_t *data, size_t size, const struct node_config *cfg)
{
        struct session_manifest **v = NULL;
        struct manifest_diag d = {0};
        size_t n = 0;

        if (manifest_parse_sessions((const char *)data, size, "fuzz.yaml", cfg, &v, &n, &d) == 0) {
                if (d.n != 0)
                        abort();
                for (size_t i = 0; i < n; i++) {
                        check_roundtrip(v[i], cfg);
                        session_manifest_free(v[i]);
                }
                free(v);
        } else if (d.n == 0) {
                abort(); /* a rejected input must say why */
        }
        manifest_diag_done(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static struct node_config *def;
        struct node_config *cfg = NULL;
        struct manifest_diag d = {0};

        if (!def && node_config_default(&def) < 0)
                abort();
        sessions(data, size, NULL);
        sessions(data, size, def);
        if (node_config_parse((const char *)data, size, "/etc/forklet/node.yaml", &cfg, &d) == 0)
                sessions(data, size, cfg);
        node_config_free(cfg);
        manifest_diag_done(&d);
        return 0;
}

/* SPDX-License-Identifier: MIT */
/* NodeConfig: built-in defaults, decoding and validation (relative paths resolve against the
 * config file's directory), and lookups of size classes and images. */
#include "manifest/node/node-internal.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct node_config *node_config_free(struct node_config *c)
{
        if (!c)
                return NULL;
        free(c->node_name);
        free(c->state_dir);
        free(c->run_dir);
        free(c->manifest_dir);
        free(c->api_socket);
        free(c->api_listen);
        free(c->api_token_file);
        free(c->api_tls_cert);
        free(c->api_tls_key);
        free(c->api_tls_client_ca);
        free(c->api_url);
        free(c->uplink_pool);
        free(c->uplink_interface);
        fk_strv_free(c->dns);
        free(c->cgroup_parent);
        for (size_t i = 0; i < c->n_size_classes; i++)
                free(c->size_classes[i].name);
        free(c->size_classes);
        for (size_t i = 0; i < c->n_images; i++) {
                free(c->images[i].name);
                free(c->images[i].dir);
        }
        free(c->images);
        node_config_registries_free(c);
        fk_strv_free(c->etcd);
        fk_strv_free(c->mint_command);
        fk_strv_free(c->secret_file_dirs);
        free(c->etcd_prefix);
        for (size_t i = 0; i < c->n_labels; i++) {
                free(c->labels[i].key);
                free(c->labels[i].value);
        }
        free(c->labels);
        free(c->source);
        free(c);
        return NULL;
}

const struct size_class *node_config_find_size_class(const struct node_config *c, const char *n)
{
        for (size_t i = 0; c && n && i < c->n_size_classes; i++)
                if (strcmp(c->size_classes[i].name, n) == 0)
                        return &c->size_classes[i];
        return NULL;
}

const struct image_spec *node_config_find_image(const struct node_config *c, const char *n)
{
        for (size_t i = 0; c && n && i < c->n_images; i++)
                if (strcmp(c->images[i].name, n) == 0)
                        return &c->images[i];
        return NULL;
}

/* Lexically normalizes an absolute path in place: drops "." and "" parts, applies "..". */
static void path_normalize(char *p)
{
        char *out = p, *in = p;

        while (*in) {
                char *seg;
                size_t len;

                while (*in == '/')
                        in++;
                seg = in;
                while (*in && *in != '/')
                        in++;
                len = (size_t)(in - seg);
                if (len == 0 || (len == 1 && seg[0] == '.'))
                        continue;
                if (len == 2 && seg[0] == '.' && seg[1] == '.') {
                        while (out > p && *--out != '/')
                                ;
                        continue;
                }
                *out++ = '/';
                memmove(out, seg, len);
                out += len;
        }
        if (out == p)
                *out++ = '/';
        *out = 0;
}

/* Resolves p against base_dir (itself made absolute against the cwd). */
int manifest_resolve_path(const char *base_dir, const char *p, char **ret)
{
        cleanup_free char *cwd = NULL;
        char *s = NULL;
        int r;

        if (p[0] == '/') {
                s = strdup(p);
                r = s ? 0 : -ENOMEM;
        } else if (base_dir && base_dir[0] == '/') {
                r = fk_asprintf(&s, "%s/%s", base_dir, p);
        } else {
                cwd = getcwd(NULL, 0);
                if (!cwd)
                        return -errno;
                r = fk_asprintf(&s, "%s/%s/%s", cwd, base_dir ? base_dir : ".", p);
        }
        if (r < 0)
                return r;
        path_normalize(s);
        *ret = s;
        return 0;
}

int node_config_init_defaults(struct node_config *c)
{
        char host[HOST_NAME_MAX + 1] = "";

        if (gethostname(host, sizeof(host) - 1) < 0 || !host[0])
                snprintf(host, sizeof(host), "localhost");
        c->node_name = strdup(host);
        c->state_dir = strdup("/var/lib/forklet");
        c->run_dir = strdup("/run/forklet");
        c->accel = ACCEL_AUTO;
        c->manifest_dir = strdup("/etc/forklet/sessions");
        c->uplink_pool = strdup("198.18.0.0/16");
        c->uplink_interface = strdup("");
        c->dns = calloc(1, sizeof(char *));
        c->cgroup_parent = strdup("forklet");
        c->reserve_memory_mib = 1024;
        c->max_sessions = 64;
        c->dns_min_ttl_s = 30;
        c->max_forks_per_session = 32;
        c->cpu_overcommit_percent = 400;
        c->qemu_overhead_mib = 128;
        c->fork_memory_percent = 25;
        c->jail_uid_base = 200000;
        c->jail_uid_count = 65536;
        c->drop_capabilities = true;
        c->liveness_interval_s = 15;
        c->liveness_failure_threshold = 4;
        c->disk_pressure_auto_resume = true;
        c->disk_pressure_min_free_mib = 64;
        c->give_back_enabled = true;
        c->give_back_interval_s = 30;
        c->give_back_threshold_mib = 32;
        c->give_back_margin_mib = 16;
        c->etcd = calloc(1, sizeof(char *));
        c->etcd_prefix = strdup("/forklet");
        c->release_pending_s = 30;
        if (fk_strv_push(&c->secret_file_dirs, "/etc/forklet/secrets") < 0)
                return -ENOMEM;
        if (!c->node_name || !c->state_dir || !c->run_dir || !c->manifest_dir || !c->uplink_pool ||
            !c->uplink_interface || !c->dns || !c->cgroup_parent || !c->etcd || !c->etcd_prefix)
                return -ENOMEM;
        return 0;
}

/* Fills what depends on other fields (api socket, default class and image). */
int node_config_finish(struct node_config *c)
{
        if (!c->api_socket && fk_asprintf(&c->api_socket, "%s/api.sock", c->run_dir) < 0)
                return -ENOMEM;
        if (!c->size_classes) {
                c->size_classes = calloc(1, sizeof(*c->size_classes));
                if (!c->size_classes)
                        return -ENOMEM;
                c->size_classes[0] = (struct size_class){.name = strdup("small"),
                                                         .vcpus = 1,
                                                         .memory_mib = 256,
                                                         .cpu = 1.0,
                                                         .pids = 1024};
                c->n_size_classes = 1;
                if (!c->size_classes[0].name)
                        return -ENOMEM;
        }
        return c->images ? 0 : node_config_default_images(c);
}

int node_config_default(struct node_config **ret)
{
        struct node_config *c = calloc(1, sizeof(*c));

        if (!c)
                return -ENOMEM;
        if (node_config_init_defaults(c) < 0 || node_config_finish(c) < 0 ||
            !(c->source = strdup("<default>"))) {
                node_config_free(c);
                return -ENOMEM;
        }
        *ret = c;
        return 0;
}

static const char *const accel_names[_ACCEL_MAX] = {"auto", "kvm", "tcg"};

const char *accel_mode_to_string(enum accel_mode a)
{
        return a >= 0 && a < _ACCEL_MAX ? accel_names[a] : NULL;
}

enum accel_mode accel_mode_from_string(const char *s)
{
        for (int i = 0; s && i < _ACCEL_MAX; i++)
                if (strcmp(accel_names[i], s) == 0)
                        return (enum accel_mode)i;
        return _ACCEL_INVALID;
}

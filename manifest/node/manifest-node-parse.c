/* SPDX-License-Identifier: MIT */
/* Decodes and validates a NodeConfig document (every problem reported as FILE:LINE:COL), and
 * the buffer/file entry points. */
#include "manifest/node/node-internal.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <errno.h>
#include <libgen.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static const char *const top_fields[] = {
        "apiVersion",  "kind",         "nodeName",   "stateDir",       "runDir",      "accel",
        "manifestDir", "api",          "network",    "cgroupParent",   "sizeClasses", "images",
        "capacity",    "controlPlane", "labels",     "jail",           "secrets",     "hardening",
        "health",      "diskPressure", "registries", "memoryGiveBack", NULL};
static const char *const api_fields[] = {"socket", "listen", "tokenFile",   "tlsCert",
                                         "tlsKey", "url",    "tlsClientCA", NULL};
static const char *const net_fields[] = {"uplinkPool", "uplinkInterface", "dns", "dnsMinTTL", NULL};
static const char *const class_fields[] = {"name", "vcpus",    "memoryMiB", "cpu",
                                           "pids", "ioWeight", "diskMiB",   NULL};
static const char *const image_fields[] = {"name", "dir", NULL};
static const char *const cap_fields[] = {"reserveMemoryMiB",
                                         "maxSessions",
                                         "maxForksPerSession",
                                         "cpuOvercommitPercent",
                                         "qemuOverheadMiB",
                                         "forkMemoryPercent",
                                         NULL};
static const char *const jail_fields[] = {"uidBase", "uidCount", NULL};
static const char *const hardening_fields[] = {"dropCapabilities", NULL};
static const char *const cp_fields[] = {"etcd", "prefix", "releasePendingAfterSeconds", NULL};
static const char *const secrets_fields[] = {"mintCommand", "fileDirs", NULL};

struct nctx {
        struct mctx *c;
        const char *base_dir; /* config file's directory */
        struct node_config *cfg;
};

static const struct mnode *opt(const struct mnode *map, const char *key)
{
        const struct mnode *v = mnode_get(map, key);

        return v && !mnode_is_null(v) ? v : NULL;
}

/* An optional string field; returns the node when present and a string. */
static const char *opt_string(struct mctx *c, const struct mnode *map, const char *path,
                              const char *key, const struct mnode **ret_node)
{
        const struct mnode *v = opt(map, key);
        char p[MPATH_MAX];

        *ret_node = v;
        return v ? mget_string(c, v, mpath_key(p, sizeof(p), path, key)) : NULL;
}

static void decode_path(struct nctx *n, const struct mnode *map, const char *path, const char *key,
                        char **ret)
{
        const struct mnode *v;
        const char *s = opt_string(n->c, map, path, key, &v);
        char p[MPATH_MAX];
        char *r = NULL;

        if (!s)
                return;
        if (!*s) {
                mctx_err(n->c, v, mpath_key(p, sizeof(p), path, key), "path must not be empty");
                return;
        }
        if (manifest_resolve_path(n->base_dir, s, &r) < 0) {
                n->c->oom = true;
                return;
        }
        free(*ret);
        *ret = r;
}

/* An IP address (prefix_full: no /len) with or without a port, per the flags. */
static bool check_addr(struct mctx *c, const struct mnode *v, const char *path, const char *s,
                       bool want_port, int want_family, bool allow_prefix)
{
        struct egress_rule r = {0};
        struct fk_error e = {0};
        bool ok;

        if (manifest_egress_parse(s, &r, &e) < 0) {
                if (e.code == -ENOMEM)
                        return c->oom = true, false;
                mctx_err(c, v, path, "invalid address \"%s\": %s", s, e.msg);
                return false;
        }
        ok = r.kind == EGRESS_CIDR && (!want_port == !r.port) &&
             (!want_family || r.family == want_family) &&
             (allow_prefix || r.prefix_len == (r.family == AF_INET ? 32 : 128)) &&
             (!allow_prefix || strchr(s, '/'));
        egress_rule_done(&r);
        if (!ok)
                mctx_err(c, v, path, "invalid address \"%s\": expected %s", s,
                         want_port      ? "an IP address and port, as in 127.0.0.1:8080"
                         : allow_prefix ? "an IPv4 CIDR, as in 198.18.0.0/16"
                                        : "an IP address");
        return ok;
}

static void decode_strings(struct mctx *c, const struct mnode *seq, const char *path, bool addrs,
                           char ***ret)
{
        char p[MPATH_MAX];

        if (!mget_seq(c, seq, path))
                return;
        for (size_t i = 0; i < seq->n_items; i++) {
                const char *s = mget_string(c, seq->items[i], mpath_idx(p, sizeof(p), path, i));

                if (!s)
                        continue;
                if (addrs && !check_addr(c, seq->items[i], p, s, false, 0, false))
                        continue;
                if (!addrs && strncmp(s, "http://", 7) != 0 && strncmp(s, "https://", 8) != 0) {
                        mctx_err(c, seq->items[i], p,
                                 "invalid etcd endpoint \"%s\": expected an http:// or "
                                 "https:// URL",
                                 s);
                        continue;
                }
                if (fk_strv_push(ret, s) < 0)
                        c->oom = true;
        }
}

static void decode_api(struct nctx *n, const struct mnode *v)
{
        const struct mnode *l;
        const char *s;

        if (!mget_map(n->c, v, "api", api_fields))
                return;
        decode_path(n, v, "api", "socket", &n->cfg->api_socket);
        decode_path(n, v, "api", "tokenFile", &n->cfg->api_token_file);
        decode_path(n, v, "api", "tlsCert", &n->cfg->api_tls_cert);
        decode_path(n, v, "api", "tlsKey", &n->cfg->api_tls_key);
        decode_path(n, v, "api", "tlsClientCA", &n->cfg->api_tls_client_ca);
        s = opt_string(n->c, v, "api", "listen", &l);
        if (s && check_addr(n->c, l, "api.listen", s, true, AF_INET, false))
                mstrdup(n->c, s, &n->cfg->api_listen);
        s = opt_string(n->c, v, "api", "url", &l);
        if (s)
                mstrdup(n->c, s, &n->cfg->api_url);
}

static void decode_network(struct nctx *n, const struct mnode *v)
{
        const struct mnode *f;
        const char *s;
        uint64_t x;

        if (!mget_map(n->c, v, "network", net_fields))
                return;
        s = opt_string(n->c, v, "network", "uplinkPool", &f);
        if (s && check_addr(n->c, f, "network.uplinkPool", s, false, AF_INET, true))
                mstrdup(n->c, s, &n->cfg->uplink_pool);
        s = opt_string(n->c, v, "network", "uplinkInterface", &f);
        if (s && (strlen(s) >= IFNAMSIZ || strpbrk(s, "/: \t\n")))
                mctx_err(n->c, f, "network.uplinkInterface",
                         "invalid interface name \"%s\" (at most %d characters, no '/', ':' or "
                         "spaces)",
                         s, IFNAMSIZ - 1);
        else if (s)
                mstrdup(n->c, s, &n->cfg->uplink_interface);
        if ((f = opt(v, "dns")))
                decode_strings(n->c, f, "network.dns", true, &n->cfg->dns);
        if ((f = opt(v, "dnsMinTTL")) && mget_uint(n->c, f, "network.dnsMinTTL", 1, 86400, &x))
                n->cfg->dns_min_ttl_s = (unsigned)x;
}

static void decode_capacity(struct nctx *n, const struct mnode *v)
{
        static const struct {
                const char *key;
                uint64_t min, max;
                size_t off;
        } fields[] = {
                {"reserveMemoryMiB", 0, 1u << 30, offsetof(struct node_config, reserve_memory_mib)},
                {"maxSessions", 1, 100000, offsetof(struct node_config, max_sessions)},
                {"maxForksPerSession", 0, 1024,
                 offsetof(struct node_config, max_forks_per_session)},
                {"cpuOvercommitPercent", 10, 10000,
                 offsetof(struct node_config, cpu_overcommit_percent)},
                {"qemuOverheadMiB", 0, 1u << 20, offsetof(struct node_config, qemu_overhead_mib)},
                {"forkMemoryPercent", 0, 100, offsetof(struct node_config, fork_memory_percent)},
        };
        char p[MPATH_MAX];

        if (!mget_map(n->c, v, "capacity", cap_fields))
                return;
        for (size_t i = 0; i < ARRAY_SIZE(fields); i++) {
                const struct mnode *f = opt(v, fields[i].key);
                uint64_t x;

                if (f && mget_uint(n->c, f, mpath_key(p, sizeof(p), "capacity", fields[i].key),
                                   fields[i].min, fields[i].max, &x))
                        *(unsigned *)((char *)n->cfg + fields[i].off) = (unsigned)x;
        }
}

static void decode_jail(struct nctx *n, const struct mnode *v)
{
        const struct mnode *f;
        uint64_t x;

        if (!mget_map(n->c, v, "jail", jail_fields))
                return;
        /* uid 0..65535 holds the host's own users; a range must not wrap past 2^32 - 2. */
        if ((f = opt(v, "uidBase")) && mget_uint(n->c, f, "jail.uidBase", 65536, 4000000000u, &x))
                n->cfg->jail_uid_base = (unsigned)x;
        if ((f = opt(v, "uidCount")) && mget_uint(n->c, f, "jail.uidCount", 0, 1u << 24, &x))
                n->cfg->jail_uid_count = (unsigned)x;
}

static void decode_hardening(struct nctx *n, const struct mnode *v)
{
        const struct mnode *f;

        if (!mget_map(n->c, v, "hardening", hardening_fields) || !(f = opt(v, "dropCapabilities")))
                return;
        if (f->type != MNODE_SCALAR || f->kind != MSCALAR_BOOL) {
                mctx_err(n->c, f, "hardening.dropCapabilities", "must be true or false, got %s",
                         mnode_type_name(f));
                return;
        }
        n->cfg->drop_capabilities = f->text[0] == 't' || f->text[0] == 'T';
}

/* secrets.fileDirs: absolute directories (replace the default; empty: no file secrets). */
static void decode_file_dirs(struct nctx *n, const struct mnode *a)
{
        char p[MPATH_MAX];

        if (!mget_seq(n->c, a, "secrets.fileDirs"))
                return;
        fk_strv_free(n->cfg->secret_file_dirs);
        n->cfg->secret_file_dirs = calloc(1, sizeof(char *));
        if (!n->cfg->secret_file_dirs)
                n->c->oom = true;
        for (size_t i = 0; !n->c->oom && i < a->n_items; i++) {
                const char *s = mget_string(n->c, a->items[i],
                                            mpath_idx(p, sizeof(p), "secrets.fileDirs", i));
                char *r = NULL;

                if (s && s[0] != '/')
                        mctx_err(n->c, a->items[i], p, "must be an absolute path, got \"%s\"", s);
                else if (s && (manifest_resolve_path(NULL, s, &r) < 0 ||
                               fk_strv_push(&n->cfg->secret_file_dirs, r) < 0))
                        n->c->oom = true;
                free(r);
        }
}

/* secrets.mintCommand: a non-empty argv whose program is an absolute path. */
static void decode_secrets(struct nctx *n, const struct mnode *v)
{
        const struct mnode *a;
        char p[MPATH_MAX];

        if (!mget_map(n->c, v, "secrets", secrets_fields))
                return;
        if ((a = opt(v, "fileDirs")))
                decode_file_dirs(n, a);
        if (!(a = opt(v, "mintCommand")))
                return;
        if (a->type != MNODE_SEQ || a->n_items == 0) {
                mctx_err(n->c, a, "secrets.mintCommand",
                         "must be a non-empty list of strings (a program and its arguments)");
                return;
        }
        for (size_t i = 0; i < a->n_items; i++) {
                const char *s = mget_string(n->c, a->items[i],
                                            mpath_idx(p, sizeof(p), "secrets.mintCommand", i));

                if (s && i == 0 && s[0] != '/')
                        mctx_err(n->c, a->items[i], p,
                                 "the program must be an absolute path, got \"%s\"", s);
                else if (s && fk_strv_push(&n->cfg->mint_command, s) < 0)
                        n->c->oom = true;
        }
}

static void decode_control_plane(struct nctx *n, const struct mnode *v)
{
        const struct mnode *f;
        const char *s;
        uint64_t x;

        if (!mget_map(n->c, v, "controlPlane", cp_fields))
                return;
        if ((f = opt(v, "etcd")))
                decode_strings(n->c, f, "controlPlane.etcd", false, &n->cfg->etcd);
        s = opt_string(n->c, v, "controlPlane", "prefix", &f);
        if (s && s[0] != '/')
                mctx_err(n->c, f, "controlPlane.prefix", "must start with '/' (got \"%s\")", s);
        else if (s)
                mstrdup(n->c, s, &n->cfg->etcd_prefix);
        if ((f = opt(v, "releasePendingAfterSeconds")) &&
            mget_uint(n->c, f, "controlPlane.releasePendingAfterSeconds", 0, 86400, &x))
                n->cfg->release_pending_s = (unsigned)x;
}

/* name of a list entry: required, a DNS-1123 label, unique among the n earlier entries of
 * arr (structs of stride bytes whose first member is the name). */
static char *decode_entry_name(struct mctx *c, const struct mnode *it, const char *path,
                               const void *arr, size_t stride, size_t n)
{
        const struct mnode *v = mget_required(c, it, path, "name");
        const char *s, *why;
        char p[MPATH_MAX];
        char *d;

        mpath_key(p, sizeof(p), path, "name");
        s = v ? mget_string(c, v, p) : NULL;
        if (!s)
                return NULL;
        if ((why = manifest_name_problem(s))) {
                mctx_err(c, v, p, "invalid name \"%s\": %s (a DNS-1123 label)", s, why);
                return NULL;
        }
        for (size_t i = 0; i < n; i++)
                if (strcmp(*(char *const *)((const char *)arr + i * stride), s) == 0) {
                        mctx_err(c, v, p, "duplicate name \"%s\"", s);
                        return NULL;
                }
        d = strdup(s);
        if (!d)
                c->oom = true;
        return d;
}

static void decode_class(struct mctx *c, const struct mnode *it, const char *path,
                         struct size_class *sc)
{
        static const struct {
                const char *key;
                uint64_t min, max;
                size_t off;
        } ints[] = {
                {"vcpus", 1, 255, offsetof(struct size_class, vcpus)},
                {"memoryMiB", 16, 1u << 24, offsetof(struct size_class, memory_mib)},
                {"pids", 1, 1u << 22, offsetof(struct size_class, pids)},
        };
        const struct mnode *v;
        char p[MPATH_MAX];
        uint64_t x;

        for (size_t i = 0; i < ARRAY_SIZE(ints); i++) {
                v = mget_required(c, it, path, ints[i].key);
                if (v && mget_uint(c, v, mpath_key(p, sizeof(p), path, ints[i].key), ints[i].min,
                                   ints[i].max, &x))
                        *(unsigned *)((char *)sc + ints[i].off) = (unsigned)x;
        }
        v = mget_required(c, it, path, "cpu");
        if (v)
                mget_double(c, v, mpath_key(p, sizeof(p), path, "cpu"), 0.01, 1024, &sc->cpu);
        v = opt(it, "ioWeight");
        if (v && mget_uint(c, v, mpath_key(p, sizeof(p), path, "ioWeight"), 1, 10000, &x))
                sc->io_weight = (unsigned)x;
        v = opt(it, "diskMiB");
        if (v && mget_uint(c, v, mpath_key(p, sizeof(p), path, "diskMiB"), SIZE_CLASS_DISK_MIB_MIN,
                           SIZE_CLASS_DISK_MIB_MAX, &x))
                sc->disk_mib = (unsigned)x;
}

static void decode_classes(struct nctx *n, const struct mnode *v)
{
        struct node_config *cfg = n->cfg;
        char p[MPATH_MAX];

        if (!mget_seq(n->c, v, "sizeClasses"))
                return;
        if (v->n_items == 0)
                mctx_err(n->c, v, "sizeClasses", "at least one size class is needed");
        cfg->size_classes = calloc(v->n_items + 1, sizeof(*cfg->size_classes));
        if (!cfg->size_classes)
                return (void)(n->c->oom = true);
        for (size_t i = 0; i < v->n_items; i++) {
                struct size_class *sc = &cfg->size_classes[cfg->n_size_classes];

                mpath_idx(p, sizeof(p), "sizeClasses", i);
                if (!mget_map(n->c, v->items[i], p, class_fields))
                        continue;
                sc->name = decode_entry_name(n->c, v->items[i], p, cfg->size_classes, sizeof(*sc),
                                             cfg->n_size_classes);
                decode_class(n->c, v->items[i], p, sc);
                if (sc->name)
                        cfg->n_size_classes++;
        }
}

static void decode_images(struct nctx *n, const struct mnode *v)
{
        struct node_config *cfg = n->cfg;
        char p[MPATH_MAX];

        if (!mget_seq(n->c, v, "images"))
                return;
        if (v->n_items == 0)
                mctx_err(n->c, v, "images", "at least one image is needed");
        cfg->images = calloc(v->n_items + 1, sizeof(*cfg->images));
        if (!cfg->images)
                return (void)(n->c->oom = true);
        for (size_t i = 0; i < v->n_items; i++) {
                struct image_spec *im = &cfg->images[cfg->n_images];

                mpath_idx(p, sizeof(p), "images", i);
                if (!mget_map(n->c, v->items[i], p, image_fields))
                        continue;
                im->name = decode_entry_name(n->c, v->items[i], p, cfg->images, sizeof(*im),
                                             cfg->n_images);
                if (mget_required(n->c, v->items[i], p, "dir"))
                        decode_path(n, v->items[i], p, "dir", &im->dir);
                if (im->name && im->dir) {
                        cfg->n_images++;
                } else {
                        free(im->name);
                        free(im->dir);
                        *im = (struct image_spec){0};
                }
        }
}

static void decode_scalars(struct nctx *n, const struct mnode *root)
{
        static const char *const accels[] = {"auto", "kvm", "tcg"};
        struct egress_rule r = {0};
        struct fk_error e = {0};
        const struct mnode *v;
        const char *s;

        s = opt_string(n->c, root, "", "nodeName", &v);
        if (s && (manifest_egress_parse(s, &r, &e) < 0 || r.kind != EGRESS_HOST || r.port ||
                  strcmp(r.host, s) != 0))
                mctx_err(n->c, v, "nodeName",
                         "invalid node name \"%s\": expected a lowercase "
                         "DNS name",
                         s);
        else if (s)
                mstrdup(n->c, s, &n->cfg->node_name);
        egress_rule_done(&r);
        decode_path(n, root, "", "stateDir", &n->cfg->state_dir);
        decode_path(n, root, "", "runDir", &n->cfg->run_dir);
        decode_path(n, root, "", "manifestDir", &n->cfg->manifest_dir);
        s = opt_string(n->c, root, "", "accel", &v);
        if (s && accel_mode_from_string(s) < 0)
                mctx_err_unknown(n->c, v, "accel", "accel mode", s, accels, ARRAY_SIZE(accels));
        else if (s)
                n->cfg->accel = accel_mode_from_string(s);
        s = opt_string(n->c, root, "", "cgroupParent", &v);
        if (s &&
            (!*s || s[0] == '/' || s[strlen(s) - 1] == '/' || strstr(s, "..") || strstr(s, "//")))
                mctx_err(n->c, v, "cgroupParent",
                         "invalid cgroup path \"%s\": expected a relative path such as "
                         "\"forklet\" (no \"..\", no leading or trailing '/')",
                         s);
        else if (s)
                mstrdup(n->c, s, &n->cfg->cgroup_parent);
}

static void node_decode(struct nctx *n, const struct mnode *root)
{
        const struct mnode *v;

        if (!mget_map(n->c, root, "", top_fields))
                return;
        manifest_decode_header(n->c, root, "NodeConfig");
        decode_scalars(n, root);
        if ((v = opt(root, "api")))
                decode_api(n, v);
        if ((v = opt(root, "network")))
                decode_network(n, v);
        if ((v = opt(root, "sizeClasses")))
                decode_classes(n, v);
        if ((v = opt(root, "images")))
                decode_images(n, v);
        if ((v = opt(root, "capacity")))
                decode_capacity(n, v);
        if ((v = opt(root, "controlPlane")))
                decode_control_plane(n, v);
        if ((v = opt(root, "jail")))
                decode_jail(n, v);
        if ((v = opt(root, "secrets")))
                decode_secrets(n, v);
        if ((v = opt(root, "hardening")))
                decode_hardening(n, v);
        if ((v = opt(root, "health")))
                node_config_decode_health(n->c, v, n->cfg);
        if ((v = opt(root, "diskPressure")))
                node_config_decode_disk_pressure(n->c, v, n->cfg);
        if ((v = opt(root, "memoryGiveBack")))
                node_config_decode_give_back(n->c, v, n->cfg);
        if ((v = opt(root, "labels")))
                manifest_decode_kvs(n->c, v, "labels", false, &n->cfg->labels, &n->cfg->n_labels);
        if ((v = opt(root, "registries")))
                node_config_decode_registries(n->c, v, n->base_dir, n->cfg);
        if ((v = opt(root, "api"))) /* after controlPlane: api.url depends on it */
                node_config_check_api(n->c, v, n->cfg);
}

static int parse_docs(struct nctx *n, const char *buf, size_t size)
{
        struct mnode **docs = NULL;
        size_t n_docs = 0;
        int r;

        if (size > MANIFEST_MAX_FILE_SIZE) {
                mctx_err(n->c, NULL, "", "input is larger than %d bytes (1 MiB)",
                         MANIFEST_MAX_FILE_SIZE);
                return 0;
        }
        r = mnode_parse_yaml(n->c, buf, size, &docs, &n_docs);
        if (r < 0)
                return r;
        if (n_docs == 0 && n->c->n_errors == 0)
                mctx_err(n->c, NULL, "", "no NodeConfig document found");
        else if (n_docs > 1)
                mctx_err(n->c, docs[1], "", "a node config holds exactly one document");
        if (n_docs > 0)
                node_decode(n, docs[0]);
        for (size_t i = 0; i < n_docs; i++)
                mnode_free(docs[i]);
        free(docs);
        return 0;
}

int node_config_parse(const char *buf, size_t size, const char *source, struct node_config **ret,
                      struct manifest_diag *diag)
{
        _cleanup_(mctx_finish) struct mctx c = {
                .diag = diag, .source = source ? source : "<input>", .diag_start = diag->n};
        cleanup_free char *dir_buf = source ? strdup(source) : NULL;
        struct nctx n = {.c = &c};
        int r;

        if ((source && !dir_buf) || !(n.cfg = calloc(1, sizeof(*n.cfg))))
                return -ENOMEM;
        n.base_dir = dir_buf && source[0] != '<' ? dirname(dir_buf) : NULL;
        r = node_config_init_defaults(n.cfg);
        if (r >= 0)
                r = parse_docs(&n, buf, size);
        if (r >= 0 && !c.oom && c.n_errors == 0)
                r = node_config_finish(n.cfg);
        if (r >= 0 && !c.oom && c.n_errors == 0)
                r = mstrdup(&c, c.source, &n.cfg->source);
        if (r < 0 || c.oom || c.n_errors > 0) {
                node_config_free(n.cfg);
                return r < 0 || c.oom ? -ENOMEM : -EINVAL;
        }
        *ret = n.cfg;
        return 0;
}

int node_config_load_file(const char *path, struct node_config **ret, struct manifest_diag *diag)
{
        cleanup_free char *buf = NULL;
        size_t size = 0;
        int r = manifest_read_file(path, &buf, &size, diag);

        if (r < 0)
                return r;
        return node_config_parse(buf, size, path, ret, diag);
}

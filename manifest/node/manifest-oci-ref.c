/* SPDX-License-Identifier: MIT */
/* OCI image references in spec.image (host[:port]/repo[:tag][@sha256:HEX]) and the node's
 * registries list: which registry a reference may be pulled from, over TLS or plain HTTP. */
#include "manifest/node/node-internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

bool manifest_image_is_ref(const char *image)
{
        return image && strchr(image, '/') != NULL;
}

/* repo path components: lowercase alnum separated by '.', '_', '__' or '-' runs. */
static bool repo_ok(const char *s, size_t len)
{
        bool start = true;

        if (len == 0)
                return false;
        for (size_t i = 0; i < len; i++) {
                char ch = s[i];

                if (ch == '/') {
                        if (start)
                                return false;
                        start = true;
                        continue;
                }
                if (islower((unsigned char)ch) || isdigit((unsigned char)ch)) {
                        start = false;
                        continue;
                }
                if (start || (ch != '.' && ch != '_' && ch != '-'))
                        return false;
                if (i + 1 == len || s[i + 1] == '/')
                        return false;
        }
        return !start;
}

static bool host_ok(const char *s, size_t len)
{
        size_t colon = len;

        for (size_t i = 0; i < len; i++)
                if (s[i] == ':')
                        colon = i;
        if (colon == 0 || len >= MANIFEST_OCI_HOST_MAX)
                return false;
        for (size_t i = 0; i < colon; i++)
                if (!isalnum((unsigned char)s[i]) && s[i] != '.' && s[i] != '-')
                        return false;
        if (colon < len) {
                if (colon + 1 == len || len - colon > 6)
                        return false;
                for (size_t i = colon + 1; i < len; i++)
                        if (!isdigit((unsigned char)s[i]))
                                return false;
        }
        return true;
}

static bool tag_ok(const char *s)
{
        size_t n = strlen(s);

        if (n == 0 || n > 128 || !(isalnum((unsigned char)s[0]) || s[0] == '_'))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '.' && s[i] != '-')
                        return false;
        return true;
}

static bool digest_ok(const char *s)
{
        if (strncmp(s, "sha256:", 7) != 0 || strlen(s) != 7 + 64)
                return false;
        for (size_t i = 7; s[i]; i++)
                if (!isdigit((unsigned char)s[i]) && !(s[i] >= 'a' && s[i] <= 'f'))
                        return false;
        return true;
}

/* The part after the last '/' split at ':' (tag) and '@' (digest). */
static int split_tail(const char *last, struct oci_ref *ref, size_t *ret_name_len,
                      struct fk_error *err)
{
        const char *at = strchr(last, '@');
        const char *colon = strchr(last, ':');
        size_t name_len = strlen(last);

        if (at) {
                if (!digest_ok(at + 1))
                        return fk_error_set(err, -EINVAL,
                                            "invalid digest \"%s\": expected sha256: and 64 "
                                            "lowercase hex digits",
                                            at + 1);
                snprintf(ref->digest, sizeof(ref->digest), "%s", at + 1);
                name_len = (size_t)(at - last);
        }
        if (colon && (!at || colon < at)) {
                size_t tlen = (size_t)((at ? at : last + strlen(last)) - colon - 1);

                if (tlen >= sizeof(ref->tag))
                        return fk_error_set(err, -EINVAL, "tag is longer than 128 characters");
                memcpy(ref->tag, colon + 1, tlen);
                ref->tag[tlen] = '\0';
                if (!tag_ok(ref->tag))
                        return fk_error_set(err, -EINVAL,
                                            "invalid tag \"%s\": letters, digits, '_', '.' and "
                                            "'-', at most 128",
                                            ref->tag);
                name_len = (size_t)(colon - last);
        }
        *ret_name_len = name_len;
        return 0;
}

int manifest_oci_ref_parse(const char *s, struct oci_ref *ret, struct fk_error *err)
{
        struct oci_ref ref = {0};
        const char *slash = strchr(s, '/'), *last = strrchr(s, '/');
        size_t host_len, name_len = 0, repo_len;
        int r;

        if (strlen(s) > 512)
                return fk_error_set(err, -EINVAL, "reference is longer than 512 characters");
        if (!slash)
                return fk_error_set(err, -EINVAL,
                                    "not an image reference: expected HOST[:PORT]/REPO[:TAG] "
                                    "or HOST/REPO@sha256:DIGEST");
        host_len = (size_t)(slash - s);
        if (!host_ok(s, host_len) || (!memchr(s, '.', host_len) && !memchr(s, ':', host_len) &&
                                      !(host_len == 9 && strncmp(s, "localhost", 9) == 0)))
                return fk_error_set(err, -EINVAL,
                                    "\"%.*s\" is not a registry host: a reference names its "
                                    "registry first (HOST[:PORT]/REPO:TAG, e.g. "
                                    "127.0.0.1:5000/tools:1)",
                                    (int)host_len, s);
        r = split_tail(last + 1, &ref, &name_len, err);
        if (r < 0)
                return r;
        repo_len = (size_t)(last + 1 + name_len - (slash + 1));
        if (repo_len >= sizeof(ref.repo) || !repo_ok(slash + 1, repo_len))
                return fk_error_set(err, -EINVAL,
                                    "invalid repository \"%.*s\": lowercase letters, digits and "
                                    "'.', '_', '-' between them, components separated by '/'",
                                    (int)repo_len, slash + 1);
        for (size_t i = 0; i < host_len; i++)
                ref.host[i] = (char)tolower((unsigned char)s[i]);
        memcpy(ref.repo, slash + 1, repo_len);
        if (!ref.tag[0] && !ref.digest[0])
                snprintf(ref.tag, sizeof(ref.tag), "latest");
        *ret = ref;
        return 0;
}

int manifest_oci_ref_format(const struct oci_ref *ref, char *buf, size_t size)
{
        int n = snprintf(buf, size, "%s/%s%s%s%s%s", ref->host, ref->repo, ref->tag[0] ? ":" : "",
                         ref->tag, ref->digest[0] ? "@" : "", ref->digest);

        return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/* The host without its port ("127.0.0.1:5000" -> "127.0.0.1"). */
static void host_name(const char *host, char *buf, size_t size)
{
        snprintf(buf, size, "%s", host);
        buf[strcspn(buf, ":")] = '\0';
}

bool manifest_registry_host_is_loopback(const char *host)
{
        char h[MANIFEST_OCI_HOST_MAX];

        host_name(host, h, sizeof(h));
        return strcasecmp(h, "localhost") == 0 || strncmp(h, "127.", 4) == 0;
}

const struct registry_spec *node_config_find_registry(const struct node_config *c, const char *host)
{
        const struct registry_spec *any = NULL;

        for (size_t i = 0; c && i < c->n_registries; i++) {
                if (strcasecmp(c->registries[i].host, host) == 0)
                        return &c->registries[i];
                if (strcmp(c->registries[i].host, "*") == 0)
                        any = &c->registries[i];
        }
        return any;
}

int manifest_check_image_ref(const struct node_config *cfg, const char *image, struct oci_ref *ret,
                             struct fk_error *err)
{
        struct oci_ref ref;
        char allowed[200] = "";
        size_t off = 0;
        int r;

        r = manifest_oci_ref_parse(image, &ref, err);
        if (r < 0 || !cfg || node_config_find_registry(cfg, ref.host)) {
                if (r >= 0 && ret)
                        *ret = ref;
                return r;
        }
        for (size_t i = 0; i < cfg->n_registries && off < sizeof(allowed); i++)
                off += (size_t)snprintf(allowed + off, sizeof(allowed) - off, "%s%s", i ? ", " : "",
                                        cfg->registries[i].host);
        return fk_error_set(err, -EPERM, "registry %s is not allowed on node %s (allowed: %s)",
                            ref.host, cfg->node_name,
                            cfg->n_registries ? allowed
                                              : "none; list it under registries in the "
                                                "node config");
}

bool manifest_decode_image_ref(struct mctx *c, const struct mnode *spec,
                               const struct node_config *cfg, char **ret)
{
        const struct mnode *v = mnode_get(spec, "image");
        struct fk_error e = {0};
        const char *s;

        if (!v || v->type != MNODE_SCALAR || v->kind != MSCALAR_STRING ||
            !manifest_image_is_ref(v->text))
                return false;
        s = mget_string(c, v, "spec.image");
        if (!s)
                return true;
        if (manifest_check_image_ref(cfg, s, NULL, &e) < 0)
                mctx_err(c, v, "spec.image", "%s", e.msg);
        else
                mstrdup(c, s, ret);
        return true;
}

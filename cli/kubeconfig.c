/* SPDX-License-Identifier: MIT */
/* forklet kubeconfig [--config NODE.yaml] [--server URL] [--ca FILE] [--token-file FILE]
 * [--name NAME]: prints a kubeconfig for the node's TLS listener (server, the CA inline, the
 * bearer token), so kubectl talks to the node: KUBECONFIG=FILE kubectl get sessions. */
#include "cli/cli.h"
#include "common/cleanup.h"
#include "common/util.h"
#include "manifest/manifest.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KUBECONFIG_FILE_MAX (1024 * 1024)

int cli_parse_kubeconfig(int argc, char **argv, struct cli_kubeconfig_args *ret,
                         struct fk_error *err)
{
        struct cli_kubeconfig_args a = {0};
        static const char *const opts[] = {"--config", "--server", "--ca", "--token-file",
                                           "--name"};

        for (int i = 1; i < argc; i++) {
                const char **slot[] = {&a.config, &a.server, &a.ca, &a.token_file, &a.name};
                bool found = false;

                for (size_t k = 0; k < ARRAY_SIZE(opts) && !found; k++) {
                        size_t n = strlen(opts[k]);

                        if (strcmp(argv[i], opts[k]) == 0) {
                                if (i + 1 >= argc)
                                        return fk_error_set(err, -EINVAL,
                                                            "kubeconfig: %s needs a value",
                                                            opts[k]);
                                *slot[k] = argv[++i];
                                found = true;
                        } else if (strncmp(argv[i], opts[k], n) == 0 && argv[i][n] == '=') {
                                *slot[k] = argv[i] + n + 1;
                                found = true;
                        }
                }
                if (!found)
                        return fk_error_set(err, -EINVAL,
                                            "kubeconfig: unexpected argument \"%s\" (--config, "
                                            "--server, --ca, --token-file, --name)",
                                            argv[i]);
        }
        *ret = a;
        return 0;
}

int cli_kubeconfig_render(const char *name, const char *server, const char *ca_pem,
                          const char *token, const char *ns, char **ret)
{
        cleanup_free char *ca64 = NULL;

        if (ca_pem && fk_base64_encode(ca_pem, strlen(ca_pem), &ca64) < 0)
                return -ENOMEM;
        return fk_asprintf(ret,
                           "apiVersion: v1\n"
                           "kind: Config\n"
                           "clusters:\n"
                           "- name: %s\n"
                           "  cluster:\n"
                           "    server: %s\n"
                           "%s%s%s"
                           "contexts:\n"
                           "- name: %s\n"
                           "  context:\n"
                           "    cluster: %s\n"
                           "    user: %s\n"
                           "    namespace: %s\n"
                           "current-context: %s\n"
                           "users:\n"
                           "- name: %s\n"
                           "  user:\n"
                           "    token: \"%s\"\n",
                           name, server, ca64 ? "    certificate-authority-data: " : "",
                           ca64 ? ca64 : "", ca64 ? "\n" : "", name, name, name, ns, name, name,
                           token) < 0
                       ? -ENOMEM
                       : 0;
}

static int read_text(const char *what, const char *path, char **ret)
{
        size_t size = 0;
        int r = fk_read_file(path, KUBECONFIG_FILE_MAX, ret, &size);

        if (r < 0) {
                fprintf(stderr, "forklet kubeconfig: %s %s: %s\n", what, path, strerror(-r));
                return r;
        }
        while (size > 0 && ((*ret)[size - 1] == '\n' || (*ret)[size - 1] == '\r'))
                (*ret)[--size] = '\0';
        return 0;
}

static int load_node(const char *path, struct node_config **ret)
{
        struct manifest_diag diag = {0};
        int r = node_config_load_file(path, ret, &diag);

        for (size_t i = 0; i < diag.n; i++)
                fprintf(stderr, "%s\n", diag.messages[i]);
        if (r < 0 && diag.n == 0)
                fprintf(stderr, "%s: cannot load node config\n", path);
        manifest_diag_done(&diag);
        return r;
}

int cli_kubeconfig(const struct cli *c, int argc, char **argv)
{
        struct cli_kubeconfig_args a;
        struct node_config *cfg = NULL;
        cleanup_free char *ca = NULL, *token = NULL, *out = NULL, *name = NULL;
        const char *server, *ca_file, *token_file;
        struct fk_error err = {0};
        int r = CLI_EXIT_FAILURE;

        if (cli_parse_kubeconfig(argc, argv, &a, &err) < 0) {
                fprintf(stderr, "forklet %s\n", err.msg);
                return CLI_EXIT_USAGE;
        }
        if (a.config && load_node(a.config, &cfg) < 0)
                return CLI_EXIT_FAILURE;
        server = a.server ? a.server : c->server ? c->server : cfg ? cfg->api_url : NULL;
        token_file = a.token_file    ? a.token_file
                     : c->token_file ? c->token_file
                     : cfg           ? cfg->api_token_file
                                     : NULL;
        /* a self-signed listener certificate is its own CA */
        ca_file = a.ca ? a.ca : c->ca ? c->ca : cfg ? cfg->api_tls_cert : NULL;
        if (!server || !token_file) {
                fprintf(stderr, "forklet kubeconfig: no TLS listener to point at: pass --config "
                                "NODE.yaml (with api.listen, api.tlsCert and api.tokenFile), or "
                                "--server https://HOST:PORT and --token-file FILE\n");
                goto out;
        }
        if (strncmp(server, "https://", 8) != 0) {
                fprintf(stderr,
                        "forklet kubeconfig: %s: kubectl sends the token over https "
                        "only (set api.tlsCert and api.tlsKey)\n",
                        server);
                goto out;
        }
        if (read_text("token file", token_file, &token) < 0 ||
            (ca_file && read_text("CA", ca_file, &ca) < 0))
                goto out;
        if (strpbrk(token, "\"\\\n")) {
                fprintf(stderr, "forklet kubeconfig: %s: the token holds quotes or newlines\n",
                        token_file);
                goto out;
        }
        if (fk_asprintf(&name, "forklet-%s",
                        a.name                  ? a.name
                        : cfg && cfg->node_name ? cfg->node_name
                                                : "node") < 0 ||
            cli_kubeconfig_render(name, server, ca, token, c->namespace ? c->namespace : "default",
                                  &out) < 0) {
                fprintf(stderr, "forklet kubeconfig: out of memory\n");
                goto out;
        }
        fputs(out, stdout);
        r = CLI_EXIT_OK;
out:
        node_config_free(cfg);
        return r;
}

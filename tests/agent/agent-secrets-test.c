/* SPDX-License-Identifier: MIT */
/* spec.secrets: manifest validation against a node config (mint needs mintCommand), JSON round
 * trip, the mint argv, and running a fake mint command (a shell script): output capture, size
 * cap, failure, timeout; resolving a session's secrets and the identity ledger. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/daemon/daemon-internal.h"
#include "common/util.h"
#include "manifest/manifest.h"

static char dir[] = "/tmp/fk-secrets-test.XXXXXX";

static const char node_head[] = "apiVersion: forklet.dev/v1alpha1\nkind: NodeConfig\n";

static struct node_config *node(const char *extra)
{
        struct manifest_diag d = {0};
        struct node_config *c = NULL;
        char buf[1024];
        int r;

        snprintf(buf, sizeof(buf), "%s%s", node_head, extra);
        r = node_config_parse(buf, strlen(buf), "<node>", &c, &d);
        for (size_t i = 0; i < d.n; i++)
                fprintf(stderr, "%s\n", d.messages[i]);
        manifest_diag_done(&d);
        return r == 0 ? c : NULL;
}

static int parse(const char *spec, const struct node_config *cfg, struct session_manifest **ret,
                 char *first_err, size_t size)
{
        char buf[2048];
        struct manifest_diag d = {0};
        struct session_manifest **v = NULL;
        size_t n = 0;
        int r;

        snprintf(buf, sizeof(buf),
                 "apiVersion: forklet.dev/v1alpha1\nkind: Session\nmetadata: {name: s}\n"
                 "spec:\n  secrets:\n%s",
                 spec);
        r = manifest_parse_sessions(buf, strlen(buf), "<t>", cfg, &v, &n, &d);
        if (first_err)
                snprintf(first_err, size, "%s", d.n ? d.messages[0] : "");
        manifest_diag_done(&d);
        if (r == 0) {
                assert_int_equal(n, 1);
                *ret = v[0];
                free(v);
        }
        return r;
}

static void test_node_mint_command(void **state)
{
        struct node_config *c;
        struct manifest_diag d = {0};
        char buf[512];

        (void)state;
        c = node("secrets: {mintCommand: [/usr/bin/mint, --kind, token]}\n");
        assert_non_null(c);
        assert_int_equal(fk_strv_length(c->mint_command), 3);
        assert_string_equal(c->mint_command[0], "/usr/bin/mint");
        node_config_free(c);
        snprintf(buf, sizeof(buf), "%ssecrets: {mintCommand: [mint]}\n", node_head);
        assert_int_equal(node_config_parse(buf, strlen(buf), "<n>", &c, &d), -EINVAL);
        assert_non_null(strstr(d.messages[0], "absolute path"));
        manifest_diag_done(&d);
        snprintf(buf, sizeof(buf), "%ssecrets: {mintCommand: []}\n", node_head);
        assert_int_equal(node_config_parse(buf, strlen(buf), "<n>", &c, &d), -EINVAL);
        manifest_diag_done(&d);
}

static void test_mint_needs_node_command(void **state)
{
        struct node_config *with = node("secrets: {mintCommand: [/bin/true]}\n"),
                           *without = node("");
        struct session_manifest *m = NULL;
        char msg[512];

        (void)state;
        assert_int_equal(parse("    - {name: TOKEN, mint: true}\n", without, &m, msg, sizeof(msg)),
                         -EINVAL);
        assert_non_null(strstr(msg, "spec.secrets[0].mint: this node has no secrets.mintCommand"));
        assert_int_equal(parse("    - {name: TOKEN, mint: true}\n", with, &m, NULL, 0), 0);
        assert_true(m->secrets[0].mint);
        session_manifest_free(m);
        /* without a node config (client-side validate) only the syntax is checked */
        assert_int_equal(parse("    - {name: TOKEN, mint: true}\n", NULL, &m, NULL, 0), 0);
        session_manifest_free(m);
        node_config_free(with);
        node_config_free(without);
}

static void test_json_round_trip(void **state)
{
        struct node_config *cfg = node("secrets: {mintCommand: [/bin/true]}\n");
        struct session_manifest *m = NULL, *back = NULL, *copy = NULL;
        struct manifest_diag d = {0};
        json_t *j;

        (void)state;
        assert_int_equal(parse("    - {name: A, file: /etc/forklet/secrets/a}\n    - {name: b-c, "
                               "mint: true}\n",
                               cfg, &m, NULL, 0),
                         0);
        assert_int_equal(m->n_secrets, 2);
        j = session_manifest_to_json(m);
        assert_non_null(j);
        assert_int_equal(session_manifest_from_json(j, cfg, &back, &d), 0);
        assert_true(session_manifest_equal(m, back));
        assert_int_equal(session_manifest_copy(m, &copy), 0);
        assert_true(session_manifest_equal(m, copy));
        free(copy->secrets[1].name);
        copy->secrets[1].name = strdup("other");
        assert_false(session_manifest_equal(m, copy));
        json_decref(j);
        session_manifest_free(m);
        session_manifest_free(back);
        session_manifest_free(copy);
        node_config_free(cfg);
}

static void test_file_dirs(void **state)
{
        struct node_config *def = node(""), *none = node("secrets: {fileDirs: []}\n"),
                           *tmp = node("secrets: {fileDirs: [/tmp/x/../y]}\n");
        struct session_manifest *m = NULL;
        char msg[512];

        (void)state;
        /* the default: /etc/forklet/secrets only */
        assert_int_equal(parse("    - {name: A, file: /etc/forklet/secrets/a}\n", def, &m, NULL, 0),
                         0);
        session_manifest_free(m);
        assert_int_equal(parse("    - {name: A, file: /etc/shadow}\n", def, &m, msg, sizeof(msg)),
                         -EINVAL);
        assert_non_null(strstr(msg, "not under the node's secrets.fileDirs"));
        assert_int_equal(parse("    - {name: A, file: /etc/forklet/secrets/../../shadow}\n", def,
                               &m, NULL, 0),
                         -EINVAL);
        assert_int_equal(
                parse("    - {name: A, file: /etc/forklet/secretsX/a}\n", def, &m, NULL, 0),
                -EINVAL);
        /* empty: no file secrets at all */
        assert_int_equal(
                parse("    - {name: A, file: /etc/forklet/secrets/a}\n", none, &m, NULL, 0),
                -EINVAL);
        /* normalized when loaded */
        assert_string_equal(tmp->secret_file_dirs[0], "/tmp/y");
        assert_int_equal(parse("    - {name: A, file: /tmp/y/a}\n", tmp, &m, NULL, 0), 0);
        session_manifest_free(m);
        node_config_free(def);
        node_config_free(none);
        node_config_free(tmp);
}

static void test_mint_argv(void **state)
{
        char m0[] = "/usr/bin/mint", m1[] = "--x";
        char *cmd[] = {m0, m1, NULL};
        char **v = NULL;

        (void)state;
        assert_int_equal(agent_secrets_mint_argv(cmd, "default.a", NULL, NULL, &v), 0);
        const char *want[] = {"/usr/bin/mint", "--x", "--session", "default.a", "--parent", "",
                              "--fork-id",     "",    NULL};
        for (size_t i = 0; want[i]; i++)
                assert_string_equal(v[i], want[i]);
        assert_null(v[8]);
        fk_strv_free(v);
        assert_int_equal(agent_secrets_mint_argv(cmd, "default.f", "default.a", "f.1234", &v), 0);
        assert_string_equal(v[5], "default.a");
        assert_string_equal(v[7], "f.1234");
        fk_strv_free(v);
}

/* A fake mint command: prints its arguments (one per line) or misbehaves on request. */
static char *script(const char *name, const char *body)
{
        char *p = NULL, *text = NULL;

        assert_true(fk_asprintf(&p, "%s/%s", dir, name) >= 0);
        assert_true(fk_asprintf(&text, "#!/bin/sh\n%s\n", body) >= 0);
        assert_int_equal(fk_write_file_atomic(p, text, strlen(text), 0755), 0);
        free(text);
        return p;
}

static void test_run_captures_stdout(void **state)
{
        char *sh = script("args.sh", "for a in \"$@\"; do echo \"$a\"; done; echo noise >&2");
        char *cmd[] = {sh, NULL}, **argv = NULL;
        struct fk_error err = {0};
        unsigned char *out = NULL;
        size_t size = 0;

        (void)state;
        assert_int_equal(agent_secrets_mint_argv(cmd, "ns.s", "ns.p", "s.beef", &argv), 0);
        assert_int_equal(agent_secrets_run(argv, 4096, 5000, &out, &size, &err), 0);
        const char want[] = "--session\nns.s\n--parent\nns.p\n--fork-id\ns.beef\n";
        assert_int_equal(size, strlen(want));
        assert_memory_equal(out, want, size);
        free(out);
        fk_strv_free(argv);
        free(sh);
}

static void test_run_failures(void **state)
{
        static const struct {
                const char *body;
                unsigned timeout_ms;
                int want;
        } cases[] = {
                {"head -c 5000 /dev/zero", 5000, -EFBIG},    /* past the cap: refused */
                {"echo SECRETVALUE; exit 3", 5000, -EPROTO}, /* failed: output not used */
                {"exec sleep 20", 300, -ETIMEDOUT},          /* hung: killed */
                {"true", 5000, -ENODATA},                    /* printed nothing */
                {"yes SECRETVALUE | head -c 4096", 5000, 0}, /* exactly the cap: fine */
        };

        (void)state;
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                char *sh = script("f.sh", cases[i].body);
                char *argv[] = {sh, NULL};
                struct fk_error err = {0};
                unsigned char *out = NULL;
                size_t size = 0;
                uint64_t t0 = fk_now_mono_ns();
                int r = agent_secrets_run(argv, 4096, cases[i].timeout_ms, &out, &size, &err);

                assert_int_equal(r, cases[i].want);
                assert_true(fk_now_mono_ns() - t0 < 10000000000ull);
                if (r < 0)
                        assert_null(strstr(err.msg, "SECRETVALUE")); /* never in messages */
                else
                        assert_int_equal(size, 4096);
                free(out);
                free(sh);
        }
}

static void test_resolve_and_ledger(void **state)
{
        char *mint = script("mint.sh", "echo \"minted-for-$2-$6\"");
        char *file = NULL, *cfg_text = NULL, spec[512];
        struct node_config *cfg;
        struct session_manifest *m = NULL;
        struct agent_secret_set s = {0};
        struct fk_error err = {0};
        json_t *id;

        (void)state;
        assert_true(fk_asprintf(&file, "%s/token", dir) >= 0);
        assert_int_equal(fk_write_file_atomic(file, "filevalue", 9, 0600), 0);
        assert_true(fk_asprintf(&cfg_text, "secrets: {mintCommand: [%s], fileDirs: [%s]}\n", mint,
                                dir) >= 0);
        cfg = node(cfg_text);
        assert_non_null(cfg);
        snprintf(spec, sizeof(spec),
                 "    - {name: FILE_TOKEN, file: %s}\n    - {name: m, mint: true}\n", file);
        assert_int_equal(parse(spec, cfg, &m, NULL, 0), 0);
        assert_int_equal(agent_secrets_resolve(cfg, m, "d.f", "d.p", "f.01", &s, &err), 0);
        assert_int_equal(s.n, 2);
        assert_memory_equal(s.v[0].value, "filevalue", 9);
        assert_false(s.v[0].minted);
        assert_int_equal(s.v[1].size, strlen("minted-for-d.f-f.01\n"));
        assert_memory_equal(s.v[1].value, "minted-for-d.f-f.01\n", s.v[1].size);
        id = agent_identity_ledger("f.01", "ck1", &s, true, true);
        assert_string_equal(
                json_string_value(json_array_get(json_object_get(id, "inheritedSecrets"), 0)),
                "FILE_TOKEN");
        assert_string_equal(
                json_string_value(json_array_get(json_object_get(id, "mintedSecrets"), 0)), "m");
        assert_true(json_is_true(json_object_get(id, "kernelReseeded")));
        /* names only, kept in the state record for an adopted VM */
        struct agent_store *st = NULL;
        assert_int_equal(agent_store_open(dir, dir, &st, &err), 0);
        assert_int_equal(agent_store_set(st, "d.f", AGENT_STORE_IDENTITY, json_incref(id), &err),
                         0);
        st = agent_store_free(st);
        assert_int_equal(agent_store_open(dir, dir, &st, &err), 0);
        json_t *back = agent_store_get(st, "d.f", AGENT_STORE_IDENTITY);
        assert_true(json_equal(back, id));
        json_decref(back);
        st = agent_store_free(st);
        char *saved = NULL, *p = NULL;
        assert_true(fk_asprintf(&p, "%s/sessions/d.f/" AGENT_STORE_FILE, dir) >= 0);
        assert_int_equal(fk_read_file(p, 4096, &saved, NULL), 0);
        assert_null(strstr(saved, "filevalue"));
        assert_null(strstr(saved, "minted-for"));
        free(saved);
        free(p);
        json_decref(id);
        id = agent_identity_ledger(NULL, NULL, &s, false, true); /* cold boot: nothing copied */
        assert_int_equal(json_array_size(json_object_get(id, "inheritedSecrets")), 0);
        assert_true(json_is_null(json_object_get(id, "checkpoint")));
        json_decref(id);
        agent_secret_set_done(&s);
        /* a symlink in fileDirs that leads out is refused when read */
        char *link = NULL, *outside = NULL, lspec[512];
        struct session_manifest *lm = NULL;
        assert_true(fk_asprintf(&link, "%s/escape", dir) >= 0);
        assert_true(fk_asprintf(&outside, "%s.outside", dir) >= 0);
        assert_int_equal(fk_write_file_atomic(outside, "x", 1, 0600), 0);
        assert_int_equal(symlink(outside, link), 0);
        snprintf(lspec, sizeof(lspec), "    - {name: L, file: %s}\n", link);
        assert_int_equal(parse(lspec, cfg, &lm, NULL, 0), 0); /* lexically inside */
        assert_int_equal(agent_secrets_resolve(cfg, lm, "d.l", NULL, NULL, &s, &err), -EPERM);
        assert_non_null(strstr(err.msg, "outside secrets.fileDirs"));
        session_manifest_free(lm);
        unlink(outside);
        free(outside);
        free(link);
        /* a missing file fails the whole set */
        unlink(file);
        assert_int_equal(agent_secrets_resolve(cfg, m, "d.f", NULL, NULL, &s, &err), -ENOENT);
        assert_null(s.v);
        session_manifest_free(m);
        node_config_free(cfg);
        free(cfg_text);
        free(file);
        free(mint);
}

static int setup(void **state)
{
        (void)state;
        return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
        (void)state;
        return fk_rm_rf(dir) < 0 ? -1 : 0;
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_node_mint_command),
                cmocka_unit_test(test_mint_needs_node_command),
                cmocka_unit_test(test_json_round_trip),
                cmocka_unit_test(test_file_dirs),
                cmocka_unit_test(test_mint_argv),
                cmocka_unit_test(test_run_captures_stdout),
                cmocka_unit_test(test_run_failures),
                cmocka_unit_test(test_resolve_and_ledger),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}

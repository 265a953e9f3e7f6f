/* SPDX-License-Identifier: MIT */
/* Edge cases of the manifest module: egress parser, name validator, enums, JSON input errors,
 * size/depth/error-count limits, YAML rendering, copy and equality. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "manifest/manifest.h"
#include "tests/manifest/manifest-test-util.h"

#define HDR "apiVersion: forklet.dev/v1alpha1\nkind: Session\n"

static void test_egress_kinds(void **state)
{
        struct egress_rule r;
        struct fk_error e = {0};
        uint8_t v6[16];

        (void)state;
        assert_int_equal(manifest_egress_parse("API.Example.COM", &r, &e), 0);
        assert_int_equal(r.kind, EGRESS_HOST);
        assert_string_equal(r.host, "api.example.com");
        assert_string_equal(r.raw, "API.Example.COM");
        assert_int_equal(r.port, 0);
        egress_rule_done(&r);

        assert_int_equal(manifest_egress_parse("*.example.com:8443", &r, &e), 0);
        assert_int_equal(r.kind, EGRESS_WILDCARD);
        assert_string_equal(r.host, "example.com");
        assert_int_equal(r.port, 8443);
        egress_rule_done(&r);

        assert_int_equal(manifest_egress_parse("203.0.113.0/24", &r, &e), 0);
        assert_int_equal(r.kind, EGRESS_CIDR);
        assert_int_equal(r.family, AF_INET);
        assert_int_equal(r.prefix_len, 24);
        assert_memory_equal(r.addr, ((uint8_t[]){203, 0, 113, 0}), 4);
        assert_null(r.host);
        egress_rule_done(&r);

        assert_int_equal(manifest_egress_parse("192.0.2.7:53", &r, &e), 0);
        assert_int_equal(r.prefix_len, 32);
        assert_int_equal(r.port, 53);
        egress_rule_done(&r);

        assert_int_equal(manifest_egress_parse("[2001:db8::/32]:443", &r, &e), 0);
        assert_int_equal(r.family, AF_INET6);
        assert_int_equal(r.prefix_len, 32);
        assert_int_equal(r.port, 443);
        inet_pton(AF_INET6, "2001:db8::", v6);
        assert_memory_equal(r.addr, v6, 16);
        egress_rule_done(&r);

        assert_int_equal(manifest_egress_parse("2001:db8::1", &r, &e), 0);
        assert_int_equal(r.prefix_len, 128);
        assert_int_equal(r.port, 0);
        egress_rule_done(&r);

        assert_int_equal(manifest_egress_parse("[::1]:1", &r, &e), 0);
        assert_int_equal(r.port, 1);
        egress_rule_done(&r);
}

static void test_egress_errors(void **state)
{
        static const struct {
                const char *in, *msg;
        } cases[] = {
                {"", "empty entry"},
                {"a b", "must not contain whitespace"},
                {"*.", "empty host name"},
                {"**.x.com", "a wildcard is only allowed as a leading \"*.\""},
                {"x.*.com", "a wildcard is only allowed as a leading \"*.\""},
                {"1.2.3.4/33", "prefix length 33 is out of range (0..32)"},
                {"::/129", "prefix length 129 is out of range (0..128)"},
                {"1.2.3.4/", "invalid prefix length \"\""},
                {"1.2.3.4/-1", "invalid prefix length \"-1\""},
                {"10.1.0.0/8", "address has bits set beyond the /8 prefix"},
                {"2001:db8::1/32", "address has bits set beyond the /32 prefix"},
                {"host:0", "port 0 is out of range (1..65535)"},
                {"host:", "invalid port \"\""},
                {"host:65536", "port 65536 is out of range (1..65535)"},
                {"[2001:db8::1]", "brackets are only for an IPv6 address with a port, as in "
                                  "[2001:db8::1]:443"},
                {"[2001:db8::1]:x", "invalid port \"x\""},
                {"[1.2.3.4]:80", "\"1.2.3.4\" in brackets is not IPv6"},
                {"300.1.1.1", "not a valid IPv4 address or host name"},
                {"a_b.com", "not a host name, *.wildcard, IP address or CIDR"},
                {"host/24", "invalid IP address \"host\""},
                {"a-.com", "host name parts must not start or end with '-'"},
        };
        struct egress_rule r = {0};

        (void)state;
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                struct fk_error e = {0};

                if (manifest_egress_parse(cases[i].in, &r, &e) != -EINVAL)
                        fail_msg("\"%s\" was accepted", cases[i].in);
                if (strcmp(e.msg, cases[i].msg) != 0)
                        fail_msg("\"%s\": got \"%s\", want \"%s\"", cases[i].in, e.msg,
                                 cases[i].msg);
                assert_null(r.raw); /* untouched on failure */
        }
}

static void test_egress_long_names(void **state)
{
        char label[70], name[300];
        struct egress_rule r;
        struct fk_error e = {0};

        (void)state;
        memset(label, 'a', 63);
        label[63] = 0;
        snprintf(name, sizeof(name), "%s.com", label);
        assert_int_equal(manifest_egress_parse(name, &r, &e), 0);
        egress_rule_done(&r);
        snprintf(name, sizeof(name), "%sa.com", label);
        assert_int_equal(manifest_egress_parse(name, &r, &e), -EINVAL);
        memset(name, 0, sizeof(name));
        for (int i = 0; i < 64; i++)
                strcat(name, "abc.");
        strcat(name, "com"); /* 259 characters */
        assert_int_equal(manifest_egress_parse(name, &r, &e), -EINVAL);
        assert_string_equal(e.msg, "host name longer than 253 characters");
}

static void test_names(void **state)
{
        char n63[64], n64[65];

        (void)state;
        memset(n63, 'a', 63);
        n63[63] = 0;
        memset(n64, 'a', 64);
        n64[64] = 0;
        assert_true(manifest_name_is_valid("a"));
        assert_true(manifest_name_is_valid("0"));
        assert_true(manifest_name_is_valid("my-app-2"));
        assert_true(manifest_name_is_valid("9lives"));
        assert_true(manifest_name_is_valid(n63));
        assert_false(manifest_name_is_valid(n64));
        assert_false(manifest_name_is_valid(""));
        assert_false(manifest_name_is_valid(NULL));
        assert_false(manifest_name_is_valid("-a"));
        assert_false(manifest_name_is_valid("a-"));
        assert_false(manifest_name_is_valid("My-app"));
        assert_false(manifest_name_is_valid("a_b"));
        assert_false(manifest_name_is_valid("a.b"));
        assert_false(manifest_name_is_valid("caf\xc3\xa9"));
}

static void test_enums(void **state)
{
        (void)state;
        assert_string_equal(session_state_to_string(SESSION_STATE_PAUSED), "Paused");
        assert_int_equal(session_state_from_string("Stopped"), SESSION_STATE_STOPPED);
        assert_int_equal(session_state_from_string("stopped"), _SESSION_STATE_INVALID);
        assert_null(session_state_to_string(_SESSION_STATE_MAX));
        assert_string_equal(restart_policy_to_string(RESTART_POLICY_ON_FAILURE), "OnFailure");
        assert_int_equal(restart_policy_from_string("Never"), RESTART_POLICY_NEVER);
        assert_int_equal(restart_policy_from_string(NULL), _RESTART_POLICY_INVALID);
        assert_int_equal(accel_mode_from_string("tcg"), ACCEL_TCG);
        assert_string_equal(accel_mode_to_string(ACCEL_KVM), "kvm");
}

static void test_from_json(void **state)
{
        json_t *j = json_pack("{s:s,s:s,s:{s:s,s:[]},s:{s:[s,i,i],s:{s:i},s:s,s:{s:s,s:i}}}",
                              "apiVersion", MANIFEST_API_VERSION, "kind", "Session", "metadata",
                              "name", "Bad Name", "labels", "spec", "ports", "80", 80, 80, "env",
                              "X", 1, "sizeClass", "huge", "forks", "from", "x", "count", 1);
        static const char *const want[] = {
                ("<json>: metadata.name: invalid name \"Bad Name\": must contain only lowercase "
                 "letters, digits and '-' (a DNS-1123 label)"),
                "<json>: metadata.labels: expected a mapping, got a list",
                "<json>: spec.sizeClass: unknown class \"huge\" (known: small)",
                "<json>: spec.ports[0]: expected an integer, got a string \"80\"",
                "<json>: spec.ports[2]: duplicate port 80 (same as spec.ports[1])",
                "<json>: spec.forks.from: unknown checkpoint \"x\" (none are defined)",
        };
        struct session_manifest *m = NULL;
        struct node_config *c = NULL;
        struct manifest_diag d = {0};
        json_t *deep = json_array(), *cur = deep;

        (void)state;
        assert_int_equal(node_config_default(&c), 0);
        assert_non_null(j);
        assert_int_equal(session_manifest_from_json(j, c, &m, &d), -EINVAL);
        assert_null(m);
        mt_assert_diag(&d, want, ARRAY_SIZE(want));
        json_decref(j);

        j = json_string("x");
        assert_int_equal(session_manifest_from_json(j, c, &m, &d), -EINVAL);
        mt_assert_diag(&d, (const char *const[]){"<json>: expected a mapping, got a string"}, 1);
        json_decref(j);

        for (int i = 0; i < 40; i++) {
                json_t *next = json_array();

                json_array_append_new(cur, next);
                cur = next;
        }
        assert_int_equal(session_manifest_from_json(deep, c, &m, &d), -EINVAL);
        mt_assert_diag(&d, (const char *const[]){"<json>: nesting deeper than 32 levels"}, 1);
        json_decref(deep);
        node_config_free(c);
}

static void test_limits(void **state)
{
        size_t big = MANIFEST_MAX_FILE_SIZE + 1;
        cleanup_free char *buf = malloc(big + 1);
        struct session_manifest **v = NULL;
        struct manifest_diag d = {0};
        char tmpl[] = "/tmp/fk-manifest-XXXXXX";
        size_t n = 0;
        int fd;

        (void)state;
        assert_non_null(buf);
        memset(buf, '#', big);
        buf[big] = 0;
        assert_int_equal(manifest_parse_sessions(buf, big, "b.yaml", NULL, &v, &n, &d), -EINVAL);
        mt_assert_diag(
                &d, (const char *const[]){"b.yaml: input is larger than 1048576 bytes (1 MiB)"}, 1);
        fd = mkstemp(tmpl);
        assert_true(fd >= 0);
        assert_int_equal(fk_write_all(fd, buf, big), 0);
        close(fd);
        assert_int_equal(manifest_load_sessions_file(tmpl, NULL, &v, &n, &d), -EINVAL);
        assert_int_equal(d.n, 1);
        assert_non_null(strstr(d.messages[0], "file is larger than 1048576 bytes (1 MiB)"));
        manifest_diag_done(&d);
        unlink(tmpl);

        assert_int_equal(manifest_parse_sessions(NULL, 0, "e.yaml", NULL, &v, &n, &d), -EINVAL);
        mt_assert_diag(&d, (const char *const[]){"e.yaml: no Session document found"}, 1);

        /* 32 levels are fine (root map + spec map + 30 lists); 33 are not. */
        memset(buf, 0, 300);
        strcpy(buf, HDR "metadata: {name: a}\nspec: {egress: ");
        for (int i = 0; i < 30; i++)
                strcat(buf, "[");
        for (int i = 0; i < 30; i++)
                strcat(buf, "]");
        strcat(buf, "}\n");
        assert_int_equal(manifest_parse_sessions(buf, strlen(buf), "d.yaml", NULL, &v, &n, &d),
                         -EINVAL);
        assert_int_equal(d.n, 1);
        assert_string_equal(d.messages[0],
                            "d.yaml:4:17: spec.egress[0]: expected a string, got a list");
        manifest_diag_done(&d);
        memset(buf, 0, 300);
        strcpy(buf, HDR "metadata: {name: a}\nspec: {egress: ");
        for (int i = 0; i < 31; i++)
                strcat(buf, "[");
        assert_int_equal(manifest_parse_sessions(buf, strlen(buf), "d.yaml", NULL, &v, &n, &d),
                         -EINVAL);
        assert_int_equal(d.n, 1);
        assert_string_equal(d.messages[0], "d.yaml:4:46: nesting deeper than 32 levels");
        manifest_diag_done(&d);
}

static void test_too_many_errors(void **state)
{
        cleanup_free char *text = NULL;
        struct session_manifest **v = NULL;
        struct manifest_diag d = {0};
        FILE *f;
        size_t len = 0, n = 0;

        (void)state;
        f = open_memstream(&text, &len);
        assert_non_null(f);
        fputs(HDR "metadata: {name: a}\nspec:\n  ports:\n", f);
        for (int i = 0; i < 150; i++)
                fputs("    - x\n", f);
        fclose(f);
        assert_int_equal(manifest_parse_sessions(text, len, "m.yaml", NULL, &v, &n, &d), -EINVAL);
        assert_int_equal(d.n, 101);
        assert_string_equal(d.messages[0],
                            "m.yaml:6:7: spec.ports[0]: expected an integer, got a string \"x\"");
        assert_string_equal(d.messages[100], "m.yaml: too many errors, stopping");
        manifest_diag_done(&d);
}

static void test_json_to_yaml(void **state)
{
        json_t *j = json_pack("{s:s,s:[{s:s,s:i},{s:[]}],s:{},s:[[s,b],[]],s:f,s:f,s:n,s:s,s:s}",
                              "kind", "SessionList", "items", "name", "a", "n", 1, "empty", "map",
                              "nested", "x", 1, "real", 1.0, "small", 0.25, "nil", "needs", "a: b",
                              "multi", "x\ny\x01");
        const char *want = "kind: SessionList\n"
                           "items:\n"
                           "  - name: a\n"
                           "    \"n\": 1\n" /* YAML 1.1 reads a bare n as false */
                           "  - empty: []\n"
                           "map: {}\n"
                           "nested:\n"
                           "  - - x\n"
                           "    - true\n"
                           "  - []\n"
                           "real: 1.0\n"
                           "small: 0.25\n"
                           "nil: null\n"
                           "needs: \"a: b\"\n"
                           "multi: \"x\\ny\\u0001\"\n";
        cleanup_free char *y = NULL, *s = NULL;
        json_t *str = json_string("no");
        static const char *const quoted[] = {"1:20", "0x1F", "1_000", "2001-12-14",  "1e5",
                                             ".5",   "~",    "Null",  "yes",         "-x",
                                             "a: b", "#c",   "*.x",   "2001:db8::1", "x "};
        static const char *const plain[] = {"203.0.113.0/24", "C.UTF-8",       "api.github.com",
                                            "sh -c 'x'",      "/usr/bin:/bin", "a-b_c"};

        (void)state;
        assert_non_null(j);
        assert_int_equal(manifest_json_to_yaml(j, &y), 0);
        assert_string_equal(y, want);
        json_decref(j);
        assert_int_equal(manifest_json_to_yaml(str, &s), 0);
        assert_string_equal(s, "\"no\"\n");
        json_decref(str);
        assert_int_equal(manifest_json_to_yaml(NULL, &s), -EINVAL);
        /* what other (YAML 1.1) readers would take for numbers stays quoted; the rest is plain */
        for (size_t i = 0; i < ARRAY_SIZE(quoted); i++) {
                cleanup_free char *out = NULL, *want_q = NULL;

                str = json_string(quoted[i]);
                assert_int_equal(manifest_json_to_yaml(str, &out), 0);
                json_decref(str);
                assert_true(fk_asprintf(&want_q, "\"%s\"\n", quoted[i]) >= 0);
                assert_string_equal(out, want_q);
        }
        for (size_t i = 0; i < ARRAY_SIZE(plain); i++) {
                cleanup_free char *out = NULL, *want_p = NULL;

                str = json_string(plain[i]);
                assert_int_equal(manifest_json_to_yaml(str, &out), 0);
                json_decref(str);
                assert_true(fk_asprintf(&want_p, "%s\n", plain[i]) >= 0);
                assert_string_equal(out, want_p);
        }
}

static void test_copy_equal(void **state)
{
        const char *text = HDR "metadata: {name: a, labels: {k: v}}\nspec:\n  env: {A: b}\n"
                               "  egress: [x.com, 10.0.0.0/8]\n  ports: [1, 2]\n"
                               "  lifecycle: {afterStart: [sh]}\n  checkpoints: [{name: c}]\n"
                               "  forks: {from: c, count: 2}\n";
        struct session_manifest *m = NULL, *c = NULL;
        struct manifest_diag d = {0};

        (void)state;
        assert_int_equal(mt_parse(text, NULL, &m, &d), 0);
        assert_string_equal(m->source, "t.yaml");
        assert_int_equal(m->source_line, 1);
        assert_int_equal(session_manifest_copy(m, &c), 0);
        assert_true(session_manifest_equal(m, c));
        assert_string_equal(c->source, "t.yaml");
        assert_ptr_not_equal(c->egress, m->egress);
        c->ports[1] = 3;
        assert_false(session_manifest_equal(m, c));
        c->ports[1] = 2;
        c->after_start = fk_strv_free(c->after_start);
        assert_false(session_manifest_equal(m, c));
        session_manifest_free(c);
        assert_int_equal(session_manifest_copy(m, &c), 0);
        c->has_forks = false;
        assert_false(session_manifest_equal(m, c));
        session_manifest_free(c);
        assert_true(session_manifest_equal(NULL, NULL));
        assert_false(session_manifest_equal(m, NULL));
        session_manifest_free(m);
        assert_null(session_manifest_free(NULL));
        assert_null(node_config_free(NULL));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_egress_kinds),
                cmocka_unit_test(test_egress_errors),
                cmocka_unit_test(test_egress_long_names),
                cmocka_unit_test(test_names),
                cmocka_unit_test(test_enums),
                cmocka_unit_test(test_from_json),
                cmocka_unit_test(test_limits),
                cmocka_unit_test(test_too_many_errors),
                cmocka_unit_test(test_json_to_yaml),
                cmocka_unit_test(test_copy_equal),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}

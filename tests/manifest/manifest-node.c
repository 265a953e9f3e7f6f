/* SPDX-License-Identifier: MIT */
/* NodeConfig edge cases: built-in defaults, relative path resolution, the example config,
 * every error of a bad config, and config-dependent Session limits. */
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

#define HDR  "apiVersion: forklet.dev/v1alpha1\nkind: Session\n"
#define NHDR "apiVersion: forklet.dev/v1alpha1\nkind: NodeConfig\n"

static void test_node_defaults(void **state)
{
        struct node_config *c = NULL;
        struct manifest_diag d = {0};
        const char *text = NHDR;

        (void)state;
        assert_int_equal(node_config_default(&c), 0);
        assert_string_equal(c->state_dir, "/var/lib/forklet");
        assert_string_equal(c->run_dir, "/run/forklet");
        assert_string_equal(c->api_socket, "/run/forklet/api.sock");
        assert_null(c->api_listen);
        assert_null(c->api_token_file);
        assert_int_equal(c->accel, ACCEL_AUTO);
        assert_string_equal(c->uplink_pool, "198.18.0.0/16");
        assert_string_equal(c->uplink_interface, "");
        assert_int_equal(fk_strv_length(c->dns), 0);
        assert_int_equal(c->dns_min_ttl_s, 30);
        assert_string_equal(c->cgroup_parent, "forklet");
        assert_int_equal(c->max_forks_per_session, 32);
        assert_int_equal(c->max_sessions, 64);
        assert_int_equal(c->reserve_memory_mib, 1024);
        assert_int_equal(c->cpu_overcommit_percent, 400);
        assert_int_equal(c->qemu_overhead_mib, 128);
        assert_int_equal(c->fork_memory_percent, 25);
        assert_string_equal(c->etcd_prefix, "/forklet");
        assert_int_equal(fk_strv_length(c->etcd), 0);
        assert_non_null(node_config_find_size_class(c, "small"));
        assert_int_equal(node_config_find_size_class(c, "small")->memory_mib, 256);
        assert_string_equal(node_config_find_image(c, "minimal")->dir,
                            "/var/lib/forklet/images/minimal");
        assert_true(c->node_name && c->node_name[0]);
        c = node_config_free(c);

        /* A config with only the header gets the same defaults; runDir moves the socket. */
        text = NHDR "runDir: /tmp/fk-run\n";
        assert_int_equal(node_config_parse(text, strlen(text), "/etc/forklet/node.yaml", &c, &d),
                         0);
        assert_string_equal(c->api_socket, "/tmp/fk-run/api.sock");
        assert_string_equal(c->source, "/etc/forklet/node.yaml");
        assert_int_equal(c->n_size_classes, 1);
        assert_int_equal(c->n_images, 1);
        node_config_free(c);
}

static void test_node_relative_paths(void **state)
{
        const char *text = NHDR "stateDir: ../state\n"
                                "runDir: ./run/./x/../y\n"
                                "manifestDir: /abs/dir/\n"
                                "api: {socket: sock, tokenFile: secrets/token, listen: "
                                "\"127.0.0.1:7070\"}\n"
                                "images:\n  - {name: minimal, dir: ../../images/minimal}\n"
                                "  - {name: other, dir: /srv/img}\n";
        struct node_config *c = NULL;
        struct manifest_diag d = {0};
        cleanup_free char *cwd = getcwd(NULL, 0), *want = NULL;

        (void)state;
        assert_int_equal(
                node_config_parse(text, strlen(text), "/etc/forklet/conf/node.yaml", &c, &d), 0);
        assert_string_equal(c->state_dir, "/etc/forklet/state");
        assert_string_equal(c->run_dir, "/etc/forklet/conf/run/y");
        assert_string_equal(c->manifest_dir, "/abs/dir");
        assert_string_equal(c->api_socket, "/etc/forklet/conf/sock");
        assert_string_equal(c->api_token_file, "/etc/forklet/conf/secrets/token");
        assert_string_equal(c->api_listen, "127.0.0.1:7070");
        assert_string_equal(node_config_find_image(c, "minimal")->dir, "/etc/images/minimal");
        assert_string_equal(node_config_find_image(c, "other")->dir, "/srv/img");
        assert_null(node_config_find_image(c, "nope"));
        c = node_config_free(c);

        /* A relative source resolves against the working directory. */
        assert_int_equal(node_config_parse(text, strlen(text), "conf/node.yaml", &c, &d), 0);
        assert_true(fk_asprintf(&want, "%s/state", cwd) >= 0);
        assert_string_equal(c->state_dir, want);
        node_config_free(c);
}

static void test_node_example(void **state)
{
        const char *src = getenv("FORKLET_SOURCE_DIR");
        cleanup_free char *path = NULL, *want = NULL;
        struct node_config *c = NULL;
        struct manifest_diag d = {0};
        const struct size_class *sc;

        (void)state;
        if (!src)
                skip();
        assert_true(fk_asprintf(&path, "%s/examples/node.yaml", src) >= 0);
        assert_int_equal(node_config_load_file(path, &c, &d), 0);
        assert_string_equal(c->node_name, "node-a");
        assert_int_equal(c->n_size_classes, 3);
        sc = node_config_find_size_class(c, "medium");
        assert_non_null(sc);
        assert_int_equal(sc->vcpus, 2);
        assert_int_equal(sc->memory_mib, 1024);
        assert_true(sc->cpu == 2.0);
        assert_int_equal(sc->pids, 4096);
        assert_int_equal(sc->io_weight, 0);
        assert_true(fk_asprintf(&want, "%s/build/images/minimal", src) >= 0);
        /* the source dir may itself contain symlinks or "..": compare the tail only */
        assert_non_null(strstr(node_config_find_image(c, "minimal")->dir, "/build/images/minimal"));
        assert_true(node_config_find_image(c, "minimal")->dir[0] == '/');
        assert_null(strstr(node_config_find_image(c, "minimal")->dir, ".."));
        node_config_free(c);
}

static void test_node_errors(void **state)
{
        const char *text =
                "apiVersion: forklet.dev/v1alpha1\n"
                "kind: NodeConfig\n"
                "nodeName: Node_A\n"
                "accel: kvmm\n"
                "stateDir: \"\"\n"
                "cgroupParent: ../escape\n"
                "api: {listen: \"localhost:80\", sockt: x}\n"
                "network: {uplinkPool: 198.18.0.1/16, uplinkInterface: "
                "a-very-long-interface-name, dns: [1.1.1.1, dns.example]}\n"
                "sizeClasses:\n"
                "  - {name: small, vcpus: 0, memoryMiB: 256, cpu: 0, pids: 1024}\n"
                "  - {name: small, vcpus: 1, memoryMiB: 256, cpu: 1.0, pids: 1, diskMiB: 8}\n"
                "  - {name: big, memoryMiB: \"1G\", cpu: 1, pids: 1, ioWeight: 0}\n"
                "images: []\n"
                "capacity: {maxSessions: 0, maxForksPerSession: 2000}\n"
                "controlPlane: {etcd: [\"127.0.0.1:2379\"], prefix: forklet}\n";
        static const char *const want[] = {
                ("n.yaml:3:11: nodeName: invalid node name \"Node_A\": expected a lowercase DNS "
                 "name"),
                "n.yaml:4:8: accel: unknown accel mode \"kvmm\" (did you mean \"kvm\"?)",
                "n.yaml:5:11: stateDir: path must not be empty",
                ("n.yaml:6:15: cgroupParent: invalid cgroup path \"../escape\": expected a "
                 "relative path such as \"forklet\" (no \"..\", no leading or trailing '/')"),
                ("n.yaml:7:15: api.listen: invalid address \"localhost:80\": expected an IP "
                 "address and port, as in 127.0.0.1:8080"),
                "n.yaml:7:31: api.sockt: unknown field \"sockt\" (did you mean \"socket\"?)",
                ("n.yaml:8:23: network.uplinkPool: invalid address \"198.18.0.1/16\": address "
                 "has bits set beyond the /16 prefix"),
                ("n.yaml:8:55: network.uplinkInterface: invalid interface name "
                 "\"a-very-long-interface-name\" (at most 15 characters, no '/', ':' or spaces)"),
                ("n.yaml:8:98: network.dns[1]: invalid address \"dns.example\": expected an IP "
                 "address"),
                "n.yaml:10:26: sizeClasses[0].vcpus: 0 is out of range (1..255)",
                "n.yaml:10:50: sizeClasses[0].cpu: 0 is out of range (0.01..1024)",
                "n.yaml:11:12: sizeClasses[1].name: duplicate name \"small\"",
                "n.yaml:11:73: sizeClasses[1].diskMiB: 8 is out of range (64..16777216)",
                "n.yaml:12:5: sizeClasses[2].vcpus: required field missing",
                ("n.yaml:12:28: sizeClasses[2].memoryMiB: expected an integer, got a string "
                 "\"1G\""),
                "n.yaml:12:61: sizeClasses[2].ioWeight: 0 is out of range (1..10000)",
                "n.yaml:13:9: images: at least one image is needed",
                "n.yaml:14:25: capacity.maxSessions: 0 is out of range (1..100000)",
                "n.yaml:14:48: capacity.maxForksPerSession: 2000 is out of range (0..1024)",
                ("n.yaml:15:23: controlPlane.etcd[0]: invalid etcd endpoint \"127.0.0.1:2379\": "
                 "expected an http:// or https:// URL"),
                "n.yaml:15:50: controlPlane.prefix: must start with '/' (got \"forklet\")",
        };
        struct node_config *c = NULL;
        struct manifest_diag d = {0};

        (void)state;
        assert_int_equal(node_config_parse(text, strlen(text), "n.yaml", &c, &d), -EINVAL);
        assert_null(c);
        mt_assert_diag(&d, want, ARRAY_SIZE(want));

        text = NHDR "---\n" NHDR;
        assert_int_equal(node_config_parse(text, strlen(text), "n.yaml", &c, &d), -EINVAL);
        mt_assert_diag(
                &d, (const char *const[]){"n.yaml:4:1: a node config holds exactly one document"},
                1);
        text = "apiVersion: forklet.dev/v1alpha1\nkind: Session\nmetadata: {name: a}\n";
        assert_int_equal(node_config_parse(text, strlen(text), "n.yaml", &c, &d), -EINVAL);
        mt_assert_diag(&d,
                       (const char *const[]){("n.yaml:2:7: kind: expected kind \"NodeConfig\", got "
                                              "\"Session\""),
                                             ("n.yaml:3:1: metadata: unknown field \"metadata\" "
                                              "(known: apiVersion, kind, nodeName, stateDir, "
                                              "runDir, accel, manifestDir, api, network, "
                                              "cgroupParent, sizeClasses, images, capacity, "
                                              "controlPlane, labels, jail, secrets, "
                                              "hardening, health, diskPressure, registries, "
                                              "memoryGiveBack)")},
                       2);
        assert_int_equal(node_config_load_file("/nonexistent/node.yaml", &c, &d), -ENOENT);
        mt_assert_diag(&d,
                       (const char *const[]){"/nonexistent/node.yaml: cannot read: No such file or "
                                             "directory"},
                       1);
}

/* Node labels (matched by spec.nodeSelector in cluster mode) follow the label rules. */
static void test_node_labels(void **state)
{
        struct node_config *c = NULL;
        struct manifest_diag d = {0};
        const char *text = NHDR "images: [{name: minimal, dir: /i}]\n"
                                "labels: {zone: lab-1, disk: ssd}\n";

        (void)state;
        assert_int_equal(node_config_parse(text, strlen(text), "n.yaml", &c, &d), 0);
        assert_int_equal(c->n_labels, 2);
        assert_string_equal(c->labels[0].key, "zone");
        assert_string_equal(c->labels[0].value, "lab-1");
        assert_string_equal(c->labels[1].key, "disk");
        node_config_free(c);
        c = NULL;
        text = NHDR "images: [{name: minimal, dir: /i}]\nlabels: {zone: \"a b\"}\n";
        assert_int_equal(node_config_parse(text, strlen(text), "n.yaml", &c, &d), -EINVAL);
        assert_null(c);
        assert_int_equal(d.n, 1);
        assert_non_null(strstr(d.messages[0], "labels.zone: invalid label value \"a b\""));
        manifest_diag_done(&d);
}

static void test_config_limits(void **state)
{
        const char *cfg_text = NHDR "sizeClasses:\n  - {name: tiny, vcpus: 1, memoryMiB: 64, "
                                    "cpu: 0.5, pids: 64, ioWeight: 100, diskMiB: 2048}\n"
                                    "capacity: {maxForksPerSession: 64}\n";
        const char *m50 = HDR "metadata: {name: a}\nspec:\n  sizeClass: tiny\n  checkpoints: "
                              "[{name: c}]\n  forks: {from: c, count: 50}\n";
        struct session_manifest *m = NULL;
        struct node_config *c = NULL;
        struct manifest_diag d = {0};

        (void)state;
        assert_int_equal(node_config_parse(cfg_text, strlen(cfg_text), "/n.yaml", &c, &d), 0);
        assert_int_equal(node_config_find_size_class(c, "tiny")->io_weight, 100);
        assert_int_equal(node_config_find_size_class(c, "tiny")->disk_mib, 2048);
        assert_true(node_config_find_size_class(c, "tiny")->cpu == 0.5);
        assert_int_equal(mt_parse(m50, c, &m, &d), 0);
        assert_int_equal(m->forks_count, 50);
        assert_string_equal(m->size_class, "tiny");
        m = session_manifest_free(m);
        /* Without a config: any well-formed class name, at most 32 forks. */
        assert_int_equal(mt_parse(m50, NULL, &m, &d), -EINVAL);
        mt_assert_diag(&d,
                       (const char *const[]){"t.yaml:7:27: spec.forks.count: 50 is out of range "
                                             "(0..32)"},
                       1);
        node_config_free(c);
}

/* hardening.dropCapabilities: on by default, false turns it off, nothing else accepted. */
static void test_node_hardening(void **state)
{
        const char *off = NHDR "hardening: {dropCapabilities: false}\n";
        const char *on = NHDR "hardening: {dropCapabilities: True}\n";
        const char *bad = NHDR "hardening: {dropCapabilities: \"no\", dropCaps: 1}\n";
        struct node_config *c = NULL;
        struct manifest_diag d = {0};

        (void)state;
        assert_int_equal(node_config_default(&c), 0);
        assert_true(c->drop_capabilities);
        c = node_config_free(c);
        assert_int_equal(node_config_parse(NHDR, strlen(NHDR), "/n.yaml", &c, &d), 0);
        assert_true(c->drop_capabilities);
        c = node_config_free(c);
        assert_int_equal(node_config_parse(off, strlen(off), "/n.yaml", &c, &d), 0);
        assert_false(c->drop_capabilities);
        c = node_config_free(c);
        assert_int_equal(node_config_parse(on, strlen(on), "/n.yaml", &c, &d), 0);
        assert_true(c->drop_capabilities);
        c = node_config_free(c);
        assert_int_equal(node_config_parse(bad, strlen(bad), "n.yaml", &c, &d), -EINVAL);
        assert_null(c);
        mt_assert_diag(&d,
                       (const char *const[]){
                               ("n.yaml:3:31: hardening.dropCapabilities: must be true or false, "
                                "got a string"),
                               ("n.yaml:3:37: hardening.dropCaps: unknown field \"dropCaps\" "
                                "(known: dropCapabilities)"),
                       },
                       2);
}

/* health and diskPressure: defaults, values, and every bad value named by its field. */
static void test_node_health(void **state)
{
        const char *set = NHDR "health: {livenessIntervalSeconds: 0, failureThreshold: 5}\n"
                               "diskPressure: {resume: manual, minFreeMiB: 8}\n";
        const char *bad = NHDR "health: {livenessIntervalSeconds: -1, failureThreshold: 0, "
                               "interval: 3}\n"
                               "diskPressure: {resume: automatic, minFreeMiB: 0}\n";
        struct node_config *c = NULL;
        struct manifest_diag d = {0};

        (void)state;
        assert_int_equal(node_config_default(&c), 0);
        assert_int_equal(c->liveness_interval_s, 15);
        assert_int_equal(c->liveness_failure_threshold, 4);
        assert_true(c->disk_pressure_auto_resume);
        assert_int_equal(c->disk_pressure_min_free_mib, 64);
        c = node_config_free(c);
        assert_int_equal(node_config_parse(set, strlen(set), "/n.yaml", &c, &d), 0);
        assert_int_equal(c->liveness_interval_s, 0);
        assert_int_equal(c->liveness_failure_threshold, 5);
        assert_false(c->disk_pressure_auto_resume);
        assert_int_equal(c->disk_pressure_min_free_mib, 8);
        c = node_config_free(c);
        assert_int_equal(node_config_parse(bad, strlen(bad), "n.yaml", &c, &d), -EINVAL);
        assert_null(c);
        mt_assert_diag(
                &d,
                (const char *const[]){
                        "n.yaml:3:35: health.livenessIntervalSeconds: -1 is out of range "
                        "(0..3600)",
                        "n.yaml:3:57: health.failureThreshold: 0 is out of range (1..100)",
                        ("n.yaml:3:60: health.interval: unknown field \"interval\" "
                         "(known: livenessIntervalSeconds, failureThreshold)"),
                        ("n.yaml:4:24: diskPressure.resume: unknown resume mode "
                         "\"automatic\" (known: auto, manual)"),
                        "n.yaml:4:47: diskPressure.minFreeMiB: 0 is out of range (1..1048576)",
                },
                5);
}

/* memoryGiveBack: defaults, values, and every bad value named by its field. */
static void test_node_give_back(void **state)
{
        const char *set = NHDR "memoryGiveBack: {enabled: false, intervalSeconds: 0, "
                               "thresholdMiB: 64, marginMiB: 0}\n";
        const char *bad = NHDR "memoryGiveBack: {enabled: 1, intervalSeconds: -1, thresholdMiB: "
                               "0, often: 2}\n";
        struct node_config *c = NULL;
        struct manifest_diag d = {0};

        (void)state;
        assert_int_equal(node_config_default(&c), 0);
        assert_true(c->give_back_enabled);
        assert_int_equal(c->give_back_interval_s, 30);
        assert_int_equal(c->give_back_threshold_mib, 32);
        assert_int_equal(c->give_back_margin_mib, 16);
        c = node_config_free(c);
        assert_int_equal(node_config_parse(set, strlen(set), "/n.yaml", &c, &d), 0);
        assert_false(c->give_back_enabled);
        assert_int_equal(c->give_back_interval_s, 0);
        assert_int_equal(c->give_back_threshold_mib, 64);
        assert_int_equal(c->give_back_margin_mib, 0);
        c = node_config_free(c);
        assert_int_equal(node_config_parse(bad, strlen(bad), "n.yaml", &c, &d), -EINVAL);
        assert_null(c);
        mt_assert_diag(&d,
                       (const char *const[]){
                               "n.yaml:3:27: memoryGiveBack.enabled: must be true or false, got an "
                               "integer",
                               ("n.yaml:3:47: memoryGiveBack.intervalSeconds: -1 is out of range "
                                "(0..86400)"),
                               ("n.yaml:3:65: memoryGiveBack.thresholdMiB: 0 is out of range "
                                "(1..1048576)"),
                               ("n.yaml:3:68: memoryGiveBack.often: unknown field \"often\" "
                                "(known: enabled, intervalSeconds, thresholdMiB, marginMiB)"),
                       },
                       4);
}

/* api: a non-loopback listen only with TLS, a token for any listen, cert and key together,
 * api.url (https, no path; derived from a specific listen address). */
static void test_node_api_tls(void **state)
{
        const char *ok = NHDR "api: {listen: \"192.0.2.10:7443\", tokenFile: t, tlsCert: c.pem, "
                              "tlsKey: k.pem, tlsClientCA: ca.pem}\n";
        const char *url = NHDR "api: {listen: \"0.0.0.0:7443\", tokenFile: t, tlsCert: c.pem, "
                               "tlsKey: k.pem, url: \"https://node-a.example:7443\"}\n"
                               "controlPlane: {etcd: [\"http://127.0.0.1:2379\"]}\n";
        const char *plain = NHDR "api: {listen: \"127.0.0.1:7443\", tokenFile: t}\n";
        const char *bad = NHDR "api: {listen: \"192.0.2.10:7443\"}\n";
        const char *bad2 = NHDR "api: {tlsCert: c.pem, url: \"http://x:1/p\"}\n";
        const char *bad3 = NHDR "api: {listen: \"0.0.0.0:7443\", tokenFile: t, tlsKey: k.pem, "
                                "tlsCert: c.pem}\ncontrolPlane: {etcd: [\"http://127.0.0.1:1\"]}\n";
        const char *bad4 = NHDR "api: {listen: \"[::1]:7443\", tokenFile: t, tlsClientCA: ca}\n";
        struct node_config *c = NULL;
        struct manifest_diag d = {0};

        (void)state;
        assert_int_equal(node_config_parse(ok, strlen(ok), "/etc/forklet/n.yaml", &c, &d), 0);
        assert_string_equal(c->api_tls_cert, "/etc/forklet/c.pem");
        assert_string_equal(c->api_tls_key, "/etc/forklet/k.pem");
        assert_string_equal(c->api_tls_client_ca, "/etc/forklet/ca.pem");
        assert_string_equal(c->api_url, "https://192.0.2.10:7443");
        c = node_config_free(c);
        assert_int_equal(node_config_parse(url, strlen(url), "/n.yaml", &c, &d), 0);
        assert_string_equal(c->api_url, "https://node-a.example:7443");
        c = node_config_free(c);
        /* loopback without TLS: as before, and nothing to publish */
        assert_int_equal(node_config_parse(plain, strlen(plain), "/n.yaml", &c, &d), 0);
        assert_null(c->api_url);
        assert_null(c->api_tls_cert);
        c = node_config_free(c);

        assert_int_equal(node_config_parse(bad, strlen(bad), "n.yaml", &c, &d), -EINVAL);
        mt_assert_diag(
                &d,
                (const char *const[]){
                        ("n.yaml:3:15: api.tokenFile: required with api.listen: every TCP "
                         "request must carry \"Authorization: Bearer TOKEN\" (a file of mode "
                         "0600 holding at least 32 bytes)"),
                        ("n.yaml:3:15: api.listen: \"192.0.2.10:7443\" is not a loopback "
                         "address: serving the API beyond this host needs TLS: set "
                         "api.tlsCert and api.tlsKey (PEM files) or listen on 127.0.0.1"),
                },
                2);
        assert_int_equal(node_config_parse(bad2, strlen(bad2), "n.yaml", &c, &d), -EINVAL);
        mt_assert_diag(
                &d,
                (const char *const[]){
                        ("n.yaml:3:16: api.tlsKey: required with api.tlsCert: the PEM private "
                         "key of the certificate"),
                        ("n.yaml:3:16: api.listen: required with api.tlsCert/api.tlsKey: the "
                         "IPv4:PORT the TLS listener serves on"),
                        ("n.yaml:3:28: api.url: needs api.tlsCert and api.tlsKey (the URL is "
                         "served over https)"),
                },
                3);
        assert_int_equal(node_config_parse(bad3, strlen(bad3), "n.yaml", &c, &d), -EINVAL);
        mt_assert_diag(
                &d,
                (const char *const[]){
                        ("n.yaml:3:15: api.url: required when api.listen is 0.0.0.0 in "
                         "cluster mode: the https://HOST:PORT other hosts reach this node at"),
                },
                1);
        assert_int_equal(node_config_parse(bad4, strlen(bad4), "n.yaml", &c, &d), -EINVAL);
        mt_assert_diag(&d,
                       (const char *const[]){
                               ("n.yaml:3:15: api.listen: invalid address \"[::1]:7443\": expected "
                                "an IP address and port, as in 127.0.0.1:8080"),
                               ("n.yaml:3:56: api.tlsClientCA: needs api.tlsCert and api.tlsKey "
                                "(client certificates are checked only on a TLS listener)"),
                       },
                       2);
        assert_null(c);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_node_defaults),  cmocka_unit_test(test_node_relative_paths),
                cmocka_unit_test(test_node_example),   cmocka_unit_test(test_node_errors),
                cmocka_unit_test(test_config_limits),  cmocka_unit_test(test_node_labels),
                cmocka_unit_test(test_node_hardening), cmocka_unit_test(test_node_api_tls),
                cmocka_unit_test(test_node_health),    cmocka_unit_test(test_node_give_back),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: MIT */
/* The TLS listener's building blocks: the public-key pin against a vector computed by openssl,
 * loading cert/key/client CA (a group-readable key is refused naming api.tlsKey), the MHD
 * options, non-loopback listen addresses only with TLS, and the node status api fields. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/cluster/cluster.h"
#include "agent/api/api-internal.h"
#include "agent/daemon/daemon-internal.h"
#include "agent/cluster/cluster.h"
#include "common/cleanup.h"
#include "common/util.h"
#include "manifest/manifest.h"

/* A throwaway self-signed P-256 certificate and its pin, both made by openssl:
 * openssl x509 -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary
 * | base64 */
static const char cert_pem[] = "-----BEGIN CERTIFICATE-----\n"
                               "MIIBeTCCAR+gAwIBAgIUafAo48ldcbzo/FZcfnU25e6pR/0wCgYIKoZIzj0EAwIw\n"
                               "ETEPMA0GA1UEAwwGZmsta2F0MCAXDTI2MTEyOTEyNDMzMFoYDzIxMjYxMTA1MTI0\n"
                               "MzMwWjARMQ8wDQYDVQQDDAZmay1rYXQwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNC\n"
                               "AARfS8o27XAnBt0O9iP6g+O04fEGuzqGm9rqw9NI6XZvL062MBvdyCxIA2JqYBBF\n"
                               "mHiJCA7+FrA1YsAvmt05lgZPo1MwUTAdBgNVHQ4EFgQU4LoLIzPOg7Bo7UzXMwNj\n"
                               "hXj7cQMwHwYDVR0jBBgwFoAU4LoLIzPOg7Bo7UzXMwNjhXj7cQMwDwYDVR0TAQH/\n"
                               "BAUwAwEB/zAKBggqhkjOPQQDAgNIADBFAiB4flsTQP3Fgy43pLBwn+a/hHE9dMXD\n"
                               "5o+4o/PCyGQWhwIhAOv/p67GuSz87yfP9cKrrojs8lFh5dHUb9MGCOoKqWnc\n"
                               "-----END CERTIFICATE-----\n";
static const char cert_pin[] = "sha256//yOAJ6tvxh+BzyT5khngzZJeGktnjtUWLat1qcFYl/nI=";
/* api_tls_load checks the key's mode and PEM framing; GnuTLS parses it when MHD starts. */
static const char key_pem[] = "-----BEGIN PRIVATE KEY-----\nnot-a-key\n-----END PRIVATE KEY-----\n";

struct tmp {
        char dir[64];
        char cert[96], key[96], ca[96];
};

static int tmp_setup(void **state)
{
        struct tmp *t = calloc(1, sizeof(*t));

        assert_non_null(t);
        strcpy(t->dir, "/tmp/fk-tls-XXXXXX");
        assert_non_null(mkdtemp(t->dir));
        snprintf(t->cert, sizeof(t->cert), "%s/c.pem", t->dir);
        snprintf(t->key, sizeof(t->key), "%s/k.pem", t->dir);
        snprintf(t->ca, sizeof(t->ca), "%s/ca.pem", t->dir);
        assert_int_equal(fk_write_file_atomic(t->cert, cert_pem, strlen(cert_pem), 0644), 0);
        assert_int_equal(fk_write_file_atomic(t->ca, cert_pem, strlen(cert_pem), 0644), 0);
        assert_int_equal(fk_write_file_atomic(t->key, key_pem, strlen(key_pem), 0600), 0);
        assert_int_equal(chmod(t->key, 0600), 0);
        *state = t;
        return 0;
}

static int tmp_teardown(void **state)
{
        struct tmp *t = *state;

        fk_rm_rf(t->dir);
        free(t);
        return 0;
}

static void test_pin(void **state)
{
        struct fk_error err = {0};
        char pin[API_TLS_PIN_MAX];

        (void)state;
        assert_int_equal(api_tls_public_key_pin(cert_pem, pin, sizeof(pin), &err), 0);
        assert_string_equal(pin, cert_pin);
        assert_int_equal(api_tls_public_key_pin(key_pem, pin, sizeof(pin), &err), -EINVAL);
        assert_int_equal(api_tls_public_key_pin(cert_pem, pin, 20, &err), -ENOBUFS);
}

static void test_load(void **state)
{
        struct tmp *t = *state;
        struct node_config cfg = {.api_tls_cert = t->cert, .api_tls_key = t->key};
        struct fk_error err = {0};
        struct api_tls tls = {0};
        struct MHD_OptionItem opts[6];

        assert_int_equal(api_tls_load(&cfg, &tls, &err), 0);
        assert_true(tls.on);
        assert_string_equal(tls.pin, cert_pin);
        assert_null(tls.client_ca);
        assert_int_equal(api_tls_options(&tls, opts, ARRAY_SIZE(opts)), 3);
        assert_int_equal(opts[0].option, MHD_OPTION_HTTPS_MEM_CERT);
        assert_int_equal(opts[1].option, MHD_OPTION_HTTPS_MEM_KEY);
        assert_int_equal(opts[3].option, MHD_OPTION_END);
        api_tls_done(&tls);
        assert_false(tls.on);

        cfg.api_tls_client_ca = t->ca;
        assert_int_equal(api_tls_load(&cfg, &tls, &err), 0);
        assert_non_null(tls.client_ca);
        assert_int_equal(api_tls_options(&tls, opts, ARRAY_SIZE(opts)), 4);
        assert_int_equal(opts[3].option, MHD_OPTION_HTTPS_MEM_TRUST);
        api_tls_done(&tls);

        /* no TLS configured: nothing loaded, no options */
        assert_int_equal(api_tls_load(&(struct node_config){0}, &tls, &err), 0);
        assert_false(tls.on);
        assert_int_equal(api_tls_options(&tls, opts, ARRAY_SIZE(opts)), 0);
}

static void test_load_refuses(void **state)
{
        struct tmp *t = *state;
        struct node_config cfg = {.api_tls_cert = t->cert, .api_tls_key = t->key};
        struct fk_error err = {0};
        struct api_tls tls = {0};

        assert_int_equal(chmod(t->key, 0640), 0);
        assert_int_equal(api_tls_load(&cfg, &tls, &err), -EPERM);
        assert_non_null(strstr(err.msg, "api.tlsKey"));
        assert_non_null(strstr(err.msg, "not be readable by group or others (mode is 0640"));
        assert_int_equal(chmod(t->key, 0604), 0);
        assert_int_equal(api_tls_load(&cfg, &tls, &err), -EPERM);
        assert_int_equal(chmod(t->key, 0600), 0);
        /* a directory, or a file that is not PEM: named */
        cfg.api_tls_cert = t->dir;
        assert_int_equal(api_tls_load(&cfg, &tls, &err), -EINVAL);
        assert_non_null(strstr(err.msg, "api.tlsCert"));
        assert_int_equal(fk_write_file_atomic(t->ca, "garbage\n", 8, 0644), 0);
        cfg.api_tls_cert = t->cert;
        cfg.api_tls_client_ca = t->ca;
        assert_int_equal(api_tls_load(&cfg, &tls, &err), -EINVAL);
        assert_non_null(strstr(err.msg, "api.tlsClientCA"));
        assert_non_null(strstr(err.msg, "not a PEM file"));
        /* a key without its certificate */
        cfg = (struct node_config){.api_tls_key = t->key};
        assert_int_equal(api_tls_load(&cfg, &tls, &err), -EINVAL);
        assert_false(tls.on);
        assert_null(tls.cert);
}

static void test_listen_tls(void **state)
{
        struct fk_error err = {0};
        struct sockaddr_in sa;

        (void)state;
        assert_int_equal(api_parse_listen("192.0.2.10:7443", false, &sa, &err), -EPERM);
        assert_non_null(strstr(err.msg, "api.tlsCert and api.tlsKey"));
        assert_int_equal(api_parse_listen("192.0.2.10:7443", true, &sa, &err), 0);
        assert_int_equal(ntohs(sa.sin_port), 7443);
        assert_int_equal(api_parse_listen("0.0.0.0:7443", true, &sa, &err), 0);
}

static void test_status_api(void **state)
{
        struct node_config *cfg = NULL;
        struct core_cluster_node_report rep = {.api_pin = cert_pin, .host_id = "0123456789abcdef"};
        char id[FK_HOST_ID_SIZE], id2[FK_HOST_ID_SIZE];
        json_t *j, *api;

        (void)state;
        assert_int_equal(node_config_default(&cfg), 0);
        j = core_cluster_node_status_json(cfg, &rep, 0);
        api = json_object_get(j, "api");
        /* no TLS listener: no url, so no pin either (nothing to pin) */
        assert_null(json_object_get(api, "url"));
        assert_null(json_object_get(api, "pinnedPublicKey"));
        assert_string_equal(json_string_value(json_object_get(api, "hostID")), "0123456789abcdef");
        assert_non_null(json_string_value(json_object_get(api, "socket")));
        json_decref(j);
        cfg->api_url = strdup("https://192.0.2.10:7443");
        j = core_cluster_node_status_json(cfg, &rep, 0);
        api = json_object_get(j, "api");
        assert_string_equal(json_string_value(json_object_get(api, "url")),
                            "https://192.0.2.10:7443");
        assert_string_equal(json_string_value(json_object_get(api, "pinnedPublicKey")), cert_pin);
        json_decref(j);
        node_config_free(cfg);
        assert_int_equal(fk_host_id(id), 0);
        assert_int_equal(fk_host_id(id2), 0);
        assert_int_equal(strlen(id), 32);
        assert_string_equal(id, id2);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_pin),
                cmocka_unit_test_setup_teardown(test_load, tmp_setup, tmp_teardown),
                cmocka_unit_test_setup_teardown(test_load_refuses, tmp_setup, tmp_teardown),
                cmocka_unit_test(test_listen_tls),
                cmocka_unit_test(test_status_api),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}

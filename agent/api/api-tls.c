/* SPDX-License-Identifier: MIT */
/* TLS of the TCP API listener: the PEM certificate, key (mode 0600 or stricter) and optional
 * client CA read into memory for libmicrohttpd (GnuTLS), the public-key pin the node publishes
 * (curl's "sha256//BASE64" of the certificate's SubjectPublicKeyInfo), and the client
 * certificate check of mutual TLS. */
#include "agent/api/api-internal.h"
#include "common/cleanup.h"
#include "common/util.h"
#include "manifest/manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TLS_FILE_MAX (1024 * 1024)

/* Reads a PEM file; private: refuse one that group or others may read. */
static int read_pem(const char *field, const char *path, bool private, char **ret,
                    struct fk_error *err)
{
        cleanup_close int fd = -1;
        struct stat st;
        size_t n;
        int r;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0 || fstat(fd, &st) < 0)
                return fk_error_set(err, -errno, "%s %s: %m", field, path);
        if (!S_ISREG(st.st_mode))
                return fk_error_set(err, -EINVAL, "%s %s: not a regular file", field, path);
        if (private && (st.st_mode & 077))
                return fk_error_set(err, -EPERM,
                                    "%s %s: a private key must not be readable by group or "
                                    "others (mode is %04o; chmod 600 it)",
                                    field, path, (unsigned)(st.st_mode & 07777));
        r = fk_read_file(path, TLS_FILE_MAX, ret, &n);
        if (r < 0)
                return fk_error_set(err, r, "%s %s: %s", field, path, strerror(-r));
        if (!strstr(*ret, "-----BEGIN ")) {
                free(*ret);
                *ret = NULL;
                return fk_error_set(err, -EINVAL, "%s %s: not a PEM file", field, path);
        }
        return 0;
}

int api_tls_public_key_pin(const char *cert_pem, char *out, size_t size, struct fk_error *err)
{
        gnutls_datum_t in = {(unsigned char *)cert_pem, (unsigned)strlen(cert_pem)}, der = {0};
        uint8_t digest[FK_SHA256_SIZE];
        struct fk_sha256 h;
        gnutls_x509_crt_t crt = NULL;
        gnutls_pubkey_t pub = NULL;
        cleanup_free char *b64 = NULL;
        int g;

        g = gnutls_x509_crt_init(&crt);
        if (g >= 0)
                g = gnutls_x509_crt_import(crt, &in, GNUTLS_X509_FMT_PEM);
        if (g >= 0)
                g = gnutls_pubkey_init(&pub);
        if (g >= 0)
                g = gnutls_pubkey_import_x509(pub, crt, 0);
        if (g >= 0)
                g = gnutls_pubkey_export2(pub, GNUTLS_X509_FMT_DER, &der);
        gnutls_pubkey_deinit(pub);
        gnutls_x509_crt_deinit(crt);
        if (g < 0)
                return fk_error_set(err, -EINVAL, "certificate: %s", gnutls_strerror(g));
        fk_sha256_init(&h);
        fk_sha256_update(&h, der.data, der.size);
        fk_sha256_final(&h, digest);
        gnutls_free(der.data);
        if (fk_base64_encode(digest, sizeof(digest), &b64) < 0)
                return fk_error_set(err, -ENOMEM, "out of memory");
        if ((size_t)snprintf(out, size, "sha256//%s", b64) >= size)
                return fk_error_set(err, -ENOBUFS, "pin buffer too small");
        return 0;
}

int api_tls_pin_file(const char *cert_path, char *out, size_t size, struct fk_error *err)
{
        cleanup_free char *pem = NULL;
        int r = read_pem("api.tlsCert", cert_path, false, &pem, err);

        return r < 0 ? r : api_tls_public_key_pin(pem, out, size, err);
}

void api_tls_done(struct api_tls *t)
{
        if (t->key)
                explicit_bzero(t->key, strlen(t->key));
        free(t->key);
        free(t->cert);
        free(t->client_ca);
        *t = (struct api_tls){0};
}

int api_tls_load(const struct node_config *cfg, struct api_tls *ret, struct fk_error *err)
{
        struct api_tls t = {0};
        int r;

        if (!cfg->api_tls_cert && !cfg->api_tls_key)
                return 0;
        if (!cfg->api_tls_cert || !cfg->api_tls_key)
                return fk_error_set(err, -EINVAL, "api.tlsCert and api.tlsKey go together");
        if (!MHD_is_feature_supported(MHD_FEATURE_TLS))
                return fk_error_set(err, -EOPNOTSUPP,
                                    "api.tlsCert: this libmicrohttpd was built without TLS");
        r = read_pem("api.tlsCert", cfg->api_tls_cert, false, &t.cert, err);
        if (r >= 0)
                r = read_pem("api.tlsKey", cfg->api_tls_key, true, &t.key, err);
        if (r >= 0 && cfg->api_tls_client_ca)
                r = read_pem("api.tlsClientCA", cfg->api_tls_client_ca, false, &t.client_ca, err);
        if (r >= 0)
                r = api_tls_public_key_pin(t.cert, t.pin, sizeof(t.pin), err);
        if (r < 0) {
                api_tls_done(&t);
                return r;
        }
        t.on = true;
        *ret = t;
        return 0;
}

size_t api_tls_options(const struct api_tls *t, struct MHD_OptionItem *opts, size_t max)
{
        size_t n = 0;

        if (!t->on || max < 5)
                return 0;
        opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, t->cert};
        opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, t->key};
        /* TLS 1.2 and 1.3 only, GnuTLS's secure defaults otherwise. */
        opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_PRIORITIES, 0,
                                            (void *)"SECURE:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"};
        if (t->client_ca)
                opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_TRUST, 0, t->client_ca};
        opts[n] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
        return n;
}

int api_tls_check_client(struct MHD_Connection *c)
{
        const union MHD_ConnectionInfo *ci;
        gnutls_session_t session;
        unsigned status = 0;

        ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
        if (!ci || !ci->tls_session)
                return -EACCES;
        session = (gnutls_session_t)ci->tls_session;
        /* Verified against the trust list MHD_OPTION_HTTPS_MEM_TRUST set (api.tlsClientCA). */
        if (gnutls_certificate_type_get(session) != GNUTLS_CRT_X509 ||
            !gnutls_certificate_get_peers(session, &(unsigned){0}) ||
            gnutls_certificate_verify_peers2(session, &status) < 0 || status != 0)
                return -EACCES;
        return 0;
}

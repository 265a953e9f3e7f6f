/* SPDX-License-Identifier: MIT */
/* API authentication: the caller of a unix-socket request (SO_PEERCRED uid), and the bearer
 * token of the optional TCP listener (loaded from api.tokenFile, >= 32 bytes,
 * compared in constant time). */
#include "agent/api/api-internal.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#define TOKEN_FILE_MAX 4096

int api_token_load(const char *path, struct api_token *ret, struct fk_error *err)
{
        cleanup_free char *buf = NULL;
        cleanup_close int fd = -1;
        struct stat st;
        size_t n;
        int r;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0 || fstat(fd, &st) < 0)
                return fk_error_set(err, -errno, "api.tokenFile %s: %m", path);
        if (!S_ISREG(st.st_mode) || (st.st_mode & 077))
                return fk_error_set(err, -EPERM,
                                    "api.tokenFile %s: must be a regular file of mode 0600 or "
                                    "stricter (is %04o)",
                                    path, (unsigned)(st.st_mode & 07777));
        r = fk_read_file(path, TOKEN_FILE_MAX, &buf, &n);
        if (r < 0)
                return fk_error_set(err, r, "api.tokenFile %s: %s", path, strerror(-r));
        while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
                buf[--n] = '\0';
        if (n < API_TOKEN_MIN || n >= sizeof(ret->value))
                return fk_error_set(err, -EINVAL,
                                    "api.tokenFile %s: token is %zu bytes; it must be %d to %zu "
                                    "bytes (e.g. head -c 32 /dev/urandom | base64)",
                                    path, n, API_TOKEN_MIN, sizeof(ret->value) - 1);
        for (size_t i = 0; i < n; i++)
                if (buf[i] <= ' ' || buf[i] == 0x7f)
                        return fk_error_set(err, -EINVAL,
                                            "api.tokenFile %s: token has whitespace or control "
                                            "characters",
                                            path);
        memcpy(ret->value, buf, n + 1);
        ret->size = n;
        fk_sha256_hex(buf, n, ret->id);
        ret->id[12] = '\0'; /* a short public fingerprint for the audit log */
        return 0;
}

bool api_token_equal(const struct api_token *t, const char *given)
{
        size_t n = strlen(given);
        unsigned char diff = (unsigned char)(n != t->size);

        /* Always walk the whole expected token: the time depends on its length only. */
        for (size_t i = 0; i < t->size; i++)
                diff |= (unsigned char)(t->value[i] ^ (i < n ? given[i] : 0));
        return diff == 0;
}

/* "Bearer TOKEN" from the Authorization header, or NULL. */
static const char *bearer(struct MHD_Connection *c)
{
        const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");

        if (!h || strncasecmp(h, "Bearer ", 7) != 0)
                return NULL;
        h += 7;
        while (*h == ' ')
                h++;
        return h;
}

int api_authenticate(struct MHD_Connection *c, bool tcp, const struct api_token *t, char *caller,
                     size_t size)
{
        const union MHD_ConnectionInfo *ci;
        struct ucred cred;
        socklen_t len = sizeof(cred);
        const char *given;

        if (tcp) {
                given = bearer(c);
                if (!given || !api_token_equal(t, given))
                        return -EACCES;
                snprintf(caller, size, "token:%s", t->id);
                return 0;
        }
        ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci && getsockopt(ci->connect_fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0)
                snprintf(caller, size, "uid:%u", (unsigned)cred.uid);
        else
                snprintf(caller, size, "uid:unknown");
        return 0;
}

int api_parse_listen(const char *listen, bool tls, struct sockaddr_in *ret, struct fk_error *err)
{
        char host[64];
        const char *colon = strrchr(listen, ':');
        unsigned long port;
        char *end;

        if (!colon || (size_t)(colon - listen) >= sizeof(host))
                return fk_error_set(err, -EINVAL, "api.listen \"%s\": want 127.0.0.1:PORT", listen);
        memcpy(host, listen, (size_t)(colon - listen));
        host[colon - listen] = '\0';
        port = strtoul(colon + 1, &end, 10);
        *ret = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        if (*end || port == 0 || port > 65535 || inet_pton(AF_INET, host, &ret->sin_addr) != 1)
                return fk_error_set(err, -EINVAL, "api.listen \"%s\": want 127.0.0.1:PORT", listen);
        if (!tls && (ntohl(ret->sin_addr.s_addr) >> 24) != 127)
                return fk_error_set(err, -EPERM,
                                    "api.listen \"%s\": only loopback addresses (127.0.0.0/8) "
                                    "are allowed without TLS (set api.tlsCert and api.tlsKey)",
                                    listen);
        return 0;
}

/* SPDX-License-Identifier: MIT */
/* Which host a node runs on, as the node publishes it (api.hostID) and the CLI compares it: a
 * SHA-256 of /etc/machine-id (the hostname when there is none), so the id itself stays private. */
#include "common/cleanup.h"
#include "common/util.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int fk_host_id(char out[FK_HOST_ID_SIZE])
{
        cleanup_free char *id = NULL, *text = NULL;
        char hex[2 * FK_SHA256_SIZE + 1], host[256] = "";
        size_t n = 0;

        if (fk_read_file("/etc/machine-id", 4096, &id, &n) < 0 || n < 16) {
                if (gethostname(host, sizeof(host) - 1) < 0 || !host[0])
                        return -ENOENT;
        }
        if (fk_asprintf(&text, "forklet host id\n%s", id && n >= 16 ? id : host) < 0)
                return -ENOMEM;
        fk_sha256_hex(text, strlen(text), hex);
        snprintf(out, FK_HOST_ID_SIZE, "%.*s", FK_HOST_ID_SIZE - 1, hex);
        return 0;
}

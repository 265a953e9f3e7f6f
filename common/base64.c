/* SPDX-License-Identifier: MIT */
/* Standard base64 (RFC 4648 section 4, with padding), the one codec of forklet: the API's exec
 * streams, the etcd JSON gateway's keys and values, key pins. Pure. */
#include "common/cleanup.h"
#include "common/util.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

static const char b64_alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int fk_base64_encode(const void *data, size_t size, char **ret)
{
        const unsigned char *p = data;
        size_t o = 0;
        char *out;

        if (size > SIZE_MAX / 2)
                return -ENOMEM;
        out = malloc((size + 2) / 3 * 4 + 1);
        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < size; i += 3) {
                uint32_t v = (uint32_t)p[i] << 16;
                size_t left = size - i;

                if (left > 1)
                        v |= (uint32_t)p[i + 1] << 8;
                if (left > 2)
                        v |= p[i + 2];
                out[o++] = b64_alphabet[(v >> 18) & 63];
                out[o++] = b64_alphabet[(v >> 12) & 63];
                out[o++] = left > 1 ? b64_alphabet[(v >> 6) & 63] : '=';
                out[o++] = left > 2 ? b64_alphabet[v & 63] : '=';
        }
        out[o] = '\0';
        *ret = out;
        return 0;
}

static int b64_value(char ch)
{
        if (ch >= 'A' && ch <= 'Z')
                return ch - 'A';
        if (ch >= 'a' && ch <= 'z')
                return ch - 'a' + 26;
        if (ch >= '0' && ch <= '9')
                return ch - '0' + 52;
        if (ch == '+')
                return 62;
        if (ch == '/')
                return 63;
        return -1;
}

int fk_base64_decode(const char *s, size_t len, void **ret, size_t *ret_size)
{
        cleanup_free unsigned char *out = NULL;
        uint32_t acc = 0;
        size_t o = 0, bits = 0;

        while (len > 0 && s[len - 1] == '=')
                len--;
        if (len % 4 == 1)
                return -EINVAL;
        out = malloc(len / 4 * 3 + 3);
        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < len; i++) {
                int v = b64_value(s[i]);

                if (v < 0)
                        return -EINVAL;
                acc = (acc << 6) | (uint32_t)v;
                bits += 6;
                if (bits >= 8) {
                        bits -= 8;
                        out[o++] = (unsigned char)((acc >> bits) & 0xff);
                }
        }
        /* Leftover bits of the last quantum must be zero in canonical base64. */
        if (bits > 0 && (acc & ((1u << bits) - 1)) != 0)
                return -EINVAL;
        out[o] = '\0';
        *ret = TAKE_PTR(out);
        *ret_size = o;
        return 0;
}

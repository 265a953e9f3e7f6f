/* SPDX-License-Identifier: MIT */
/* Writes the byte streams a compromised guest sends in agent-hostile.sh (one file per case,
 * replayed through the guest's /run/forklet/inject): guest-chosen paths and format strings in
 * every string field, NULs, 1 MiB strings, bad lengths, unknown types, foreign ids, a flood.
 * Usage: hostile-frames OUTDIR CANARY_DIR MARKER */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmm/guest/protocol.h"

/* Request ids the host has probably used by the time the test replays (its counter starts at
 * 1 and a boot plus a few copies and execs take a few hundred): one of them is in flight. */
#define IDS_NEAR 4096u
/* Ids no request of this session will reach. */
#define IDS_FOREIGN 0xf0000000u

static const char *canary, *marker;
static char texts[4][512];

static void die(const char *what)
{
        fprintf(stderr, "hostile-frames: %s: %s\n", what, strerror(errno));
        exit(1);
}

static void ok(int r)
{
        if (r < 0) {
                errno = -r;
                die("encode");
        }
}

static void save(const char *dir, const char *name, const struct guest_buf *b)
{
        char path[4096];
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        f = fopen(path, "we");
        if (!f || fwrite(b->data, 1, b->size, f) != b->size || fclose(f) != 0)
                die(path);
}

/* A frame header as the guest would send it, then length bytes of nothing in particular. */
static void put_header(struct guest_buf *b, uint32_t magic, uint16_t version, uint16_t type,
                       uint32_t id, uint32_t length)
{
        uint8_t h[GUEST_PROTO_HEADER_SIZE];

        memcpy(h, &magic, 4); /* x86: little-endian like the wire */
        memcpy(h + 4, &version, 2);
        memcpy(h + 6, &type, 2);
        memset(h + 8, 0, 4);
        memcpy(h + 12, &id, 4);
        memcpy(h + 16, &length, 4);
        ok(guest_buf_append(b, h, sizeof(h)));
}

/* Every string field a host could mistake for a path, a format or a log line. */
static void text_case(struct guest_buf *b)
{
        struct guest_msg_hello h = {.proto_version = 1, .agent_version = texts[3]};

        char msg[1100];

        /* Whichever request is in flight gets a path or format and the forged log line. */
        for (uint32_t id = 1; id <= IDS_NEAR; id++) {
                snprintf(msg, sizeof(msg), "%s %s", texts[id % 3], texts[3]);
                ok(guest_proto_put_error(b, id, EACCES, msg));
        }
        for (uint32_t i = 0; i < 4; i++) {
                struct guest_msg_file_data d = {.data = (const uint8_t *)texts[i],
                                                .size = strlen(texts[i])};

                ok(guest_proto_put_file_data(b, IDS_FOREIGN + i, &d));
                ok(guest_proto_put_raw(b, GUEST_MSG_STDOUT, IDS_FOREIGN + i, texts[i],
                                       strlen(texts[i])));
                ok(guest_proto_put_exit(b, IDS_FOREIGN + i, &(struct guest_msg_exit){.flags = 1}));
                ok(guest_proto_put_raw(b, 999, IDS_FOREIGN + i, texts[i], strlen(texts[i])));
                ok(guest_proto_put_raw(b, GUEST_MSG_PONG, 0, texts[i], strlen(texts[i])));
                ok(guest_proto_put_u32(b, GUEST_MSG_STARTED, IDS_FOREIGN + i, 1));
        }
        ok(guest_proto_put_hello(b, &h)); /* last: it fails the requests in flight */
}

/* 1 MiB strings: a version, an error, file data. */
static void long_case(struct guest_buf *b)
{
        size_t n = GUEST_PROTO_MAX_PAYLOAD - 64, tl = strlen(texts[0]);
        char *s = malloc(n + 1);

        if (!s)
                die("malloc");
        for (size_t i = 0; i < n; i++)
                s[i] = texts[0][i % tl];
        s[n] = 0;
        ok(guest_proto_put_error(b, IDS_FOREIGN, EIO, s));
        ok(guest_proto_put_file_data(
                b, IDS_FOREIGN, &(struct guest_msg_file_data){.data = (uint8_t *)s, .size = n}));
        ok(guest_proto_put_hello(
                b, &(struct guest_msg_hello){.proto_version = 1, .agent_version = s}));
        free(s);
}

/* Strings with NULs (the decoders refuse them): an ERROR for every near id and a HELLO. */
static void nul_case(struct guest_buf *b)
{
        uint8_t e[8 + 64] = {0}, h[12 + 64] = {0};
        uint32_t len = (uint32_t)snprintf((char *)e + 8, 56, "%s", canary), err = EPERM;

        e[8 + len / 2] = 0; /* "/tmp/fk-ca\0ary..." */
        memcpy(e, &err, 4);
        memcpy(e + 4, &len, 4);
        for (uint32_t id = 1; id <= IDS_NEAR; id++)
                ok(guest_proto_put_raw(b, GUEST_MSG_ERROR, id, e, 8 + len));
        /* HELLO: version 0, no capabilities, then the same string */
        memcpy(h + 8, &len, 4);
        memcpy(h + 12, e + 8, len);
        ok(guest_proto_put_raw(b, GUEST_MSG_HELLO, 0, h, 12 + len));
}

static void flood_case(struct guest_buf *b)
{
        static char chunk[GUEST_PROTO_CHUNK];

        memset(chunk, 'F', sizeof(chunk));
        for (uint32_t i = 0; b->size < GUEST_PROTO_MAX_PAYLOAD; i++)
                ok(guest_proto_put_raw(b, GUEST_MSG_STDOUT, IDS_FOREIGN + i, chunk, sizeof(chunk)));
}

int main(int argc, char **argv)
{
        struct guest_buf b = {0};
        static const uint8_t http[] = "GET /../../etc/shadow HTTP/1.1\r\n\r\n";

        if (argc != 4) {
                fprintf(stderr, "usage: hostile-frames OUTDIR CANARY_DIR MARKER\n");
                return 2;
        }
        canary = argv[2];
        marker = argv[3];
        snprintf(texts[0], sizeof(texts[0]), "../../../../../../..%s/rel-%s", canary, marker);
        snprintf(texts[1], sizeof(texts[1]), "%s/abs-%s", canary, marker);
        snprintf(texts[2], sizeof(texts[2]), "%%s%%n%%s%%n%%x%%x %s %%99999999s", marker);
        snprintf(texts[3], sizeof(texts[3]), "ok\r\nFAKE-LOG-LINE %s \x1b[2J\x1b]0;%s\x07 \xff\xfe",
                 marker, canary);

        text_case(&b);
        save(argv[1], "text.bin", &b);
        b.size = 0;
        long_case(&b);
        save(argv[1], "long.bin", &b);
        b.size = 0;
        nul_case(&b);
        save(argv[1], "nul.bin", &b);
        b.size = 0;
        flood_case(&b);
        save(argv[1], "flood.bin", &b);

        /* Framing breakers: each must make the host drop the channel and reconnect. */
        b.size = 0;
        put_header(&b, GUEST_PROTO_MAGIC, GUEST_PROTO_VERSION, GUEST_MSG_STDOUT, 1, 0xffffffffu);
        save(argv[1], "len-huge.bin", &b);
        b.size = 0;
        put_header(&b, GUEST_PROTO_MAGIC, GUEST_PROTO_VERSION, GUEST_MSG_FILE_DATA, IDS_FOREIGN,
                   GUEST_PROTO_MAX_PAYLOAD + 1);
        save(argv[1], "len-past-max.bin", &b);
        b.size = 0;
        put_header(&b, GUEST_PROTO_MAGIC, GUEST_PROTO_VERSION, GUEST_MSG_ERROR, IDS_FOREIGN, 4096);
        ok(guest_buf_append(&b, texts[1], strlen(texts[1]))); /* then whatever comes next */
        save(argv[1], "truncated.bin", &b);
        b.size = 0;
        put_header(&b, GUEST_PROTO_MAGIC, 2, GUEST_MSG_HELLO, 0, 0);
        save(argv[1], "bad-version.bin", &b);
        b.size = 0;
        ok(guest_buf_append(&b, http, sizeof(http) - 1));
        save(argv[1], "bad-magic.bin", &b);
        b.size = 0;
        for (uint32_t id = 1; id <= IDS_NEAR; id++) /* types no host knows, ids it may use */
                ok(guest_proto_put_raw(&b, (uint16_t)(_GUEST_MSG_MAX + id % 3 * 1000), id,
                                       texts[id % 4], strlen(texts[id % 4])));
        save(argv[1], "unknown-types.bin", &b);
        guest_buf_free(&b);
        return 0;
}

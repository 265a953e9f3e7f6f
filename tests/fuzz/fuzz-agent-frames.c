/* SPDX-License-Identifier: MIT */
/* libFuzzer target: any bytes as a stream from a guest through the host's framing, every reply
 * decoder and the escaping of guest text. Decoders accept or refuse (-EBADMSG) without reading
 * outside the frame; what they accept re-encodes to the same message; escaped text is clean. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vmm/agent-client/agent-client-internal.h"
#include "vmm/guest/protocol.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_text(const char *s)
{
        char out[AGENT_GUEST_TEXT_MAX];

        vmm_agent_guest_text(s, out, sizeof(out));
        for (const char *c = out; *c; c++)
                if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
                        abort();
        if (strlen(out) >= sizeof(out))
                abort();
}

static void check_refused(int r)
{
        if (r < 0 && r != -EBADMSG && r != -ENOMEM)
                abort();
}

static void decode_error(const uint8_t *p, size_t n)
{
        struct guest_msg_error e, back;
        struct guest_buf b = {0};
        struct guest_proto_header h;
        int r = guest_proto_get_error(p, n, &e);

        check_refused(r);
        if (r < 0)
                return;
        if (e.error <= 0 || e.error > 4095)
                abort();
        check_text(e.message);
        if (guest_proto_put_error(&b, 1, e.error, e.message) == 0) {
                if (guest_proto_frame_check(b.data, b.size, &h) != (int)b.size ||
                    guest_proto_get_error(b.data + GUEST_PROTO_HEADER_SIZE, h.length, &back) < 0 ||
                    back.error != e.error || strcmp(back.message, e.message) != 0)
                        abort();
                guest_msg_error_done(&back);
        }
        guest_buf_free(&b);
        guest_msg_error_done(&e);
}

static void decode_all(uint16_t type, const uint8_t *p, size_t n)
{
        struct guest_msg_hello hello;
        struct guest_msg_file_data d;
        struct guest_msg_exit x;
        uint32_t u;
        int r;

        switch (type) {
        case GUEST_MSG_HELLO:
                r = guest_proto_get_hello(p, n, &hello);
                check_refused(r);
                if (r == 0) {
                        check_text(hello.agent_version);
                        guest_msg_hello_done(&hello);
                }
                break;
        case GUEST_MSG_ERROR:
                decode_error(p, n);
                break;
        case GUEST_MSG_EXIT:
                check_refused(guest_proto_get_exit(p, n, &x));
                break;
        case GUEST_MSG_STARTED:
                check_refused(guest_proto_get_u32(p, n, &u));
                break;
        case GUEST_MSG_FILE_DATA:
                r = guest_proto_get_file_data(p, n, &d);
                check_refused(r);
                if (r == 0 && d.size && (d.data < p || d.data + d.size > p + n))
                        abort();
                break;
        default:
                break;
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        size_t off = 0;

        /* As the host's reader does: whole frames in order until one is incomplete or bad. */
        for (;;) {
                struct guest_proto_header h;
                uint8_t *copy;
                int r = guest_proto_frame_check(data + off, size - off, &h);

                if (r <= 0)
                        break;
                if ((size_t)r > size - off || h.length > GUEST_PROTO_MAX_PAYLOAD)
                        abort();
                /* An exact-size heap copy, so ASan sees any read past the payload. */
                copy = malloc(h.length ? h.length : 1);
                if (!copy)
                        return 0;
                memcpy(copy, data + off + GUEST_PROTO_HEADER_SIZE, h.length);
                decode_all(h.type, copy, h.length);
                free(copy);
                off += (size_t)r;
        }
        return 0;
}

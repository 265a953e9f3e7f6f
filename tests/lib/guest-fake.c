/* SPDX-License-Identifier: MIT */
/* The fake guest agent of guest-fake.h. */
#include "tests/lib/guest-fake.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/util.h"

/* Write errors are ignored: a client may hang up mid-scenario (that is what the hostile
 * cases provoke); the client-side assertions judge the outcome. */
void send_buf(int fd, struct guest_buf *b)
{
        (void)fk_write_all(fd, b->data, b->size);
        guest_buf_free(b);
}

void send_hello(int fd)
{
        struct guest_msg_hello h = {.proto_version = 1, .agent_version = S("fake")};
        struct guest_buf b = {0};

        assert_int_equal(guest_proto_put_hello(&b, &h), 0);
        send_buf(fd, &b);
}

void send_raw(int fd, uint16_t type, uint32_t id, const void *p, size_t n)
{
        struct guest_buf b = {0};

        assert_int_equal(guest_proto_put_raw(&b, type, id, p, n), 0);
        send_buf(fd, &b);
}

void send_u32(int fd, uint16_t type, uint32_t id, uint32_t v)
{
        struct guest_buf b = {0};

        assert_int_equal(guest_proto_put_u32(&b, type, id, v), 0);
        send_buf(fd, &b);
}

void send_exit(int fd, uint32_t id, int code)
{
        struct guest_msg_exit x = {.exit_code = code};
        struct guest_buf b = {0};

        assert_int_equal(guest_proto_put_exit(&b, id, &x), 0);
        send_buf(fd, &b);
}

/* Reads one frame; returns false on EOF. *ret is the whole frame (caller frees). */
bool read_frame(int fd, struct guest_proto_header *h, uint8_t **ret)
{
        uint8_t hdr[GUEST_PROTO_HEADER_SIZE];
        uint32_t len;
        uint8_t *p;

        if (fk_read_all(fd, hdr, sizeof(hdr)) < 0)
                return false;
        memcpy(&len, hdr + 16, sizeof(len)); /* x86: little-endian like the wire */
        assert_true(len <= GUEST_PROTO_MAX_PAYLOAD);
        p = malloc(sizeof(hdr) + len);
        assert_non_null(p);
        memcpy(p, hdr, sizeof(hdr));
        if (fk_read_all(fd, p + sizeof(hdr), len) < 0) {
                free(p);
                return false;
        }
        assert_int_equal(guest_proto_frame_check(p, sizeof(hdr) + len, h),
                         (int)(sizeof(hdr) + len));
        *ret = p;
        return true;
}

/* Reads frames until an EXEC arrives; returns its id and decoded message. */
bool read_exec(int fd, uint32_t *id, struct guest_msg_exec *m)
{
        struct guest_proto_header h = {0};
        uint8_t *p;

        while (read_frame(fd, &h, &p)) {
                const uint8_t *payload = p + GUEST_PROTO_HEADER_SIZE;

                if (h.type == GUEST_MSG_EXEC) {
                        assert_int_equal(guest_proto_get_exec(payload, h.length, m), 0);
                        *id = h.id;
                        free(p);
                        return true;
                }
                if (h.type == GUEST_MSG_PING)
                        send_raw(fd, GUEST_MSG_PONG, h.id, payload, h.length);
                free(p);
        }
        return false;
}

static void *fake_main(void *userdata)
{
        struct fake *f = userdata;

        for (int conn = 0;; conn++) {
                int fd = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);
                bool again;

                if (fd < 0)
                        return NULL;
                again = f->handler(fd, conn);
                close(fd);
                if (!again)
                        return NULL;
        }
}

struct fake *fake_start(fake_handler handler)
{
        struct fake *f = calloc(1, sizeof(*f));
        struct sockaddr_un sa = {.sun_family = AF_UNIX};

        assert_non_null(f);
        strcpy(f->dir, "/tmp/guest-client-XXXXXX");
        assert_non_null(mkdtemp(f->dir));
        snprintf(f->path, sizeof(f->path), "%s/agent.sock", f->dir);
        strcpy(sa.sun_path, f->path);
        f->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(f->lfd >= 0);
        assert_int_equal(bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        assert_int_equal(listen(f->lfd, 4), 0);
        f->handler = handler;
        assert_int_equal(pthread_create(&f->thread, NULL, fake_main, f), 0);
        return f;
}

void fake_stop(struct fake *f)
{
        shutdown(f->lfd, SHUT_RDWR); /* unblocks accept */
        pthread_join(f->thread, NULL);
        close(f->lfd);
        unlink(f->path);
        rmdir(f->dir);
        free(f);
}

static int collect(int stream, const void *data, size_t size, void *userdata)
{
        struct out *o = userdata;
        int i = stream == 1 ? 0 : 1;

        assert_true(o->size[i] + size < sizeof(o->data[i]));
        memcpy(o->data[i] + o->size[i], data, size);
        o->size[i] += size;
        return 0;
}

int exec_argv(struct vmm_agent *a, const char *arg0, const char *arg1, size_t cap, struct out *o,
              struct vmm_exec_result *res, struct fk_error *err)
{
        char *argv[] = {S(arg0), S(arg1), NULL};
        struct vmm_exec_request req = {.argv = argv, .output_cap = cap};

        memset(o, 0, sizeof(*o));
        return vmm_agent_exec(a, &req, collect, o, res, err);
}

/* SPDX-License-Identifier: MIT */
/* A fake guest agent on a unix socket for the host client's unit tests (guest-client*.c):
 * each accepted connection is served by a handler that writes frames as a guest would. */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vmm/guest/protocol.h"
#include "vmm/vmm.h"

#define S(x) ((char *)(x))

/* One accepted connection is served by a handler; it returns true to accept another. */
typedef bool (*fake_handler)(int fd, int conn);

struct fake {
        char dir[64];
        char path[128];
        int lfd;
        pthread_t thread;
        fake_handler handler;
};

/* Frame writers (cmocka-assert on encode errors; write errors are ignored: a client may hang
 * up mid-scenario, which is what the hostile cases provoke). send_buf frees b. */
void send_buf(int fd, struct guest_buf *b);
void send_hello(int fd);
void send_raw(int fd, uint16_t type, uint32_t id, const void *p, size_t n);
void send_u32(int fd, uint16_t type, uint32_t id, uint32_t v);
void send_exit(int fd, uint32_t id, int code);
/* Reads one frame (*ret: the whole frame, caller frees); false on EOF. */
bool read_frame(int fd, struct guest_proto_header *h, uint8_t **ret);
/* Reads frames (answering PINGs) until an EXEC: its id and decoded message; false on EOF. */
bool read_exec(int fd, uint32_t *id, struct guest_msg_exec *m);
/* Starts a fake listening in a fresh temp dir (f->path); fake_stop joins and removes it. */
struct fake *fake_start(fake_handler handler);
void fake_stop(struct fake *f);

/* Collected exec output: [0] stdout, [1] stderr. */
struct out {
        char data[2][4096];
        size_t size[2];
};
/* vmm_agent_exec of {arg0, arg1} with output into *o. */
int exec_argv(struct vmm_agent *a, const char *arg0, const char *arg1, size_t cap, struct out *o,
              struct vmm_exec_result *res, struct fk_error *err);

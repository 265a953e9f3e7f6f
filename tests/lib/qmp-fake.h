/* SPDX-License-Identifier: MIT */
/* A fake QEMU on one end of a socketpair() for the QMP client's unit tests (vmm-qmp-test,
 * vmm-balloon-test): a thread plays recorded steps (read a command, check it, reply). */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

/* QEMU 7.2's greeting and its reply to qmp_capabilities (the client's first command, id 1). */
#define QMP_FAKE_GREETING                                                                          \
        "{\"QMP\": {\"version\": {\"qemu\": {\"micro\": 22, \"minor\": 2, \"major\": 7}, "         \
        "\"package\": \"Debian 1:7.2+dfsg-7+deb12u18\"}, \"capabilities\": [\"oob\"]}}\r\n"
#define QMP_FAKE_CAPS_OK "{\"return\": {}, \"id\": 1}\r\n"

/* One step: optionally read one command line and check it contains expect, then write reply
 * (which may be several messages, partial, or garbage). */
struct qmp_fake_step {
        const char *expect; /* NULL: don't read */
        const char *reply;  /* NULL: nothing */
        unsigned delay_ms;  /* before replying */
        bool close_after;   /* hang up after this step */
};

/* The greeting and the capabilities handshake, the first steps of a fake the client connects
 * to with qmp_client_new_fd. */
#define QMP_FAKE_HANDSHAKE                                                                         \
        {NULL, QMP_FAKE_GREETING, 0, false},                                                       \
        {                                                                                          \
                "\"qmp_capabilities\"", QMP_FAKE_CAPS_OK, 0, false                                 \
        }

struct qmp_fake {
        int fd;
        const struct qmp_fake_step *steps;
        size_t n;
        /* after the steps: each further command line is appended to rest until the client
         * hangs up (else the fake hangs up at once) */
        bool record_rest;
        pthread_t thread;
        char failure[512];   /* the first step that went wrong, "" if none */
        char rest[512];      /* with record_rest: the commands after the steps (truncated) */
        volatile bool *flag; /* qmp_fake_start_flag: set to true before step flag_step's reply */
        size_t flag_step;
};

/* Starts the fake's thread on one end of a socketpair and returns the other end (the client's:
 * hand it to qmp_client_new_fd, which takes it). Fails the test (cmocka) when it cannot. */
int qmp_fake_start(struct qmp_fake *f, const struct qmp_fake_step *steps, size_t n,
                   bool record_rest);
/* As qmp_fake_start, and *flag is set to true just before step flag_step replies: for code
 * that polls a flag between its commands (a yield, a cancel). */
int qmp_fake_start_flag(struct qmp_fake *f, const struct qmp_fake_step *steps, size_t n,
                        bool record_rest, volatile bool *flag, size_t flag_step);
/* Joins the thread (with record_rest the client must have hung up first) and fails the test
 * with f->failure when a step went wrong. */
void qmp_fake_finish(struct qmp_fake *f);

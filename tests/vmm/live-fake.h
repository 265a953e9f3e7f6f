/* SPDX-License-Identifier: MIT */
/* What the live checkpoint's scripted-QEMU tests share: reply and event lines, the setup steps of
 * the event-driven conversation, a client on a qmp_fake, and a whole vmm_checkpoint_live run. */
#pragma once

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <cmocka.h>
#include "common/util.h"
#include "tests/lib/qmp-fake.h"
#include "vmm/vmm.h"
#include "vmm/checkpoint/checkpoint.h"

#define RET(id)     "{\"return\": {}, \"id\": " #id "}\r\n"
#define MIG(id, st) "{\"return\": {\"status\": \"" st "\"}, \"id\": " #id "}\r\n"
#define EV_MIG(st)                                                                                 \
        "{\"event\": \"MIGRATION\", \"data\": {\"status\": \"" st "\"}, \"timestamp\": "           \
        "{\"seconds\": 1, \"microseconds\": 0}}\r\n"
#define RUNNING(id)                                                                                \
        "{\"return\": {\"status\": \"running\", \"running\": true}, \"id\": " #id "}\r\n"
#define DONE(id) "{\"return\": {\"status\": \"completed\", \"downtime\": 4}, \"id\": " #id "}\r\n"

/* What the event-driven path asks before its migration (ids 2-5): the guest runs, the
 * capabilities (events on), the parameters, the stream's fd. */
#define LIVE_SETUP_STEPS                                                                           \
        {"\"query-status\"", RUNNING(2), 0, false},                                                \
                {"\"events\",\"state\":true", RET(3), 0, false},                                   \
                {"\"downtime-limit\":10", RET(4), 0, false},                                       \
        {                                                                                          \
                "\"getfd\"", RET(5), 0, false                                                      \
        }

static int switchovers;

static inline int count_switchover(void *ud, struct fk_error *err)
{
        (void)ud, (void)err;
        switchovers++;
        return 0;
}

static inline struct qmp_client *connect_fake(struct qmp_fake *f, const struct qmp_fake_step *steps,
                                              size_t n)
{
        struct qmp_client *c = NULL;
        struct fk_error err = {0};
        int fd = qmp_fake_start(f, steps, n, false);

        assert_int_equal(qmp_client_new_fd(fd, 2000, &c, &err), 0);
        return c;
}

static inline void assert_steps_add_up(const struct vmm_live_stats *st)
{
        uint64_t sum = 0;

        for (int i = 0; i < _VMM_LIVE_STEP_MAX; i++)
                sum += st->step_ns[i];
        assert_true(sum == st->pause_ns);
}

/* vmm_checkpoint_live of o against the scripted QEMU steps (and second, when not NULL, on the
 * second connection), into a fresh stream file; the fakes must have run their whole scripts.
 * The stream file is removed. */
static inline int run_live(const struct qmp_fake_step *steps, size_t n,
                           const struct qmp_fake_step *second, size_t n2, struct vmm_live_opts *o,
                           struct vmm_live_stats *st, struct fk_error *err)
{
        char stream[] = "/tmp/fk-live-test-XXXXXX";
        struct qmp_fake f, f2;
        struct qmp_client *c = connect_fake(&f, steps, n);
        int sfd = mkstemp(stream), r;

        if (second)
                o->continue_qmp = connect_fake(&f2, second, n2);
        assert_true(sfd >= 0);
        close(sfd);
        switchovers = 0;
        r = vmm_checkpoint_live(c, stream, o, st, err);
        qmp_client_free(o->continue_qmp);
        o->continue_qmp = NULL;
        qmp_client_free(c);
        if (second)
                qmp_fake_finish(&f2);
        qmp_fake_finish(&f);
        unlink(stream);
        return r;
}

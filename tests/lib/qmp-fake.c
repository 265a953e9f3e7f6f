/* SPDX-License-Identifier: MIT */
/* The fake QEMU of qmp-fake.h. */
#include "tests/lib/qmp-fake.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/util.h"

/* One line, byte by byte (so nothing of the next command is consumed); -1 on EOF. */
static int read_line(int fd, char *buf, size_t size)
{
        size_t n = 0;

        while (n + 1 < size) {
                ssize_t k = read(fd, buf + n, 1);

                if (k <= 0)
                        return -1;
                if (buf[n++] == '\n')
                        break;
        }
        buf[n] = '\0';
        return 0;
}

static void *fake_run(void *arg)
{
        struct qmp_fake *f = arg;
        char line[4096];

        for (size_t i = 0; i < f->n; i++) {
                const struct qmp_fake_step *s = &f->steps[i];

                if (s->expect) {
                        if (read_line(f->fd, line, sizeof(line)) < 0) {
                                snprintf(f->failure, sizeof(f->failure), "step %zu: EOF", i);
                                break;
                        }
                        if (!strstr(line, s->expect)) {
                                snprintf(f->failure, sizeof(f->failure),
                                         "step %zu: got %.300s, want %.120s", i, line, s->expect);
                                break;
                        }
                }
                if (s->delay_ms)
                        usleep(s->delay_ms * 1000);
                if (f->flag && i == f->flag_step)
                        *f->flag = true;
                if (s->reply && fk_write_all(f->fd, s->reply, strlen(s->reply)) < 0)
                        break;
                if (s->close_after)
                        break;
        }
        while (f->record_rest && read_line(f->fd, line, sizeof(line)) == 0) {
                size_t have = strlen(f->rest);

                snprintf(f->rest + have, sizeof(f->rest) - have, "%.200s", line);
        }
        close(f->fd);
        return NULL;
}

int qmp_fake_start_flag(struct qmp_fake *f, const struct qmp_fake_step *steps, size_t n,
                        bool record_rest, volatile bool *flag, size_t flag_step)
{
        int sv[2];

        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        *f = (struct qmp_fake){.fd = sv[1],
                               .steps = steps,
                               .n = n,
                               .record_rest = record_rest,
                               .flag = flag,
                               .flag_step = flag_step};
        assert_int_equal(pthread_create(&f->thread, NULL, fake_run, f), 0);
        return sv[0];
}

int qmp_fake_start(struct qmp_fake *f, const struct qmp_fake_step *steps, size_t n,
                   bool record_rest)
{
        return qmp_fake_start_flag(f, steps, n, record_rest, NULL, 0);
}

void qmp_fake_finish(struct qmp_fake *f)
{
        pthread_join(f->thread, NULL);
        if (f->failure[0])
                fail_msg("fake QEMU: %s", f->failure);
}

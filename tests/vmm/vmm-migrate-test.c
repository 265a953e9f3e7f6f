/* SPDX-License-Identifier: MIT */
/* The fork engine's memory model end to end with real QEMU 7.2 (TCG): save a stopped VM's
 * device state with x-ignore-shared, copy its share=on RAM file, start a second QEMU with
 * -incoming defer on the copy mapped share=off, migrate-incoming, cont; the guest carries on
 * counting where the source stopped, and the RAM copy stays untouched (MAP_PRIVATE). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "tests/vmm/vmm-harness.h"

#define IGNORE_SHARED "{\"capabilities\": [{\"capability\": \"x-ignore-shared\", \"state\": true}]}"

/* FNV-1a over the file: enough to see whether a 256 MiB file changed. */
static uint64_t file_hash(const char *path)
{
        cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
        static unsigned char buf[1 << 20];
        uint64_t h = 1469598103934665603ULL;
        ssize_t n;

        CHECK(fd >= 0, "open %s: %m", path);
        while ((n = read(fd, buf, sizeof(buf))) > 0)
                for (ssize_t i = 0; i < n; i++)
                        h = (h ^ buf[i]) * 1099511628211ULL;
        CHECK(n == 0, "read %s: %m", path);
        return h;
}

/* Polls query-migrate until completed. */
static void wait_migrated(struct it_vm *vm, unsigned timeout_ms)
{
        uint64_t t0 = fk_now_mono_ns();

        for (;;) {
                struct fk_error err = {};
                json_t *ret = NULL;
                const char *st;
                bool done;

                CHECK(qmp_execute(vm->qmp, "query-migrate", NULL, 5000, &ret, &err) >= 0,
                      "%s: query-migrate: %s", vm->name, err.msg);
                st = json_string_value(json_object_get(ret, "status"));
                CHECK(!st || (strcmp(st, "failed") != 0 && strcmp(st, "cancelled") != 0),
                      "%s: migration %s: %s", vm->name, st,
                      json_string_value(json_object_get(ret, "error-desc")));
                done = st && strcmp(st, "completed") == 0;
                json_decref(ret);
                if (done)
                        return;
                CHECK(it_ms_since(t0) < timeout_ms, "%s: migration not completed in %u ms",
                      vm->name, timeout_ms);
                usleep(2000);
        }
}

static void status_of(struct it_vm *vm, char *buf, size_t size)
{
        cleanup_free char *st = NULL;
        struct fk_error err = {};

        CHECK(qmp_query_status(vm->qmp, 5000, &st, &err) >= 0, "%s: %s", vm->name, err.msg);
        snprintf(buf, size, "%s", st);
}

/* The lowest "tick N" in a console log (0: none). */
static unsigned first_tick(struct it_vm *vm)
{
        cleanup_free char *log = NULL;
        const char *p;
        unsigned n = 0;

        if (fk_read_file(vm->console, 1 << 20, &log, NULL) < 0)
                return 0;
        p = strstr(log, "tick ");
        return p && sscanf(p, "tick %u", &n) == 1 ? n : 0;
}

struct timings {
        double stop, save, copy, spawn, load, cont;
};

/* Checkpoint: stop, device state only (x-ignore-shared skips the shared RAM), copy the RAM
 * file, resume. Returns the last tick the guest printed before the stop. */
static unsigned checkpoint(struct it_vm *a, const char *state, const char *ram_copy,
                           struct timings *t)
{
        cleanup_free char *args = NULL, *cmd = NULL;
        struct stat st;
        unsigned last;
        uint64_t t0 = fk_now_mono_ns();

        it_qmp(a, "stop", NULL);
        t->stop = it_ms_since(t0);
        last = it_last_tick(a);
        it_qmp(a, "migrate-set-capabilities", IGNORE_SHARED);
        CHECK(fk_asprintf(&args, "{\"uri\": \"exec:cat > '%s'\"}", state) >= 0, "oom");
        t0 = fk_now_mono_ns();
        it_qmp(a, "migrate", args);
        wait_migrated(a, 30000);
        t->save = it_ms_since(t0);
        t0 = fk_now_mono_ns();
        CHECK(fk_asprintf(&cmd, "cp --sparse=always '%s' '%s'", a->mem_path, ram_copy) >= 0, "oom");
        CHECK(system(cmd) == 0, "%s failed", cmd);
        t->copy = it_ms_since(t0);
        it_qmp(a, "cont", NULL);
        it_expect_status(a, "running");
        CHECK(stat(state, &st) == 0, "stat %s: %m", state);
        it_log("device state %lld bytes; source last tick before stop: %u", (long long)st.st_size,
               last);
        CHECK(st.st_size < (8 << 20), "state file has %lld bytes: RAM was not skipped",
              (long long)st.st_size);
        return last;
}

/* Fork: a new QEMU on the RAM copy, private mapping, new vmgenid, -incoming defer. */
static void fork_from(struct it_vm *b, const char *state, const char *ram_copy, struct timings *t)
{
        cleanup_free char *args = NULL;
        struct fk_error err = {};
        char status[32];
        uint64_t t0;

        it_vm_init(b, "fork");
        b->cfg.mem_path = ram_copy;
        b->cfg.mem_share = false;
        b->cfg.incoming_defer = true;
        b->cfg.vmgenid = "0f6c1a9e-3b1d-4e8a-9c77-2d5e4f1a0b3c";
        t0 = fk_now_mono_ns();
        CHECK(it_vm_spawn(b, &err) >= 0, "spawn: %s", err.msg);
        it_vm_connect(b);
        t->spawn = it_ms_since(t0);
        status_of(b, status, sizeof(status));
        CHECK(strcmp(status, "inmigrate") == 0, "fork before load: %s", status);
        it_qmp(b, "migrate-set-capabilities", IGNORE_SHARED);
        CHECK(fk_asprintf(&args, "{\"uri\": \"exec:cat '%s'\"}", state) >= 0, "oom");
        t0 = fk_now_mono_ns();
        it_qmp(b, "migrate-incoming", args);
        wait_migrated(b, 30000);
        t->load = it_ms_since(t0);
        status_of(b, status, sizeof(status));
        it_log("fork status after migrate-incoming: %s", status);
        CHECK(strcmp(status, "paused") == 0, "fork after load: %s (want paused)", status);
        t0 = fk_now_mono_ns();
        it_qmp(b, "cont", NULL);
        it_expect_status(b, "running");
        t->cont = it_ms_since(t0);
}

/* docs/design.md: x-ignore-shared skips only share=on RAM, so a fork's (private) RAM goes into
 * its migration stream: a fork's own checkpoint needs the full stream. */
static void private_ram_is_migrated(struct it_vm *b, const char *state)
{
        cleanup_free char *args = NULL, *state2 = NULL;
        struct stat st1, st2;
        uint64_t t0;

        CHECK(fk_asprintf(&state2, "%s-of-fork", state) >= 0, "oom");
        CHECK(fk_asprintf(&args, "{\"uri\": \"exec:cat > '%s'\"}", state2) >= 0, "oom");
        it_qmp(b, "stop", NULL);
        t0 = fk_now_mono_ns();
        it_qmp(b, "migrate", args);
        wait_migrated(b, 60000);
        it_log("fork's own migration with x-ignore-shared: %.0f ms", it_ms_since(t0));
        it_qmp(b, "cont", NULL);
        CHECK(stat(state, &st1) == 0 && stat(state2, &st2) == 0, "stat: %m");
        it_log("fork's stream %lld bytes vs source's %lld", (long long)st2.st_size,
               (long long)st1.st_size);
        CHECK(st2.st_size > 10 * st1.st_size, "the fork's private RAM was skipped");
}

int main(void)
{
        struct it_vm a, b;
        struct fk_error err = {};
        cleanup_free char *state = NULL, *ram_copy = NULL, *log = NULL;
        struct timings t = {};
        char want[32];
        unsigned last_a;
        uint64_t h0;

        it_setup("vmm-migrate");
        CHECK(fk_asprintf(&state, "%s/state", it_dir()) >= 0 &&
                      fk_asprintf(&ram_copy, "%s/ram-copy", it_dir()) >= 0,
              "oom");
        it_vm_init(&a, "src");
        a.cfg.vmgenid = "8e3f5d52-5b2c-4a7e-b1a8-6c0d9e2f7a41";
        CHECK(it_vm_spawn(&a, &err) >= 0, "spawn: %s", err.msg);
        it_vm_connect(&a);
        it_wait_console(&a, "tick 2", 90000);

        last_a = checkpoint(&a, state, ram_copy, &t);
        h0 = file_hash(ram_copy);
        fork_from(&b, state, ram_copy, &t);

        /* The guest resumed, not rebooted: it keeps counting from where the source stopped. */
        snprintf(want, sizeof(want), "tick %u", last_a + 2);
        it_wait_console(&b, want, 30000);
        CHECK(first_tick(&b) >= last_a && first_tick(&b) <= last_a + 1,
              "fork's first tick %u, source stopped at %u", first_tick(&b), last_a);
        CHECK(fk_read_file(b.console, 1 << 20, &log, NULL) >= 0 &&
                      !strstr(log, "forklet-test-init up"),
              "the fork booted from scratch");
        /* share=off: the fork's writes stayed private, the checkpoint RAM is intact. */
        CHECK(file_hash(ram_copy) == h0, "the fork wrote into the checkpoint RAM file");
        CHECK(it_last_tick(&a) > last_a, "the source did not continue after cont");

        private_ram_is_migrated(&b, state);

        it_log("timings (ms): stop %.1f, save device state %.1f, copy RAM %.1f, "
               "fork spawn+QMP %.1f, migrate-incoming %.1f, cont %.1f",
               t.stop, t.save, t.copy, t.spawn, t.load, t.cont);
        CHECK(vmm_stop(b.proc, NULL, b.qmp, 5000) == 0, "stop fork");
        CHECK(vmm_stop(a.proc, NULL, a.qmp, 5000) == 0, "stop source");
        it_vm_destroy(&b);
        it_vm_destroy(&a);
        it_log("PASS");
        return 0;
}

/* SPDX-License-Identifier: MIT */
/* vmm_dirty_log_reset against real QEMU 7.2 (TCG): a running 1 GiB guest with the RAM tail has
 * every page dirty for the migration bitmap, so the first reset's setup (QEMU's one sync,
 * page by page with the tail) is long; a second one right after finds the bitmap clean and is
 * short. Each leaves no migration running, max-bandwidth as it was, the guest running and its
 * RAM file unread (a read of a hole would allocate it). A reset interrupted as by a killed
 * forkletd is undone by vmm_live_abandon (what adoption runs). */
#include <jansson.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "tests/vmm/vmm-harness.h"
#include "vmm/checkpoint/checkpoint.h"

static json_int_t max_bandwidth(struct it_vm *vm)
{
        struct fk_error err = {};
        json_t *ret = NULL;
        json_int_t bw;

        CHECK(qmp_execute(vm->qmp, "query-migrate-parameters", NULL, 5000, &ret, &err) >= 0,
              "query-migrate-parameters: %s", err.msg);
        bw = json_integer_value(json_object_get(ret, "max-bandwidth"));
        json_decref(ret);
        return bw;
}

static void expect_migration(struct it_vm *vm, const char *want)
{
        struct fk_error err = {};
        json_t *ret = NULL;
        const char *st;

        CHECK(qmp_execute(vm->qmp, "query-migrate", NULL, 5000, &ret, &err) >= 0,
              "query-migrate: %s", err.msg);
        st = json_string_value(json_object_get(ret, "status"));
        CHECK(st && strcmp(st, want) == 0, "migration is %s, not %s", st ? st : "none", want);
        json_decref(ret);
}

static long long allocated(const char *path)
{
        struct stat st;

        CHECK(stat(path, &st) == 0, "stat %s: %m", path);
        return (long long)st.st_blocks * 512;
}

int main(void)
{
        struct it_vm vm;
        struct fk_error err = {};
        unsigned first = 0, second = 0, tick;
        json_int_t bw;
        long long before;

        it_setup("vmm-dirty-log");
        it_vm_init(&vm, "src");
        vm.cfg.memory_mib = 1024;
        vm.cfg.ram_tail = true;
        CHECK(it_vm_spawn(&vm, &err) >= 0, "spawn: %s", err.msg);
        it_vm_connect(&vm);
        it_wait_console(&vm, "tick 1", 120000);
        bw = max_bandwidth(&vm);
        before = allocated(vm.mem_path);

        CHECK(vmm_dirty_log_reset(vm.qmp, 30000, &first, &err) >= 0, "first reset: %s", err.msg);
        expect_migration(&vm, "cancelled");
        it_expect_status(&vm, "running");
        CHECK(max_bandwidth(&vm) == bw, "max-bandwidth %lld, not %lld as before",
              (long long)max_bandwidth(&vm), (long long)bw);
        CHECK(vmm_dirty_log_reset(vm.qmp, 30000, &second, &err) >= 0, "second reset: %s", err.msg);
        expect_migration(&vm, "cancelled");
        it_log("QEMU's setup: %u ms with every page dirty, %u ms right after a reset", first,
               second);
        /* 262,146 pages each with a TLB scan against the few the guest wrote in between: a
         * wide margin for a loaded host, the point is that the bitmap was cleared */
        CHECK(first >= 4 * second && first >= 20,
              "the second setup took %u ms against %u ms: "
              "the first did not clear the dirty bitmap",
              second, first);
        CHECK(allocated(vm.mem_path) - before < (8ll << 20),
              "the resets read RAM in: its file grew from %lld to %lld bytes", before,
              allocated(vm.mem_path));
        /* a forkletd killed in the middle of a reset: the throttled migration still runs; what
         * adoption does (vmm_live_abandon) cancels it and unthrottles the bandwidth */
        it_qmp(&vm, "migrate-set-parameters", "{\"max-bandwidth\": 1024}");
        it_qmp(&vm, "migrate", "{\"uri\": \"exec:cat > /dev/null\"}");
        CHECK(vmm_live_abandon(vm.qmp, 30000, &err) == 1, "vmm_live_abandon: %s", err.msg);
        expect_migration(&vm, "cancelled");
        it_expect_status(&vm, "running");
        CHECK(max_bandwidth(&vm) > (1ll << 30), "max-bandwidth %lld after vmm_live_abandon",
              (long long)max_bandwidth(&vm));
        tick = it_last_tick(&vm);
        for (int i = 0; i < 100 && it_last_tick(&vm) <= tick; i++)
                usleep(100000);
        CHECK(it_last_tick(&vm) > tick, "the guest stopped ticking at %u", tick);
        it_vm_destroy(&vm);
        it_log("ok");
        return 0;
}

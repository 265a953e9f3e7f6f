/* SPDX-License-Identifier: MIT */
/* vmm_stop's first step against the real guest image: the agent powers the guest off and
 * QEMU exits by itself (no QMP quit, no signal). Also boots a qcow2 overlay of the image's
 * workspace through the argv builder's -drive and checks the guest mounted it. Root. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "tests/vmm/vmm-harness.h"

struct out {
        char data[4096];
        size_t len;
};

static int collect(int stream, const void *data, size_t size, void *userdata)
{
        struct out *o = userdata;

        if (stream != 1)
                return 0;
        size = FK_MIN(size, sizeof(o->data) - 1 - o->len);
        memcpy(o->data + o->len, data, size);
        o->len += size;
        o->data[o->len] = '\0';
        return 0;
}

int main(void)
{
        char *argv[] = {(char *)"sh", (char *)"-c", (char *)"grep ' /workspace ' /proc/mounts",
                        NULL};
        struct vmm_exec_request req = {.argv = argv, .timeout_ms = 20000};
        struct vmm_exec_result res = {};
        struct vmm_agent *agent = NULL;
        cleanup_free char *disk = NULL, *cmd = NULL, *console = NULL;
        struct fk_error err = {};
        struct out out = {};
        const char *reason = NULL;
        int status = -1;
        struct it_vm vm;
        uint64_t t0;

        it_setup("vmm-stop");
        it_use_image();
        CHECK(fk_asprintf(&disk, "%s/disk.qcow2", it_dir()) >= 0, "oom");
        CHECK(fk_asprintf(&cmd, "qemu-img create -q -f qcow2 -F raw -b '%s/workspace.img' '%s'",
                          getenv("FORKLET_IMAGE_DIR"), disk) >= 0,
              "oom");
        CHECK(system(cmd) == 0, "%s failed", cmd);

        it_vm_init(&vm, "agentstop");
        vm.cfg.disk = disk;
        t0 = fk_now_mono_ns();
        CHECK(it_vm_spawn(&vm, &err) >= 0, "spawn: %s", err.msg);
        it_vm_connect(&vm);
        CHECK(vmm_agent_connect(vm.agent_path, 10000, &agent, &err) >= 0, "agent: %s", err.msg);
        CHECK(vmm_agent_wait_ready(agent, 120000, &err) >= 0, "agent ready: %s", err.msg);
        it_log("agent ready %.0f ms after spawn", it_ms_since(t0));

        CHECK(vmm_agent_exec(agent, &req, collect, &out, &res, &err) >= 0, "exec: %s", err.msg);
        CHECK(!res.signaled && res.exit_code == 0 && strstr(out.data, "/dev/vda /workspace"),
              "workspace not mounted from the qcow2 disk: exit %d, %s", res.exit_code, out.data);

        t0 = fk_now_mono_ns();
        CHECK(vmm_stop(vm.proc, agent, vm.qmp, 10000) == 0, "vmm_stop failed");
        it_log("vmm_stop via agent poweroff took %.0f ms", it_ms_since(t0));
        CHECK(vmm_process_poll(vm.proc, &status, &reason) == 1 && status == 0, "QEMU %s",
              reason ? reason : "still running");
        /* A guest power-off, not QMP quit: the kernel said so on the console, and it happened
         * within the agent step. */
        CHECK(fk_read_file(vm.console, 1 << 20, &console, NULL) >= 0 &&
                      strstr(console, "reboot: Power down"),
              "no guest power-down on the console");
        CHECK(it_ms_since(t0) < 10000, "took longer than the agent step");
        vmm_agent_free(agent);
        it_vm_destroy(&vm);
        it_log("PASS");
        return 0;
}

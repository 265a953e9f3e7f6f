/* SPDX-License-Identifier: MIT */
/* Guest health of a QEMU VM: QMP events (BLOCK_IO_ERROR, RESUME, GUEST_PANICKED) read while no
 * job uses the QMP client, the console scanner's report, a PING over the agent channel, ending a
 * dead guest's QEMU and the free space under its disk. */
#include "agent/vm/vm-qemu.h"
#include "common/log.h"
#include "vmm/vmm.h"

#include <errno.h>
#include <jansson.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#define CONSOLE_CLOSE_WAIT_MS 500

_Static_assert(VMM_CONSOLE_LINE_MAX == AGENT_CONSOLE_LINE, "console line sizes differ");
_Static_assert(VMM_CONSOLE_TAIL_LINES == AGENT_CONSOLE_TAIL, "console tail sizes differ");

/* QEMU may be compromised: only printable ASCII of what it sends reaches status and logs. */
static void copy_text(char *dst, size_t size, const char *src)
{
        size_t o = 0;

        for (; src && *src && o + 1 < size; src++)
                dst[o++] = *src >= 0x20 && *src < 0x7f ? *src : '?';
        dst[o] = '\0';
}

static const char *data_str(json_t *data, const char *key)
{
        const char *s = json_string_value(json_object_get(data, key));

        return s ? s : "";
}

static void on_io_error(struct qemu_health *h, json_t *data)
{
        const char *dev = data_str(data, "device");

        copy_text(h->io_device, sizeof(h->io_device), dev[0] ? dev : data_str(data, "node-name"));
        copy_text(h->io_reason, sizeof(h->io_reason), data_str(data, "reason"));
        h->io_nospace = json_is_true(json_object_get(data, "nospace"));
        /* One stop emits an event per failed request: count the stop once. */
        if (strcmp(data_str(data, "action"), "stop") == 0 && !h->io_stopped) {
                h->io_stopped = true;
                h->io_stops++;
        }
}

static void on_event(struct qemu_health *h, json_t *ev)
{
        const char *name = json_string_value(json_object_get(ev, "event"));
        json_t *data = json_object_get(ev, "data");

        if (!name)
                return;
        log_debug("QMP event %s", name);
        if (strcmp(name, "BLOCK_IO_ERROR") == 0)
                on_io_error(h, data);
        else if (strcmp(name, "RESUME") == 0)
                h->io_stopped = false;
        else if (strcmp(name, "GUEST_PANICKED") == 0 && h->panics++ == 0)
                snprintf(h->panic, sizeof(h->panic), "reported through pvpanic (QEMU action %.16s)",
                         data_str(data, "action"));
}

static void fill(const struct qemu_health *h, const struct vmm_console_report *c,
                 struct agent_vm_health *ret)
{
        *ret = (struct agent_vm_health){
                .panics = h->panics + c->panics,
                .console_panics = c->panics,
                .oom_kills = c->oom_kills,
                .io_stopped = h->io_stopped,
                .io_stops = h->io_stops,
                .io_nospace = h->io_nospace,
                .n_tail = c->n_tail,
        };
        /* The console's words first: they say why; pvpanic only says that. */
        snprintf(ret->panic, sizeof(ret->panic), "%s", c->panics ? c->panic : h->panic);
        snprintf(ret->oom, sizeof(ret->oom), "%s", c->oom);
        snprintf(ret->io_device, sizeof(ret->io_device), "%s", h->io_device);
        snprintf(ret->io_reason, sizeof(ret->io_reason), "%s", h->io_reason);
        memcpy(ret->tail, c->tail, sizeof(ret->tail));
}

int qemu_health(void *userdata, void *vm, struct agent_vm_health *ret)
{
        struct vmm_console_report rep = {0};
        struct qemu_vm *q = vm;
        const char *why = NULL;
        int status = 0;
        json_t *ev;

        (void)userdata;
        if (q->qmp) {
                /* -ECONNRESET once QEMU is gone: what it sent before is queued all the same */
                (void)qmp_client_pump(q->qmp);
                while (qmp_next_event(q->qmp, &ev) > 0) {
                        on_event(&q->health, ev);
                        json_decref(ev);
                }
        }
        if (q->console) {
                /* After an exit the console's last bytes may still be on their way. */
                if (q->proc && vmm_process_poll(q->proc, &status, &why) == 1)
                        (void)vmm_console_wait_closed(q->console, CONSOLE_CLOSE_WAIT_MS);
                vmm_console_report(q->console, &rep);
        }
        fill(&q->health, &rep, ret);
        return 0;
}

int qemu_health_fd(void *vm)
{
        return qmp_client_fd(((struct qemu_vm *)vm)->qmp);
}

int qemu_ping(void *userdata, void *vm, unsigned timeout_ms, struct fk_error *err)
{
        (void)userdata;
        return vmm_agent_ping(((struct qemu_vm *)vm)->agent, timeout_ms, err);
}

int qemu_kill(void *userdata, void *vm, unsigned timeout_ms)
{
        struct qemu_vm *q = vm;

        (void)userdata;
        return vmm_stop(q->proc, NULL, q->qmp, timeout_ms);
}

int qemu_discard(void *userdata, void *vm, unsigned timeout_ms)
{
        struct qemu_vm *q = vm;

        (void)userdata;
        /* A booted VM's RAM file (share=on, in the run dir) is not the QEMU's to free: the
         * rollback sets it aside and removes it once the new VM runs
         * (agent_rollback_set_aside_ram). */
        return vmm_discard(q->proc, q->qmp, q->tap != NULL, timeout_ms);
}

int qemu_disk_free(void *userdata, void *vm, uint64_t *ret)
{
        struct qemu_vm *q = vm;
        struct statvfs st;
        char *dir;
        int r;

        (void)userdata;
        if (!q->disk)
                return -ENOENT;
        /* The overlay QEMU writes; new layers appear in the same directory. */
        dir = strdup(q->disk);
        if (!dir)
                return -ENOMEM;
        r = statvfs(dirname(dir), &st) < 0 ? -errno : 0;
        free(dir);
        if (r < 0)
                return r;
        *ret = (uint64_t)st.f_bavail * st.f_frsize;
        return 0;
}

/* The device whose io-status is not "ok" (query-block), as BLOCK_IO_ERROR would have said. */
static void adopt_io_status(struct qemu_vm *q)
{
        struct fk_error err = {0};
        json_t *devs = NULL, *dev;
        size_t i;

        if (qmp_execute(q->qmp, "query-block", NULL, VM_QMP_TIMEOUT_MS, &devs, &err) < 0) {
                log_debug("QEMU pid %d: query-block: %s", (int)vmm_process_pid(q->proc), err.msg);
                return;
        }
        json_array_foreach(devs, i, dev)
        {
                const char *st = data_str(dev, "io-status");

                if (!st[0] || strcmp(st, "ok") == 0)
                        continue;
                copy_text(q->health.io_device, sizeof(q->health.io_device),
                          data_str(dev, "device"));
                q->health.io_nospace = strcmp(st, "nospace") == 0;
                snprintf(q->health.io_reason, sizeof(q->health.io_reason), "%s",
                         q->health.io_nospace ? "No space left on device" : "I/O error");
                break;
        }
        json_decref(devs);
}

int qemu_health_adopt_status(struct qemu_vm *q, const char *status, struct fk_error *err)
{
        if (strcmp(status, "guest-panicked") == 0)
                return fk_error_set(err, -ESRCH, "the guest of QEMU pid %d panicked",
                                    (int)vmm_process_pid(q->proc));
        if (strcmp(status, "io-error") != 0)
                return 0;
        /* Not counted again: the forkletd that saw it happen did. */
        q->health.io_stopped = true;
        adopt_io_status(q);
        return 1;
}

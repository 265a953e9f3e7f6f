/* SPDX-License-Identifier: MIT */
/* The QEMU command line for a microVM, built by a pure function from struct vmm_config
 * (checked against golden files in tests/data/vmm/). */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/error.h"
#include "common/util.h"
#include "vmm/vmm.h"

/* The guest agent looks for a virtio-serial port with exactly this name. */
#define VMM_AGENT_PORT_NAME "org.forklet.agent.0"
/* The most files of a disk chain given drop-cache=off (vmm_config.disk_chain). */
#define VMM_DISK_CHAIN_KEYS 32
/* init_on_alloc=0: Debian's kernel zeroes every page it allocates
 * (CONFIG_INIT_ON_ALLOC_DEFAULT_ON), so a give-back's balloon wrote every free page, which made all
 * of them dirty for the next live checkpoint's bitmap sync (under TCG with the RAM tail: 400-700 ms
 * of QEMU's main loop stopped for a 1 GiB guest) and wrote into RAM-file holes QEMU then punched
 * again. Pages a process gets are still zeroed (__GFP_ZERO); docs/security.md says what the guest
 * kernel gives up. */
#define VMM_APPEND_BASE "console=ttyS0 quiet panic=-1 init_on_alloc=0"

struct argv_builder {
        char **v;
        int r; /* first error, sticky */
};

static void arg(struct argv_builder *b, const char *s)
{
        if (b->r >= 0)
                b->r = fk_strv_push(&b->v, s);
}

static void argf(struct argv_builder *b, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
static void argf(struct argv_builder *b, const char *fmt, ...)
{
        cleanup_free char *s = NULL;
        va_list ap;

        if (b->r < 0)
                return;
        va_start(ap, fmt);
        if (vasprintf(&s, fmt, ap) < 0) {
                s = NULL;
                b->r = -ENOMEM;
        }
        va_end(ap);
        if (b->r >= 0)
                b->r = fk_strv_push(&b->v, s);
}

/* QEMU's option parser splits on ',' and reads ",," as a literal comma: escape values. */
static char *qemu_opt_escape(const char *s)
{
        size_t n = strlen(s), commas = 0;
        char *out, *o;

        for (const char *p = s; *p; p++)
                commas += *p == ',';
        out = malloc(n + commas + 1);
        if (!out)
                return NULL;
        o = out;
        for (const char *p = s; *p; p++) {
                *o++ = *p;
                if (*p == ',')
                        *o++ = ',';
        }
        *o = '\0';
        return out;
}

static bool is_mac(const char *s)
{
        if (strlen(s) != 17)
                return false;
        for (int i = 0; i < 17; i++) {
                if (i % 3 == 2 ? s[i] != ':' : !isxdigit((unsigned char)s[i]))
                        return false;
        }
        return true;
}

static bool is_guid(const char *s)
{
        if (strlen(s) != 36)
                return false;
        for (int i = 0; i < 36; i++) {
                bool dash = i == 8 || i == 13 || i == 18 || i == 23;
                if (dash ? s[i] != '-' : !isxdigit((unsigned char)s[i]))
                        return false;
        }
        return true;
}

static int validate(const struct vmm_config *c, struct fk_error *err)
{
        const struct {
                const char *name;
                const char *value;
        } required[] = {
                {"name", c->name},
                {"kernel", c->kernel},
                {"initrd", c->initrd},
                {"mem_path", c->mem_path},
                {"qmp_socket", c->qmp_socket},
                {"agent_socket", c->agent_socket},
        };

        for (size_t i = 0; i < ARRAY_SIZE(required); i++)
                if (!required[i].value || !required[i].value[0])
                        return fk_error_set(err, -EINVAL, "vmm config: %s is required",
                                            required[i].name);
        if ((!c->console_log || !c->console_log[0]) &&
            (!c->console_socket || !c->console_socket[0]))
                return fk_error_set(err, -EINVAL, "vmm config: console_log is required");
        if (c->vcpus == 0)
                return fk_error_set(err, -EINVAL, "vmm config: vcpus must be at least 1");
        if (c->memory_mib == 0)
                return fk_error_set(err, -EINVAL, "vmm config: memory_mib must be at least 1");
        if (c->accel != VMM_ACCEL_TCG && c->accel != VMM_ACCEL_KVM)
                return fk_error_set(err, -EINVAL, "vmm config: unknown accelerator %d",
                                    (int)c->accel);
        if (c->tap && (!c->mac || !is_mac(c->mac)))
                return fk_error_set(err, -EINVAL,
                                    "vmm config: tap \"%s\" needs a mac like 52:54:00:12:34:56 "
                                    "(got \"%s\")",
                                    c->tap, c->mac ? c->mac : "");
        if (c->vmgenid && !is_guid(c->vmgenid))
                return fk_error_set(err, -EINVAL,
                                    "vmm config: vmgenid \"%s\" is not a GUID "
                                    "(xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)",
                                    c->vmgenid);
        return 0;
}

/* Machine, CPU, memory, and for a cold boot the kernel. */
static void add_machine(struct argv_builder *b, const struct vmm_config *c, const char *mem_path)
{
        char size[32];

        arg(b, "microvm,memory-backend=mem");
        arg(b, "-accel");
        /* TCG's translation cache defaults to 1 GiB and counts against the session's memory
         * limit as it fills: bound it (QEMU flushes it when full). */
        if (c->accel == VMM_ACCEL_TCG)
                argf(b, "tcg,tb-size=%u", c->tb_size_mib ? c->tb_size_mib : VMM_TCG_TB_MIB);
        else
                arg(b, vmm_accel_to_string(c->accel));
        /* The fork engine restores on the same host, so the host CPU model is safe with KVM.
         * TCG keeps QEMU's default model plus ARAT (the local APIC timer runs in deep idle),
         * which TCG emulates: without it the guest kernel needs a broadcast timer for one-shot
         * ticks, microvm has none (no HPET), and an idle guest takes a periodic 250 Hz tick,
         * about 3% of a host core each under TCG. */
        arg(b, "-cpu");
        arg(b, c->accel == VMM_ACCEL_KVM ? "host" : "qemu64,+arat");
        arg(b, "-nodefaults");
        arg(b, "-no-user-config");
        arg(b, "-display");
        arg(b, "none");
        arg(b, "-no-reboot");
        /* A guest that reports a panic (pvpanic) stays paused for forkletd to see, instead of
         * QEMU exiting as if the guest had powered off. */
        arg(b, "-action");
        arg(b, "panic=pause");
        arg(b, "-smp");
        argf(b, "%u", c->vcpus);
        /* with the tail in KiB, else in MiB as before (the argv goldens) */
        if (c->ram_tail)
                snprintf(size, sizeof(size), "%lluK",
                         (unsigned long long)(vmm_ram_bytes(c->memory_mib, true) >> 10));
        else
                snprintf(size, sizeof(size), "%uM", c->memory_mib);
        arg(b, "-m");
        arg(b, size);
        arg(b, "-object");
        argf(b, "memory-backend-file,id=mem,size=%s,mem-path=%s,share=%s", size, mem_path,
             c->mem_share ? "on" : "off");
        /* A restored guest is the stream's: QEMU would read the kernel (8 MiB here) into a
         * buffer of its own only to throw it away, about a quarter of its start under TCG. The
         * RAM blocks and devices are the same without it (the kernel only adds fw_cfg files),
         * so the stream loads. */
        if (c->incoming_defer)
                return;
        arg(b, "-kernel");
        arg(b, c->kernel);
        arg(b, "-initrd");
        arg(b, c->initrd);
        arg(b, "-append");
        /* Under TCG the guest reads the host's TSC; on a loaded host the Debian kernel's own
         * calibration fails and the boot hangs, so hand it the measured frequency. Its local
         * APIC timer is still calibrated and may be lost the same way: loglevel=5 puts that
         * warning on the console (VMM_CONSOLE_LINE_NO_TIMER), where forkletd sees it.
         * tsc=reliable where the host's TSC is invariant: the kernel's clocksource watchdog
         * compares the TSC with jiffies, which lose ticks while TCG's vCPU waits for a host
         * core, so it marks the TSC unstable and falls back to jiffies: a guest clock with 4 ms
         * steps that runs slow under load, and no tickless idle. */
        if (c->accel == VMM_ACCEL_TCG && c->tsc_khz > 0)
                argf(b, "%s loglevel=5 tsc_early_khz=%u%s%s%s", VMM_APPEND_BASE, c->tsc_khz,
                     c->tsc_reliable ? " tsc=reliable" : "", c->append && c->append[0] ? " " : "",
                     c->append ? c->append : "");
        else if (c->append && c->append[0])
                argf(b, "%s %s", VMM_APPEND_BASE, c->append);
        else
                arg(b, VMM_APPEND_BASE);
}

/* Paths, escaped for QEMU's option syntax. */
struct escaped {
        char *name, *mem, *console, *qmp, *qmp2, *agent, *disk, *keep_cache, *rootfs;
};

static void escaped_done(struct escaped *e)
{
        free(e->name);
        free(e->mem);
        free(e->console);
        free(e->qmp);
        free(e->qmp2);
        free(e->agent);
        free(e->disk);
        free(e->keep_cache);
        free(e->rootfs);
}

/* ",file.drop-cache=off,backing.file.drop-cache=off,...": one key per file of a chain of n
 * (vmm_config.disk_chain), the top's first; the keys grow with the depth, so a chain deeper
 * than VMM_DISK_CHAIN_KEYS (forkletd compacts them) keeps the default below that. */
static char *keep_cache_opts(unsigned n)
{
        static const char key[] = ",file.drop-cache=off", up[] = "backing.";
        size_t len = 1;
        char *s, *o;

        n = n == 0 ? 1 : n > VMM_DISK_CHAIN_KEYS ? VMM_DISK_CHAIN_KEYS : n;
        for (unsigned i = 0; i < n; i++)
                len += sizeof(key) - 1 + i * (sizeof(up) - 1);
        if (!(s = o = malloc(len)))
                return NULL;
        for (unsigned i = 0; i < n; i++) {
                *o++ = ',';
                for (unsigned k = 0; k < i; k++)
                        o = stpcpy(o, up);
                o = stpcpy(o, key + 1);
        }
        *o = '\0';
        return s;
}

static int escape_all(const struct vmm_config *c, struct escaped *e)
{
        e->name = qemu_opt_escape(c->name);
        e->mem = qemu_opt_escape(c->mem_path);
        e->console = qemu_opt_escape(c->console_socket ? c->console_socket : c->console_log);
        e->qmp = qemu_opt_escape(c->qmp_socket);
        e->qmp2 = c->qmp2_socket ? qemu_opt_escape(c->qmp2_socket) : NULL;
        e->agent = qemu_opt_escape(c->agent_socket);
        e->disk = c->disk ? qemu_opt_escape(c->disk) : NULL;
        e->keep_cache = c->disk ? keep_cache_opts(c->disk_chain) : NULL;
        e->rootfs = c->rootfs ? qemu_opt_escape(c->rootfs) : NULL;
        if (!e->name || !e->mem || !e->console || !e->qmp || !e->agent ||
            (c->disk && (!e->disk || !e->keep_cache)) || (c->rootfs && !e->rootfs) ||
            (c->qmp2_socket && !e->qmp2))
                return -ENOMEM;
        return 0;
}

/* Console, QMP, agent channel, then optional devices. The device order must be identical for
 * a VM and its forks (migration matches virtio-mmio slots by creation order). */
static void add_devices(struct argv_builder *b, const struct vmm_config *c, const struct escaped *e)
{
        /* A socket a log reader drains (size cap, rotation), or a file chardev in append mode
         * that keeps the log across restarts (rollback, restore). Without a reader connected
         * the serial port drops output instead of stalling the guest. */
        arg(b, "-chardev");
        if (c->console_socket)
                argf(b, "socket,id=console,path=%s,server=on,wait=off", e->console);
        else
                argf(b, "file,id=console,path=%s,append=on", e->console);
        arg(b, "-serial");
        arg(b, "chardev:console");
        arg(b, "-qmp");
        argf(b, "unix:%s,server=on,wait=off", e->qmp);
        if (e->qmp2) {
                arg(b, "-qmp");
                argf(b, "unix:%s,server=on,wait=off", e->qmp2);
        }
        arg(b, "-device");
        arg(b, "virtio-serial-device");
        arg(b, "-chardev");
        argf(b, "socket,id=agent,path=%s,server=on,wait=off", e->agent);
        arg(b, "-device");
        arg(b, "virtserialport,chardev=agent,name=" VMM_AGENT_PORT_NAME);
        if (c->disk) {
                /* cache=writeback (host page cache, guest flushes honoured): the workspace is
                 * durable state, and unsafe would drop what the guest already fsync'ed if
                 * the host crashes. discard=unmap lets deleted guest files shrink the qcow2. */
                arg(b, "-drive");
                argf(b, "file=%s,format=qcow2,if=none,id=disk0,cache=writeback,discard=unmap%s",
                     e->disk, e->keep_cache);
                arg(b, "-device");
                arg(b, "virtio-blk-device,drive=disk0");
        }
        if (c->rootfs) {
                /* The image's root filesystem, shared by every session of the image: raw and
                 * read-only (the guest puts an overlay on it). After disk0 so a VM without
                 * one keeps its device order. */
                arg(b, "-drive");
                argf(b, "file=%s,format=raw,if=none,id=root0,readonly=on,file.drop-cache=off",
                     e->rootfs);
                arg(b, "-device");
                arg(b, "virtio-blk-device,drive=root0");
        }
        if (c->tap) {
                arg(b, "-netdev");
                argf(b, "tap,id=" VMM_NETDEV_ID ",ifname=%s,script=no,downscript=no", c->tap);
                arg(b, "-device");
                argf(b, "virtio-net-device,netdev=" VMM_NETDEV_ID ",mac=%s%s", c->mac,
                     c->guest_announce ? "" : ",guest_announce=off");
        }
        if (c->vmgenid) {
                arg(b, "-device");
                argf(b, "vmgenid,guid=%s", c->vmgenid);
        }
        /* ISA port 0x505 (microvm has an ISA bus): a guest kernel with the pvpanic driver
         * reports its panic there (QMP GUEST_PANICKED). Not virtio-mmio: the slots above keep
         * their order. */
        arg(b, "-device");
        arg(b, "pvpanic");
        /* Last, so a VM without it keeps every other device's virtio-mmio slot (its
         * checkpoints still restore). No free-page-reporting: QEMU 7.2 would punch what the
         * guest reports out of a fork's shared checkpoint file; forkletd inflates it only for
         * a VM whose RAM file is its own (balloon.c). */
        if (c->balloon && c->balloon_hint) {
                arg(b, "-object");
                arg(b, "iothread,id=" VMM_BALLOON_IOTHREAD);
                arg(b, "-device");
                arg(b, "virtio-balloon-device,id=" VMM_BALLOON_ID ",deflate-on-oom=on,"
                       "free-page-hint=on,iothread=" VMM_BALLOON_IOTHREAD);
        } else if (c->balloon) {
                arg(b, "-device");
                arg(b, "virtio-balloon-device,id=" VMM_BALLOON_ID ",deflate-on-oom=on");
        }
}

uint64_t vmm_ram_bytes(unsigned memory_mib, bool ram_tail)
{
        return ((uint64_t)memory_mib << 20) + (ram_tail ? (uint64_t)VMM_RAM_TAIL_KIB << 10 : 0);
}

int vmm_build_argv(const struct vmm_config *cfg, char ***ret, struct fk_error *err)
{
        _cleanup_(escaped_done) struct escaped e = {};
        struct argv_builder b = {};
        int r;

        if (!cfg || !ret)
                return fk_error_set(err, -EINVAL, "vmm config: missing");
        r = validate(cfg, err);
        if (r < 0)
                return r;
        if (strchr(cfg->tap ? cfg->tap : "", ','))
                return fk_error_set(err, -EINVAL, "vmm config: tap name \"%s\" has a comma",
                                    cfg->tap);
        r = escape_all(cfg, &e);
        if (r < 0)
                return fk_error_set(err, r, "vmm config: out of memory");

        arg(&b, cfg->qemu_binary ? cfg->qemu_binary : "qemu-system-x86_64");
        arg(&b, "-name");
        arg(&b, e.name);
        arg(&b, "-M");
        add_machine(&b, cfg, e.mem);
        add_devices(&b, cfg, &e);
        if (cfg->sandbox) {
                arg(&b, "-sandbox");
                arg(&b, "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny");
        }
        if (cfg->pidfile) {
                arg(&b, "-pidfile");
                arg(&b, cfg->pidfile);
        }
        if (cfg->incoming_defer) {
                arg(&b, "-incoming");
                arg(&b, "defer");
        }
        if (cfg->start_paused)
                arg(&b, "-S");
        if (b.r < 0) {
                fk_strv_free(b.v);
                return fk_error_set(err, b.r, "vmm config: out of memory");
        }
        *ret = b.v;
        return 0;
}

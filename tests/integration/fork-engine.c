/* SPDX-License-Identifier: MIT */
/* Integration test of the fork engine against real QEMU: boot, start httpd, checkpoint, fork 3
 * copy-on-write children and check each one carries on at the parent's guest PID, serving the
 * same bytes, with its own entropy. Needs root, qemu-system-x86_64 and the built image. */
#include "common/cleanup.h"
#include "common/util.h"
#include "vmm/guest/agent-client.h"
#include "vmm/vmm.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NFORKS          3
#define BOOT_TIMEOUT_MS 240000
#define CALL_TIMEOUT_MS 60000

struct vm {
        char dir[256];
        char mem[300], qmp_path[300], agent_path[300], console[300], log[300];
        struct vmm_process *proc;
        struct qmp_client *qmp;
        struct vmm_agent *agent;
};

static char workdir[200];
static struct vm vms[1 + NFORKS];
static int failures;

#define CHECK(cond, ...)                                                                           \
        do {                                                                                       \
                if (!(cond)) {                                                                     \
                        fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                       \
                        fprintf(stderr, __VA_ARGS__);                                              \
                        fputc('\n', stderr);                                                       \
                        failures++;                                                                \
                }                                                                                  \
        } while (0)

#define REQUIRE(cond, ...)                                                                         \
        do {                                                                                       \
                if (!(cond)) {                                                                     \
                        CHECK(cond, __VA_ARGS__);                                                  \
                        return -1;                                                                 \
                }                                                                                  \
        } while (0)

/* busybox wget crashes in this static build; speak HTTP/1.0 through nc and hash the body. */
#define GET_REQ    "printf 'GET /index.html HTTP/1.0\\r\\n\\r\\n' | nc 127.0.0.1 8080"
#define GET_SUM    GET_REQ " | tr -d '\\r' | sed '1,/^$/d' | sha256sum"
#define GET_STATUS GET_REQ " | head -1"

struct buf {
        char data[65536];
        size_t len;
};

static int collect(int stream, const void *data, size_t size, void *userdata)
{
        struct buf *b = userdata;

        if (stream != 1)
                return 0;
        size = FK_MIN(size, sizeof(b->data) - 1 - b->len);
        memcpy(b->data + b->len, data, size);
        b->len += size;
        b->data[b->len] = '\0';
        return 0;
}

/* Runs sh -c SCRIPT in vm, stdout into out (trailing newline stripped); returns exit code. */
static int sh(struct vm *vm, const char *script, struct buf *out)
{
        char *argv[] = {(char *)"sh", (char *)"-c", (char *)script, NULL};
        struct vmm_exec_request req = {.argv = argv, .timeout_ms = CALL_TIMEOUT_MS};
        struct vmm_exec_result res = {0};
        struct fk_error err = {0};
        struct buf local = {0};
        int r;

        if (!out)
                out = &local;
        out->len = 0;
        out->data[0] = '\0';
        r = vmm_agent_exec(vm->agent, &req, collect, out, &res, &err);
        if (r < 0) {
                fprintf(stderr, "exec '%s': %s\n", script, err.msg);
                return -1;
        }
        while (out->len > 0 && out->data[out->len - 1] == '\n')
                out->data[--out->len] = '\0';
        return res.signaled ? 128 + res.signal : res.exit_code;
}

static int start_vm(struct vm *vm, const char *name, const char *image, bool fork_of_ckpt,
                    const char *ckpt_dir)
{
        cleanup_free char *kernel = NULL, *initrd = NULL;
        char guid[64];
        unsigned char rnd[16];
        char **argv = NULL;
        struct fk_error err = {0};
        enum vmm_accel accel;
        int r;

        snprintf(vm->dir, sizeof(vm->dir), "%s/%s", workdir, name);
        REQUIRE(fk_mkdir_p(vm->dir, 0700) >= 0, "mkdir %s", vm->dir);
        if (fork_of_ckpt)
                snprintf(vm->mem, sizeof(vm->mem), "%s/ram", ckpt_dir);
        else
                snprintf(vm->mem, sizeof(vm->mem), "%s/mem.ram", vm->dir);
        snprintf(vm->qmp_path, sizeof(vm->qmp_path), "%s/qmp.sock", vm->dir);
        snprintf(vm->agent_path, sizeof(vm->agent_path), "%s/agent.sock", vm->dir);
        snprintf(vm->console, sizeof(vm->console), "%s/console.log", vm->dir);
        snprintf(vm->log, sizeof(vm->log), "%s/qemu.log", vm->dir);
        fk_asprintf(&kernel, "%s/vmlinuz", image);
        fk_asprintf(&initrd, "%s/initrd.img", image);
        fk_random_bytes(rnd, sizeof(rnd));
        snprintf(guid, sizeof(guid),
                 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", rnd[0],
                 rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], (rnd[6] & 0x0f) | 0x40, rnd[7],
                 (rnd[8] & 0x3f) | 0x80, rnd[9], rnd[10], rnd[11], rnd[12], rnd[13], rnd[14],
                 rnd[15]);
        REQUIRE(vmm_accel_resolve("auto", &accel, &err) >= 0, "accel: %s", err.msg);
        unsigned tsc_khz = 0;
        (void)vmm_host_tsc_khz(&tsc_khz);
        struct vmm_config cfg = {
                .name = name,
                .accel = accel,
                .vcpus = 1,
                .memory_mib = 256,
                .kernel = kernel,
                .initrd = initrd,
                .mem_path = vm->mem,
                .mem_share = !fork_of_ckpt,
                .qmp_socket = vm->qmp_path,
                .agent_socket = vm->agent_path,
                .console_log = vm->console,
                .vmgenid = guid,
                .incoming_defer = fork_of_ckpt,
                .tsc_khz = tsc_khz,
        };
        REQUIRE(vmm_build_argv(&cfg, &argv, &err) >= 0, "argv: %s", err.msg);
        r = vmm_process_spawn(argv, vm->log, NULL, NULL, &vm->proc, &err);
        fk_strv_free(argv);
        REQUIRE(r >= 0, "spawn %s: %s", name, err.msg);
        REQUIRE(qmp_client_connect(vm->qmp_path, 30000, &vm->qmp, &err) >= 0, "qmp %s: %s", name,
                err.msg);
        if (fork_of_ckpt) {
                uint64_t t0 = fk_now_mono_ns();
                REQUIRE(vmm_checkpoint_load(vm->qmp, ckpt_dir, true, CALL_TIMEOUT_MS, &err) >= 0,
                        "load %s: %s", name, err.msg);
                fprintf(stderr, "%s: checkpoint loaded and resumed in %.1f ms\n", name,
                        (double)(fk_now_mono_ns() - t0) / 1e6);
        }
        REQUIRE(vmm_agent_connect(vm->agent_path, 30000, &vm->agent, &err) >= 0, "agent %s: %s",
                name, err.msg);
        REQUIRE(vmm_agent_wait_ready(vm->agent, BOOT_TIMEOUT_MS, &err) >= 0, "ready %s: %s", name,
                err.msg);
        if (fork_of_ckpt) {
                /* A copied machine shares the parent's CRNG state: give it its own identity and
                 * fresh entropy first, as forkletd does. */
                unsigned char entropy[64];

                REQUIRE(fk_random_bytes(entropy, sizeof(entropy)) >= 0, "getrandom");
                REQUIRE(vmm_agent_set_identity(vm->agent, name, NULL, entropy, sizeof(entropy),
                                               CALL_TIMEOUT_MS, &err) >= 0,
                        "identity %s: %s", name, err.msg);
        }
        return 0;
}

static void stop_vm(struct vm *vm)
{
        if (vm->proc) {
                vmm_process_kill(vm->proc, SIGKILL);
                vmm_process_wait(vm->proc, 10000);
        }
        vm->agent = vmm_agent_free(vm->agent);
        vm->qmp = qmp_client_free(vm->qmp);
        vm->proc = vmm_process_free(vm->proc);
}

static void dump_log(const char *path)
{
        cleanup_free char *text = NULL;

        if (fk_read_file(path, 1 << 20, &text, NULL) >= 0)
                fprintf(stderr, "--- %s:\n%s\n---\n", path, text);
}

static void cleanup(void)
{
        if (failures)
                for (size_t i = 0; i < ARRAY_SIZE(vms); i++)
                        if (vms[i].dir[0]) {
                                dump_log(vms[i].log);
                                dump_log(vms[i].console);
                        }
        for (size_t i = 0; i < ARRAY_SIZE(vms); i++)
                stop_vm(&vms[i]);
        if (workdir[0])
                fk_rm_rf(workdir);
}

static int run(const char *image)
{
        char ckpt[300], script[256], pid[32];
        struct buf out, parent_sum, rnd[1 + NFORKS];
        struct vmm_checkpoint_stats st = {0};
        struct fk_error err = {0};

        REQUIRE(start_vm(&vms[0], "parent", image, false, NULL) == 0, "parent boot");
        REQUIRE(sh(&vms[0],
                   "mkdir -p /srv/www && head -c 4900 /dev/urandom | base64 "
                   "> /srv/www/index.html && wc -c < /srv/www/index.html",
                   &out) == 0,
                "write index.html");
        CHECK(atoi(out.data) > 6000 && atoi(out.data) < 7000, "index.html size %s", out.data);
        REQUIRE(sh(&vms[0], "httpd -p 8080 -h /srv/www && sleep 0.5 && pidof httpd", &out) == 0,
                "start httpd");
        snprintf(pid, sizeof(pid), "%d", atoi(out.data));
        REQUIRE(atoi(pid) > 1, "httpd pid '%s'", pid);
        REQUIRE(sh(&vms[0], GET_SUM, &parent_sum) == 0, "GET in parent");
        /* The body hash must be the file's, or an empty body would compare equal everywhere. */
        REQUIRE(sh(&vms[0], "sha256sum < /srv/www/index.html", &out) == 0 &&
                        strcmp(out.data, parent_sum.data) == 0,
                "parent GET body sum '%s' != file sum '%s'", parent_sum.data, out.data);
        snprintf(ckpt, sizeof(ckpt), "%s/ck", workdir);
        REQUIRE(mkdir(ckpt, 0700) == 0, "mkdir ckpt");
        REQUIRE(vmm_checkpoint_save(vms[0].qmp, vms[0].mem, ckpt, CALL_TIMEOUT_MS, &st, &err) >= 0,
                "checkpoint: %s", err.msg);
        fprintf(stderr, "checkpoint: pause %.1f ms, state %llu B, RAM data %llu KiB\n",
                (double)st.pause_ns / 1e6, (unsigned long long)st.state_bytes,
                (unsigned long long)(st.ram_bytes / 1024));
        CHECK(sh(&vms[0], "true", NULL) == 0, "parent runs after checkpoint");
        for (int i = 1; i <= NFORKS; i++) {
                char name[32];

                snprintf(name, sizeof(name), "fork-%d", i - 1);
                REQUIRE(start_vm(&vms[i], name, image, true, ckpt) == 0, "start %s", name);
        }
        for (int i = 1; i <= NFORKS; i++) {
                /* The first command: the server must already be there, at the same pid. */
                snprintf(script, sizeof(script), "cat /proc/%s/comm", pid);
                CHECK(sh(&vms[i], script, &out) == 0 && strcmp(out.data, "httpd") == 0,
                      "fork %d: pid %s is '%s', want httpd", i - 1, pid, out.data);
                char want_id[32];

                snprintf(want_id, sizeof(want_id), "fork-%d", i - 1);
                CHECK(sh(&vms[i], "cat /run/forklet/fork-id", &out) == 0 &&
                              strcmp(out.data, want_id) == 0,
                      "fork %d: fork id '%s'", i - 1, out.data);
                CHECK(sh(&vms[i], GET_STATUS, &out) == 0 && strstr(out.data, " 200 "),
                      "fork %d: status line '%s'", i - 1, out.data);
                CHECK(sh(&vms[i], GET_SUM, &out) == 0 && strcmp(out.data, parent_sum.data) == 0,
                      "fork %d: GET sum '%s' != parent '%s'", i - 1, out.data, parent_sum.data);
        }
        for (int i = 0; i <= NFORKS; i++) {
                CHECK(sh(&vms[i], "head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n'",
                         &rnd[i]) == 0,
                      "urandom %d", i);
                for (int j = 0; j < i; j++)
                        CHECK(strcmp(rnd[i].data, rnd[j].data) != 0,
                              "vm %d and %d read the same random bytes %s", i, j, rnd[i].data);
        }
        return 0;
}

int main(void)
{
        const char *image = getenv("FORKLET_IMAGE_DIR");
        cleanup_free char *kernel = NULL;

        if (geteuid() != 0) {
                fprintf(stderr, "SKIP: needs root\n");
                return 77;
        }
        if (!image || fk_asprintf(&kernel, "%s/vmlinuz", image) < 0 || access(kernel, R_OK) < 0) {
                fprintf(stderr, "SKIP: no guest image (FORKLET_IMAGE_DIR=%s)\n",
                        image ? image : "");
                return 77;
        }
        snprintf(workdir, sizeof(workdir), "/run/fk-test-fork-%d", (int)getpid());
        if (fk_mkdir_p(workdir, 0700) < 0) {
                perror("mkdir workdir");
                return 1;
        }
        atexit(cleanup);
        if (run(image) < 0 && failures == 0)
                failures++;
        fprintf(stderr, "%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
        return failures ? 1 : 0;
}

/* SPDX-License-Identifier: MIT */
/* Integration test of the fork engine against real QEMU: boot, start httpd, checkpoint, fork 3
 * copy-on-write children and check each one carries on at the parent's guest PID, serving the
 * same bytes, with its own fork id and entropy. Needs root, QEMU and the built image. */
#include "tests/fork/fork-harness.h"
#include "common/cleanup.h"
#include "common/util.h"
#include "vmm/vmm.h"
#include "vmm/checkpoint/checkpoint.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NFORKS          3
#define CALL_TIMEOUT_MS 60000

/* busybox wget crashes in this static build; speak HTTP/1.0 through nc and hash the body. */
#define GET_REQ    "printf 'GET /index.html HTTP/1.0\\r\\n\\r\\n' | nc 127.0.0.1 8080"
#define GET_SUM    GET_REQ " | tr -d '\\r' | sed '1,/^$/d' | sha256sum"
#define GET_STATUS GET_REQ " | head -1"

static char workdir[200];
static struct fh_vm vms[1 + NFORKS];
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

static void cleanup(void)
{
        for (size_t i = 0; i < ARRAY_SIZE(vms); i++) {
                if (failures)
                        fh_vm_dump(&vms[i]);
                fh_vm_stop(&vms[i]);
        }
        if (workdir[0])
                fk_rm_rf(workdir);
}

static int start_parent(const char *image, struct fh_out *pid, struct fh_out *sum)
{
        struct fk_error err = {0};
        struct fh_out out;

        REQUIRE(fh_vm_start(&vms[0], workdir, "parent", image, 256, NULL, true, &err) >= 0,
                "parent boot: %s", err.msg);
        REQUIRE(fh_sh(&vms[0],
                      "mkdir -p /srv/www && head -c 4900 /dev/urandom | base64 "
                      "> /srv/www/index.html && wc -c < /srv/www/index.html",
                      &out) == 0,
                "write index.html");
        CHECK(atoi(out.data) > 6000 && atoi(out.data) < 7000, "index.html size %s", out.data);
        REQUIRE(fh_sh(&vms[0], "httpd -p 8080 -h /srv/www && sleep 0.5 && pidof httpd", pid) == 0,
                "start httpd");
        REQUIRE(atoi(pid->data) > 1, "httpd pid '%s'", pid->data);
        REQUIRE(fh_sh(&vms[0], GET_SUM, sum) == 0, "GET in parent");
        /* The body hash must be the file's, or an empty body would compare equal everywhere. */
        REQUIRE(fh_sh(&vms[0], "sha256sum < /srv/www/index.html", &out) == 0 &&
                        strcmp(out.data, sum->data) == 0,
                "parent GET body sum '%s' != file sum '%s'", sum->data, out.data);
        return 0;
}

static void check_fork(int i, const char *pid, const char *parent_sum)
{
        char script[64], want_id[32];
        struct fh_out out;

        /* The first command: the server must already be there, at the same pid. */
        snprintf(script, sizeof(script), "cat /proc/%d/comm", atoi(pid));
        CHECK(fh_sh(&vms[i], script, &out) == 0 && strcmp(out.data, "httpd") == 0,
              "fork %d: pid %s is '%s', want httpd", i - 1, pid, out.data);
        snprintf(want_id, sizeof(want_id), "fork-%d", i - 1);
        CHECK(fh_sh(&vms[i], "cat /run/forklet/fork-id", &out) == 0 &&
                      strcmp(out.data, want_id) == 0,
              "fork %d: fork id '%s'", i - 1, out.data);
        CHECK(fh_sh(&vms[i], GET_STATUS, &out) == 0 && strstr(out.data, " 200 "),
              "fork %d: status line '%s'", i - 1, out.data);
        CHECK(fh_sh(&vms[i], GET_SUM, &out) == 0 && strcmp(out.data, parent_sum) == 0,
              "fork %d: GET sum '%s' != parent '%s'", i - 1, out.data, parent_sum);
}

static int run(const char *image)
{
        static struct fh_out pid, parent_sum, rnd[1 + NFORKS];
        struct vmm_checkpoint_stats st = {0};
        struct fk_error err = {0};
        char ckpt[300];

        if (start_parent(image, &pid, &parent_sum) < 0)
                return -1;
        snprintf(ckpt, sizeof(ckpt), "%s/ck", workdir);
        REQUIRE(mkdir(ckpt, 0700) == 0, "mkdir ckpt");
        REQUIRE(vmm_checkpoint_save(vms[0].qmp, vms[0].mem, ckpt, CALL_TIMEOUT_MS, &st, &err) >= 0,
                "checkpoint: %s", err.msg);
        fprintf(stderr, "checkpoint: pause %.1f ms, state %llu B, RAM data %llu KiB\n",
                (double)st.pause_ns / 1e6, (unsigned long long)st.state_bytes,
                (unsigned long long)(st.ram_bytes / 1024));
        CHECK(fh_sh(&vms[0], "true", NULL) == 0, "parent runs after checkpoint");
        for (int i = 1; i <= NFORKS; i++) {
                char name[32];

                snprintf(name, sizeof(name), "fork-%d", i - 1);
                REQUIRE(fh_vm_start(&vms[i], workdir, name, image, 256, ckpt, true, &err) >= 0,
                        "start %s: %s", name, err.msg);
        }
        for (int i = 1; i <= NFORKS; i++)
                check_fork(i, pid.data, parent_sum.data);
        for (int i = 0; i <= NFORKS; i++) {
                CHECK(fh_sh(&vms[i], "head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n'",
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

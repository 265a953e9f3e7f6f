/* SPDX-License-Identifier: MIT */
/* bench-precopy-ram: does a precopy stream hold the guest's RAM of the switch-over? A guest
 * rewrites 16 MiB in a loop while vmm_checkpoint_live saves it by precopy; once the stream is
 * complete (the source still stopped) its share=on RAM file is hashed page by page, the stream
 * is loaded into a QEMU whose RAM is a new share=on file, started with -S as forkletd's helper
 * is, and the pages are compared. Prints per round how many differ; exit 1 if any did. Root,
 * FORKLET_IMAGE_DIR; FK_PRECOPY_ROUNDS (4), FK_PRECOPY_MIB (256); FK_PRECOPY_AUTOSTART=1
 * starts the loader without -S (what the helper did before: its guest runs on after the load);
 * FK_PRECOPY_KEEP=DIR keeps the source's RAM, the stream and the loaded RAM of each round.
 * The guests have vmm's RAM tail (vmm_config.ram_tail) as forkletd's TCG sessions do;
 * FK_PRECOPY_TAIL=0 leaves it out: run that on a busy host to see QEMU 7.2's page loss under
 * TCG (docs/fork-engine.md). The pause it prints includes the hashing. */
#include "tests/fork/fork-harness.h"
#include "common/cleanup.h"
#include "common/util.h"
#include "vmm/vmm.h"
#include "vmm/checkpoint/checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PAGE       4096
#define TIMEOUT_MS 120000

static char workdir[200];
static struct fh_vm parent, loader;

static void cleanup(void)
{
        fh_vm_stop(&loader);
        fh_vm_stop(&parent);
        if (workdir[0])
                (void)fk_rm_rf(workdir);
}

/* One 64-bit FNV-1a hash per page of path (size bytes; holes read as zeros). */
static int hash_pages(const char *path, size_t size, uint64_t *ret, struct fk_error *err)
{
        cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
        static uint64_t buf[(1 << 20) / 8];

        if (fd < 0)
                return fk_error_set(err, -errno, "open %s: %m", path);
        for (size_t off = 0; off < size; off += sizeof(buf)) {
                size_t want = size - off < sizeof(buf) ? size - off : sizeof(buf);
                ssize_t n = pread(fd, buf, want, (off_t)off);

                if (n != (ssize_t)want)
                        return fk_error_set(err, n < 0 ? -errno : -EIO, "read %s at %zu", path,
                                            off);
                for (size_t p = 0; p < want / PAGE; p++) {
                        uint64_t h = 0xcbf29ce484222325ull;

                        for (size_t w = 0; w < PAGE / 8; w++)
                                h = (h ^ buf[p * PAGE / 8 + w]) * 0x100000001b3ull;
                        ret[off / PAGE + p] = h;
                }
        }
        return 0;
}

struct check {
        const char *mem;
        size_t size;
        uint64_t *source;
        int round;
};

/* The guest is stopped and the stream complete: what the stream must hold. */
static int at_completed(void *userdata, struct fk_error *err)
{
        struct check *c = userdata;
        const char *keep = getenv("FK_PRECOPY_KEEP");
        char copy[400];

        /* FK_PRECOPY_KEEP=DIR: the source's RAM, the stream and the loaded RAM for a look */
        if (keep) {
                snprintf(copy, sizeof(copy), "%s/source-%d", keep, c->round);
                unlink(copy);
                if (vmm_sparse_copy(c->mem, copy, 0, NULL) < 0)
                        return fk_error_set(err, -EIO, "copy %s to %s", c->mem, copy);
        }
        return hash_pages(c->mem, c->size, c->source, err);
}

/* A QEMU of the parent's devices under workdir/loader-ROUND, started as forkletd's helper is:
 * -incoming defer into a new share=on RAM file (loader.mem), -S unless FK_PRECOPY_AUTOSTART,
 * forkletd's environment as it is. QMP connected. */
static int loader_start(const char *image, unsigned mib, int round, struct fk_error *err)
{
        struct vmm_config cfg;
        char name[32], **argv = NULL;
        int r;

        snprintf(name, sizeof(name), "loader-%d", round);
        r = fh_vm_config(&loader, workdir, name, image, mib, NULL, &cfg, err);
        if (r < 0)
                return r;
        cfg.name = "loader";
        cfg.incoming_defer = true;
        cfg.start_paused = getenv("FK_PRECOPY_AUTOSTART") == NULL;
        r = vmm_build_argv(&cfg, &argv, err);
        if (r >= 0)
                r = vmm_process_spawn(argv, loader.log, NULL, NULL, &loader.proc, err);
        fk_strv_free(argv);
        return r < 0 ? r : qmp_client_connect(loader.qmp_path, 30000, &loader.qmp, err);
}

/* Pages where a differs from b; prints the first few guest-physical addresses. */
static size_t compare(const uint64_t *a, const uint64_t *b, size_t pages, const char *what)
{
        size_t n = 0;

        for (size_t i = 0; i < pages; i++)
                if (a[i] != b[i] && n++ < 8)
                        printf("#   %s: page 0x%zx differs\n", what, i * (size_t)PAGE);
        return n;
}

static int round_run(const char *image, unsigned mib, int round, uint64_t *source, uint64_t *loaded)
{
        size_t size = vmm_ram_bytes(mib, fh_ram_tail), pages = size / PAGE;
        struct check c = {.mem = parent.mem, .size = size, .source = source, .round = round};
        struct vmm_live_opts o = {.converge_ms = 20000,
                                  .timeout_ms = TIMEOUT_MS,
                                  .completed = at_completed,
                                  .userdata = &c};
        struct vmm_live_stats st = {0};
        struct fk_error err = {0};
        char stream[300];
        size_t bad;
        int r;

        snprintf(stream, sizeof(stream), "%s/full-%d", workdir, round);
        r = vmm_checkpoint_live(parent.qmp, stream, &o, &st, &err);
        if (r < 0)
                return fh_fail(&parent, "vmm_checkpoint_live (precopy)", &err);
        r = loader_start(image, mib, round, &err);
        if (r >= 0)
                r = vmm_migrate_load_file(loader.qmp, stream, false, TIMEOUT_MS, &err);
        if (r >= 0) {
                cleanup_free char *status = NULL;

                r = qmp_query_status(loader.qmp, TIMEOUT_MS, &status, &err);
                printf("# round %d: the loader is %s after the load\n", round, status);
        }
        if (r >= 0)
                r = hash_pages(loader.mem, size, loaded, &err);
        fh_vm_stop(&loader);
        if (r < 0)
                return fh_fail(&parent, "load the stream into a share=on RAM file", &err);
        bad = compare(source, loaded, pages, "stream");
        printf("# round %d: paused %.1f ms, QEMU downtime %llu ms, stream %.1f MiB%s: %zu of "
               "%zu pages differ\n",
               round, (double)st.pause_ns / 1e6, (unsigned long long)st.downtime_ms,
               (double)st.stream_bytes / 1048576.0, st.forced ? " (forced stop)" : "", bad, pages);
        if (getenv("FK_PRECOPY_KEEP")) {
                char to[400];

                snprintf(to, sizeof(to), "%s/stream-%d", getenv("FK_PRECOPY_KEEP"), round);
                unlink(to);
                (void)vmm_sparse_copy(stream, to, 0, NULL);
                snprintf(to, sizeof(to), "%s/loaded-%d", getenv("FK_PRECOPY_KEEP"), round);
                unlink(to);
                (void)vmm_sparse_copy(loader.mem, to, 0, NULL);
        }
        unlink(stream);
        unlink(loader.mem);
        if (bad)
                printf("not ok - round %d: the loaded stream is not the source's RAM at the "
                       "switch-over\n",
                       round);
        else
                printf("ok - round %d: the stream is the source's RAM at the switch-over\n", round);
        return bad ? 2 : 0;
}

int main(void)
{
        const char *image = getenv("FORKLET_IMAGE_DIR");
        int rounds = getenv("FK_PRECOPY_ROUNDS") ? atoi(getenv("FK_PRECOPY_ROUNDS")) : 4;
        unsigned mib = getenv("FK_PRECOPY_MIB") ? (unsigned)atoi(getenv("FK_PRECOPY_MIB")) : 256;
        cleanup_free uint64_t *source = NULL, *loaded = NULL;
        struct fk_error err = {0};
        int failed = 0;

        if (geteuid() != 0 || !image) {
                fprintf(stderr, "SKIP: needs root and FORKLET_IMAGE_DIR\n");
                return 77;
        }
        if (rounds < 1 || rounds > 100 || mib < 64 || mib > 4096)
                return fh_fail(&parent, "FK_PRECOPY_ROUNDS 1..100, FK_PRECOPY_MIB 64..4096", NULL);
        fh_ram_tail = !getenv("FK_PRECOPY_TAIL") || strcmp(getenv("FK_PRECOPY_TAIL"), "0") != 0;
        source = calloc(vmm_ram_bytes(mib, true) / PAGE, sizeof(*source));
        loaded = calloc(vmm_ram_bytes(mib, true) / PAGE, sizeof(*loaded));
        if (!source || !loaded)
                return fh_fail(&parent, "out of memory", NULL);
        snprintf(workdir, sizeof(workdir), "/dev/shm/fk-vmm-precopy-XXXXXX");
        if (!mkdtemp(workdir))
                return 1;
        atexit(cleanup);
        if (fh_vm_start(&parent, workdir, "parent", image, mib, NULL, true, &err) < 0)
                return fh_fail(&parent, "boot the parent", &err);
        /* the writer of fork-live: 16 MiB rewritten in a loop, and a counter */
        if (fh_sh(&parent,
                  "(i=0; while :; do i=$((i + 1)); echo $i > /run/c; "
                  "head -c 16777216 /dev/urandom > /run/blob; done) >/dev/null 2>&1 &",
                  NULL) != 0)
                return fh_fail(&parent, "start the writer", NULL);
        sleep(2);
        for (int i = 0; i < rounds; i++) {
                int r = round_run(image, mib, i, source, loaded);

                if (r == 1)
                        return 1;
                failed += r != 0;
                if (fh_sh(&parent, "cat /run/c", NULL) != 0)
                        return fh_fail(&parent, "the parent after the checkpoint", NULL);
                sleep(1);
        }
        if (failed)
                return fh_fail(&parent, "rounds whose stream lost pages", NULL);
        printf("PASS\n");
        return 0;
}

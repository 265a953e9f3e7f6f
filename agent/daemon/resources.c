/* SPDX-License-Identifier: MIT */
/* Resource control of sessions through cgroups/: the size class as cgroup limits, the cgroup's
 * life (created before QEMU, joined before exec, frozen on pause, removed after teardown),
 * live counters for status, live class changes, and leftovers of vanished sessions. */
#include "agent/daemon/daemon-internal.h"
#include "cgroups/cgroups.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "manifest/manifest.h"
#include "vmm/vmm.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MIB ((uint64_t)1024 * 1024)
/* An empty cgroup this young may belong to a boot of another forkletd sharing the parent. */
#define LEFTOVER_MIN_AGE_S 30

/* QEMU's memory beyond guest RAM that memory.max allows: qemuOverheadMiB, and under TCG the
 * translation cache forklet gives QEMU (vmm's default, a restored guest's the same), which a
 * busy guest fills and KVM does not have. Without it a cold-booted 256 MiB TCG session whose
 * RAM a live checkpoint made resident was OOM-killed: QEMU's anonymous memory 101 MiB, the
 * page cache it wrote the rest of the 128. Admission charges qemuOverheadMiB alone. */
static uint64_t overhead_bytes(const struct node_config *cfg, bool tcg)
{
        return ((uint64_t)cfg->qemu_overhead_mib + (tcg ? VMM_TCG_TB_MIB : 0)) * MIB;
}

void agent_resources_limits(const struct node_config *cfg, const struct size_class *sc, bool tcg,
                            struct cg_limits *ret)
{
        uint64_t overhead = overhead_bytes(cfg, tcg);
        double cores = sc->cpu > 0 ? sc->cpu : (double)sc->vcpus;
        uint64_t weight = (uint64_t)(cores * 100 + 0.5);

        *ret = (struct cg_limits){
                .cpu_cores = sc->cpu,
                /* under contention sessions share CPU in proportion to their class */
                .cpu_weight = FK_MIN(FK_MAX(weight, 1u), 10000u),
                .memory_max = (uint64_t)sc->memory_mib * MIB + overhead,
                .memory_high = (uint64_t)sc->memory_mib * MIB + overhead - overhead / 4,
                .pids_max = sc->pids,
                .io_weight = sc->io_weight,
        };
}

/* The first process in the cgroup that is not ours, 0 when none (or no cgroup); ret_live
 * (may be NULL): whether one of ours is there and not exiting. A process in its exit is
 * neither: a QEMU a rollback discarded stays in the cgroup until the kernel has freed its
 * memory, without its command line. */
static pid_t foreign_pid(struct agent_daemon *d, const char *key, bool *ret_live)
{
        cleanup_free pid_t *pids = NULL;
        size_t n = 0;

        if (ret_live)
                *ret_live = false;
        if (cg_pids(d->cg, key, &pids, &n, NULL) < 0)
                return 0;
        for (size_t i = 0; i < n; i++) {
                if (agent_runfs_pid_exiting(pids[i]))
                        continue;
                if (!agent_runfs_pid_is_ours(pids[i], d->cfg->run_dir))
                        return pids[i];
                if (ret_live)
                        *ret_live = true;
        }
        return 0;
}

/* The class's limits for a VM running with memory_mib of RAM (0: the class's): guest RAM cannot
 * change under a running guest, so its memory limits follow the RAM it booted with. */
static void limits_for_vm(const struct agent_daemon *d, const struct size_class *sc,
                          unsigned memory_mib, struct cg_limits *ret)
{
        bool tcg = d->accel == VMM_ACCEL_TCG;
        uint64_t overhead = overhead_bytes(d->cfg, tcg);

        agent_resources_limits(d->cfg, sc, tcg, ret);
        if (!memory_mib)
                return;
        ret->memory_max = (uint64_t)memory_mib * MIB + overhead;
        ret->memory_high = ret->memory_max - overhead / 4;
}

int agent_resources_prepare(struct agent_daemon *d, const char *key, const struct size_class *sc,
                            struct cg_join **ret, struct fk_error *err)
{
        struct cg_limits l;
        uint64_t aside;
        bool live;
        pid_t other;
        int r;

        *ret = NULL;
        if (!d->cg)
                return 0;
        other = foreign_pid(d, key, &live);
        if (other > 0)
                return fk_error_set(err, -EBUSY,
                                    "cgroup %s/%s holds pid %d, which is not a VM of this node "
                                    "(another forkletd with the same cgroupParent?)",
                                    cg_manager_parent_path(d->cg), key, (int)other);
        /* A QEMU of a crashed boot may linger: the new one must start alone. One in its exit
         * (a rollback's) is not waited for. */
        r = live ? cg_kill_all(d->cg, key, err) : 0;
        if (r < 0 && r != -ENOENT)
                return r;
        agent_resources_limits(d->cfg, sc, d->accel == VMM_ACCEL_TCG, &l);
        /* A rollback's boot: the replaced VM's RAM file is charged to this cgroup until the new
         * VM runs (agent_rollback_set_aside_ram); the limits hold it beside the new QEMU until
         * then (agent_resources_reset_limits), rather than throttle that QEMU's start. */
        aside = agent_rollback_ram_aside(d, key);
        l.memory_max += aside;
        l.memory_high += aside;
        r = cg_create(d->cg, key, &l, err);
        if (r < 0)
                return r;
        r = cg_prepare_join(d->cg, key, ret, err);
        if (r < 0)
                (void)cg_destroy(d->cg, key, NULL);
        return r;
}

void agent_resources_reset_limits(struct agent_daemon *d, const char *key,
                                  const struct size_class *sc, unsigned memory_mib)
{
        struct fk_error err = {0};
        struct cg_limits l;

        if (!d->cg || !sc)
                return;
        limits_for_vm(d, sc, memory_mib, &l);
        /* a failed boot removed the cgroup: nothing to set back */
        if (cg_update_limits(d->cg, key, &l, &err) < 0 && err.code != -ENOENT)
                log_warning("session %s: cgroup limits: %s", key, err.msg);
}

/* Another forkletd shares the cgroup (same cgroupParent and session key): kill only this
 * node's processes in it and leave the cgroup to the other. */
static void kill_ours(struct agent_daemon *d, const char *key)
{
        cleanup_free pid_t *pids = NULL;
        size_t n = 0;

        log_warning("session %s: cgroup %s/%s also holds processes of another forkletd "
                    "(same cgroupParent?): killing only this node's, keeping the cgroup",
                    key, cg_manager_parent_path(d->cg), key);
        if (cg_pids(d->cg, key, &pids, &n, NULL) < 0)
                return;
        for (size_t i = 0; i < n; i++)
                if (agent_runfs_pid_is_ours(pids[i], d->cfg->run_dir))
                        (void)kill(pids[i], SIGKILL);
}

void agent_resources_teardown(struct agent_daemon *d, const char *key)
{
        struct fk_error err = {0};
        int r;

        if (!d->cg)
                return;
        /* v1: a frozen task does not die of SIGKILL until thawed */
        (void)cg_thaw(d->cg, key, NULL);
        if (foreign_pid(d, key, NULL) > 0) {
                kill_ours(d, key);
                return;
        }
        r = cg_kill_all(d->cg, key, &err);
        if (r < 0 && r != -ENOENT)
                log_warning("session %s: kill leftover processes: %s", key, err.msg);
        r = cg_destroy(d->cg, key, &err);
        if (r < 0)
                log_warning("session %s: remove cgroup: %s", key, err.msg);
}

int agent_resources_freeze(struct agent_daemon *d, const char *key, bool frozen,
                           struct fk_error *err)
{
        if (!d->cg)
                return 0;
        return frozen ? cg_freeze(d->cg, key, err) : cg_thaw(d->cg, key, err);
}

void agent_resources_status(struct agent_daemon *d, const struct agent_session *s, json_t *status)
{
        if (!d->cg || !s->res.has_cgroup || !s->res.cgroup_path)
                return;
        (void)json_object_set_new(status, "cgroup", json_string(s->res.cgroup_path));
        if (s->res.sample)
                (void)json_object_set(status, "resources", s->res.sample);
}

void agent_resources_resize(struct agent_daemon *d, struct agent_session *s)
{
        const struct size_class *sc =
                s->spec ? node_config_find_size_class(d->cfg, s->spec->size_class) : NULL;
        uint64_t now = agent_now_real(d);
        struct fk_error err = {0};
        struct cg_limits l;
        int r = 0;

        if (!sc || !s->vm || !s->res.vcpus)
                return;
        limits_for_vm(d, sc, s->res.memory_mib, &l);
        if (d->cg && s->res.has_cgroup)
                r = cg_update_limits(d->cg, s->key, &l, &err);
        if (r < 0)
                agent_session_set_condition(s, AGENT_COND_RESOURCES, "False", "UpdateFailed", now,
                                            "%s", err.msg);
        else if (sc->vcpus != s->res.vcpus || sc->memory_mib != s->res.memory_mib)
                agent_session_set_condition(
                        s, AGENT_COND_RESOURCES, "False", "RestartRequired", now,
                        "size class %s: cpu, pids and ioWeight applied live; %u vCPU/%u MiB "
                        "(running %u vCPU/%u MiB) take effect at the next boot",
                        sc->name, sc->vcpus, sc->memory_mib, s->res.vcpus, s->res.memory_mib);
        else
                agent_session_set_condition(s, AGENT_COND_RESOURCES, "True", "Applied", now,
                                            "size class %s applied live", sc->name);
}

void agent_cgroups_thaw_for_adoption(struct cg_manager *cg, const struct node_config *cfg)
{
        cleanup_free char *dir = NULL;
        struct dirent *de;
        DIR *dp;

        if (!cg || fk_asprintf(&dir, "%s/sessions", cfg->run_dir) < 0 || !(dp = opendir(dir)))
                return;
        while ((de = readdir(dp)))
                if (cg_name_is_valid(de->d_name) && de->d_name[0] != '.' &&
                    cg_thaw(cg, de->d_name, NULL) >= 0)
                        log_debug("session %s: cgroup thawed for adoption", de->d_name);
        closedir(dp);
}

static bool strv_has(char *const *v, const char *s)
{
        for (size_t i = 0; v && v[i]; i++)
                if (strcmp(v[i], s) == 0)
                        return true;
        return false;
}

static bool known_session(struct agent_daemon *d, const char *key)
{
        for (size_t i = 0; i < d->n_sessions; i++)
                if (strcmp(d->sessions[i]->key, key) == 0)
                        return true;
        return false;
}

/* A leftover is removed when every process in it is ours, and an empty one once it is old
 * enough not to be a boot of another forkletd in flight. */
static void remove_leftover(struct agent_daemon *d, const char *key, uint64_t now_s)
{
        cleanup_free pid_t *pids = NULL;
        cleanup_free char *path = NULL;
        struct fk_error err = {0};
        struct stat st;
        size_t n = 0;
        pid_t other;

        if (cg_pids(d->cg, key, &pids, &n, NULL) < 0)
                return;
        if ((other = foreign_pid(d, key, NULL)) > 0) {
                log_info("cgroup %s/%s: pid %d is not a VM of this node; left alone",
                         cg_manager_parent_path(d->cg), key, (int)other);
                return;
        }
        if (n == 0 && fk_asprintf(&path, "%s/%s", cg_manager_parent_path(d->cg), key) >= 0 &&
            stat(path, &st) == 0 && now_s < (uint64_t)st.st_mtime + LEFTOVER_MIN_AGE_S)
                return;
        (void)cg_thaw(d->cg, key, NULL);
        if (cg_kill_all(d->cg, key, &err) < 0 || cg_destroy(d->cg, key, &err) < 0)
                log_warning("leftover cgroup %s: %s", key, err.msg);
        else
                log_info("removed the cgroup of vanished session %s (%zu process(es) killed)", key,
                         n);
}

void agent_daemon_set_cgroups(struct agent_daemon *d, struct cg_manager *cg)
{
        char **names = NULL;
        struct fk_error err = {0};

        pthread_mutex_lock(&d->lock);
        d->cg = cg;
        if (cg && cg_list(cg, &names, &err) < 0)
                log_warning("list session cgroups: %s", err.msg);
        for (size_t i = 0; names && names[i]; i++)
                if (!known_session(d, names[i]))
                        remove_leftover(d, names[i], agent_now_real(d) / 1000000000ull);
        /* adopted VMs keep the cgroup they were booted in */
        for (size_t i = 0; cg && i < d->n_sessions; i++) {
                struct agent_session *s = d->sessions[i];

                if (s->vm && strv_has(names, s->key) &&
                    cg_manager_cgroup_path(cg, s->key, &s->res.cgroup_path) >= 0)
                        s->res.has_cgroup = true;
                if (s->res.has_cgroup && s->res.reset_limits_mib && s->spec)
                        agent_resources_reset_limits(
                                d, s->key, node_config_find_size_class(d->cfg, s->spec->size_class),
                                s->res.reset_limits_mib);
                s->res.reset_limits_mib = 0;
        }
        pthread_mutex_unlock(&d->lock);
        fk_strv_free(names);
}

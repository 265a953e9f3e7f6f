/* SPDX-License-Identifier: MIT */
/* Crash recovery at start (after VMs were adopted): interrupted boots from the journal, QEMU
 * processes of no session (found by the run dir in their argv) and state dirs of no session. */
#include "agent/daemon/daemon-internal.h"
#include "agent/jail/jail.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "manifest/manifest.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ORPHAN_CMDLINE_MAX (64 * 1024)

static struct agent_session *find_key(struct agent_daemon *d, const char *key)
{
        for (size_t i = 0; i < d->n_sessions; i++)
                if (strcmp(d->sessions[i]->key, key) == 0)
                        return d->sessions[i];
        return NULL;
}

/* A boot the crash interrupted: adopted means it finished (the guest answered); otherwise its
 * QEMU and run dir are removed (orphan pass) and the planner boots again from scratch. */
static int recover_boot(struct agent_daemon *d, const char *key, json_t *data)
{
        struct agent_session *s = find_key(d, key);
        const char *run_dir = json_string_value(json_object_get(data, "runDir"));

        if (s && s->vm) {
                log_info("session %s: boot interrupted by a restart finished (VM adopted)", key);
                return 0;
        }
        if (run_dir)
                (void)fk_rm_rf(run_dir);
        if (s && s->spec) {
                s->phase = SESSION_PHASE_PENDING;
                agent_session_set_condition(s, AGENT_COND_READY, "False", "BootInterrupted",
                                            agent_now_real(d), "%s",
                                            "forkletd restarted during boot; booting again");
        }
        log_info("session %s: boot interrupted by a restart undone", key);
        return 0;
}

/* Whether /proc/PID/cmdline names a file under prefix; the whole cmdline is one buffer of
 * NUL-separated arguments. */
static bool cmdline_mentions(pid_t pid, const char *prefix)
{
        cleanup_free char *path = NULL, *buf = NULL;
        size_t size = 0;

        if (fk_asprintf(&path, "/proc/%d/cmdline", (int)pid) < 0 ||
            fk_read_file(path, ORPHAN_CMDLINE_MAX, &buf, &size) < 0)
                return false;
        for (size_t off = 0; off < size; off += strlen(buf + off) + 1)
                if (strstr(buf + off, prefix))
                        return strstr(buf, "qemu") != NULL; /* argv[0] */
        return false;
}

static bool pid_owned(struct agent_daemon *d, pid_t pid)
{
        for (size_t i = 0; i < d->n_sessions; i++)
                if (d->sessions[i]->pid == pid)
                        return true;
        return false;
}

static void kill_and_wait(pid_t pid)
{
        struct timespec ts = {0, 20 * 1000 * 1000};

        (void)kill(pid, SIGKILL);
        for (int i = 0; i < 250 && kill(pid, 0) == 0; i++) {
                char path[64], state = 0;
                cleanup_fclose FILE *f = NULL;

                snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
                f = fopen(path, "re");
                if (f && fscanf(f, "%*d %*s %c", &state) == 1 && state == 'Z')
                        break; /* reaped by its parent (init or a subreaper) eventually */
                nanosleep(&ts, NULL);
        }
}

static size_t kill_orphan_qemus(struct agent_daemon *d)
{
        cleanup_free char *prefix = NULL;
        struct dirent *de;
        size_t n = 0;
        DIR *dp;

        if (fk_asprintf(&prefix, "%s/sessions/", d->cfg->run_dir) < 0)
                return 0;
        dp = opendir("/proc");
        if (!dp)
                return 0;
        while ((de = readdir(dp))) {
                pid_t pid;

                if (!isdigit((unsigned char)de->d_name[0]))
                        continue;
                pid = (pid_t)atoi(de->d_name);
                if (pid == getpid() || pid_owned(d, pid) || !cmdline_mentions(pid, prefix))
                        continue;
                log_notice("killing orphan QEMU pid %d (its run dir belongs to no session)",
                           (int)pid);
                kill_and_wait(pid);
                n++;
        }
        closedir(dp);
        return n;
}

/* Entries of <base>/sessions that no session owns. */
static size_t remove_orphan_dirs(struct agent_daemon *d, const char *base, bool state)
{
        cleanup_free char *dir = NULL;
        struct dirent *de;
        size_t n = 0;
        DIR *dp;

        if (fk_asprintf(&dir, "%s/sessions", base) < 0)
                return 0;
        dp = opendir(dir);
        if (!dp)
                return 0;
        while ((de = readdir(dp))) {
                cleanup_free char *path = NULL;

                /* .KEY.helper-X: a checkpoint writer's helper QEMU (killed above) */
                if ((de->d_name[0] == '.' && !strstr(de->d_name, ".helper-")) ||
                    find_key(d, de->d_name))
                        continue;
                if (fk_asprintf(&path, "%s/%s", dir, de->d_name) < 0)
                        continue;
                /* A stored session that failed to load, or a record that could not be read:
                 * keep it for the operator. */
                if (state && agent_store_keeps(d->store, de->d_name))
                        continue;
                log_notice("removing %s (belongs to no session)", path);
                if (state)
                        (void)agent_jail_forget(path); /* its uid may go to a new session */
                if (fk_rm_rf(path) >= 0)
                        n++;
                if (state)
                        agent_store_forget(d->store, de->d_name);
        }
        closedir(dp);
        return n;
}

/* What a checkpoint or snapshot killed half-way left: ".*.partial" dirs (never listed). */
static void remove_partials(struct agent_daemon *d)
{
        for (size_t i = 0; i < d->n_sessions; i++) {
                cleanup_free char *sd = NULL;

                if (agent_session_state_dir(d->cfg->state_dir, d->sessions[i]->key, &sd) >= 0)
                        agent_checkpoint_clean_partial(sd);
        }
        agent_snapshot_clean_partial(d->cfg->state_dir);
}

void agent_recover_at_start(struct agent_daemon *d)
{
        size_t procs, dirs;

        (void)agent_journal_register("boot", recover_boot);
        pthread_mutex_lock(&d->lock);
        agent_journal_recover_all(d, d->cfg->state_dir);
        procs = kill_orphan_qemus(d);
        dirs = remove_orphan_dirs(d, d->cfg->run_dir, false);
        /* An invalid manifest file hides its sessions: their disks are not orphans. */
        if (d->dir_errors && d->dir_errors[0])
                log_notice("invalid manifest files: not removing unowned state dirs this time");
        else
                dirs += remove_orphan_dirs(d, d->cfg->state_dir, true);
        remove_partials(d);
        pthread_mutex_unlock(&d->lock);
        if (procs || dirs)
                log_info("recovery: %zu orphan QEMU process(es) killed, %zu orphan dir(s) removed",
                         procs, dirs);
}

/* Audits phase changes since the last pass (under d->lock) and wakes API watchers. */
void agent_audit_transitions(struct agent_daemon *d)
{
        uint64_t now = agent_now_real(d);

        for (size_t i = 0; i < d->n_sessions; i++) {
                struct agent_session *s = d->sessions[i];
                const struct agent_condition *c = &s->conditions[AGENT_COND_READY];
                char who[160], what[160];

                if ((int)s->phase == s->audited_phase)
                        continue;
                snprintf(who, sizeof(who), "%s/%s", s->namespace, s->name);
                snprintf(what, sizeof(what), "%s->%s (%s)",
                         s->audited_phase >= 0 ? session_phase_to_string(s->audited_phase) : "New",
                         session_phase_to_string(s->phase), c->set ? c->reason : "");
                s->audited_phase = (int)s->phase;
                if (d->audit)
                        (void)agent_audit_append(d->audit, &(struct agent_audit_entry){
                                                                   .caller = "forkletd",
                                                                   .session = who,
                                                                   .action = "transition",
                                                                   .result = what,
                                                                   .time_ns = now,
                                                           });
        }
        d->revision++;
        pthread_cond_broadcast(&d->watch_cond);
}

void agent_daemon_audit(struct agent_daemon *d, const char *ns, const char *name,
                        const char *action, const char *result, double latency_s)
{
        char who[160];

        if (!d->audit)
                return;
        snprintf(who, sizeof(who), "%s/%s", ns, name);
        (void)agent_audit_append(d->audit, &(struct agent_audit_entry){
                                                   .caller = "forkletd",
                                                   .session = who,
                                                   .action = action,
                                                   .result = result,
                                                   .latency_s = latency_s,
                                                   .time_ns = agent_now_real(d),
                                           });
}

void agent_daemon_audit_entry(struct agent_daemon *d, const struct agent_audit_entry *e)
{
        struct agent_audit_entry copy = *e;

        if (!d->audit)
                return;
        copy.time_ns = agent_now_real(d);
        (void)agent_audit_append(d->audit, &copy);
}

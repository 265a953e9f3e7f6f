/* SPDX-License-Identifier: MIT */
/* What the job runner does after a cold boot: lifecycle.afterStart (its exit, signal or
 * timeout and stderr tail as the AfterStart condition; a failure is a state) and which
 * spec.checkpoints are still to take. */
#include "agent/daemon/daemon-internal.h"
#include "agent/image/image.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "manifest/manifest.h"
#include "vmm/vmm.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AFTER_START_TIMEOUT_MS 120000

/* The last bytes afterStart wrote to stderr, for the condition that reports its failure. */
struct stderr_tail {
        char buf[160];
        size_t len;
};

static int keep_stderr_tail(int stream, const void *data, size_t size, void *ud)
{
        struct stderr_tail *t = ud;
        size_t cap = sizeof(t->buf) - 1;

        if (stream != 2 || size == 0)
                return 0;
        if (size >= cap) {
                memcpy(t->buf, (const char *)data + size - cap, cap);
                t->len = cap;
        } else {
                if (t->len + size > cap) {
                        size_t drop = t->len + size - cap;

                        memmove(t->buf, t->buf + drop, t->len - drop);
                        t->len -= drop;
                }
                memcpy(t->buf + t->len, data, size);
                t->len += size;
        }
        t->buf[t->len] = '\0';
        return 0;
}

/* 0, or -errno with err saying how afterStart failed (exit code or signal and its stderr tail,
 * guest text escaped). Does not log. */
static int run_after_start(struct agent_daemon *d, struct agent_vm_ref *vm, char *const *argv,
                           char *const *env, const struct agent_image_exec *ix,
                           struct fk_error *err)
{
        /* an image's own command (runImageCommand) is its service: started in the background */
        struct vmm_exec_request req = {.argv = argv,
                                       .env = env,
                                       .cwd = ix->cwd,
                                       .user = ix->user,
                                       .timeout_ms = AFTER_START_TIMEOUT_MS,
                                       .detach = ix->argv == argv};
        struct vmm_exec_result res = {0};
        struct stderr_tail tail = {0};
        char how[48], text[sizeof(tail.buf) * 4];
        int r;

        r = d->ops.exec(d->ops.userdata, vm->vm, &req, keep_stderr_tail, &tail, &res, err);
        if (r < 0)
                return err->msg[0] ? r : fk_error_set(err, r, "%s", strerror(-r));
        if (!res.signaled && !res.timed_out && res.exit_code == 0)
                return 0;
        if (res.timed_out)
                snprintf(how, sizeof(how), "timed out after %u s", AFTER_START_TIMEOUT_MS / 1000);
        else if (res.signaled)
                snprintf(how, sizeof(how), "killed by signal %d", res.signal);
        else
                snprintf(how, sizeof(how), "exited %d", res.exit_code);
        fk_escape_text(tail.buf, text, sizeof(text));
        return fk_error_set(err, -EIO, "afterStart %s%s%s", how, text[0] ? "; stderr: " : "", text);
}

int agent_checkpoints_missing(struct agent_daemon *d, struct agent_session *s, char ***ret)
{
        json_t *a = agent_ck_cache(d, s), *m;
        char **names = NULL;
        int r = 0;

        for (size_t i = 0; s->spec && r >= 0 && i < s->spec->n_checkpoints; i++) {
                const char *want = s->spec->checkpoints[i].name;
                bool found = false;
                size_t k;

                json_array_foreach(a, k, m)
                {
                        const char *n = json_string_value(json_object_get(m, "name"));

                        if (n && strcmp(n, want) == 0)
                                found = true;
                }
                if (!found)
                        r = fk_strv_push(&names, want);
        }
        if (r < 0) {
                fk_strv_free(names);
                return r;
        }
        *ret = names;
        return 0;
}

/* Under the lock: afterStart failed (err). The failure is a state: AfterStart False with the
 * exit and the stderr tail, Ready False with that reason, declared checkpoints (and so declared
 * forks) wait; with restartPolicy OnFailure the session fails and boots again after back-off. */
static void after_start_failed(struct agent_daemon *d, struct agent_session *s,
                               const struct fk_error *err)
{
        uint64_t now = agent_now_real(d);

        log_error("session %s: %s", s->key, err->msg);
        agent_session_set_condition(s, AGENT_COND_AFTER_START, "False", "Failed", now, "%s",
                                    err->msg);
        if (s->spec && s->spec->n_checkpoints)
                agent_session_set_condition(s, AGENT_COND_CHECKPOINTS, "False", "AfterStartFailed",
                                            now, "%s",
                                            "spec.checkpoints wait for a successful afterStart");
        if (s->spec && s->spec->restart_policy == RESTART_POLICY_ON_FAILURE)
                agent_session_fail(d, s, "AfterStartFailed", err->msg);
        else
                agent_session_set_condition(s, AGENT_COND_READY, "False", "AfterStartFailed", now,
                                            "%s", err->msg);
}

enum core_post_start agent_post_start_first(const struct session_manifest *m)
{
        /* an OCI image's own command (lifecycle.runImageCommand) runs as the afterStart default */
        if (m && (m->after_start || (m->run_image_command && manifest_image_is_ref(m->image))))
                return CORE_POST_START_AFTER_START;
        if (m && m->n_checkpoints)
                return CORE_POST_START_CHECKPOINTS;
        return CORE_POST_START_NONE;
}

int agent_after_start_run(struct agent_daemon *d, struct agent_session *s, struct agent_vm_ref *vm,
                          struct fk_error *err)
{
        char **after = NULL, **env = NULL;
        struct agent_image_exec ix = {0};
        bool oci = false, want_cmd = false;
        int r = 0;

        pthread_mutex_lock(&d->lock);
        if (s->spec && s->spec->after_start)
                r = fk_strv_copy(s->spec->after_start, &after);
        for (size_t i = 0; s->spec && r >= 0 && i < s->spec->n_env; i++) {
                cleanup_free char *kv = NULL;

                r = fk_asprintf(&kv, "%s=%s", s->spec->env[i].key, s->spec->env[i].value);
                if (r >= 0)
                        r = fk_strv_push(&env, kv);
        }
        oci = s->spec && manifest_image_is_ref(s->spec->image);
        want_cmd = oci && s->spec->run_image_command && !after;
        pthread_mutex_unlock(&d->lock);
        /* an OCI image: its Env under spec.env, its WorkingDir and User, its command when asked */
        if (r >= 0 && oci && agent_image_exec_prepare(d, s->key, env, want_cmd, &ix) >= 0) {
                fk_strv_free(env);
                env = TAKE_PTR(ix.env);
                if (want_cmd && ix.argv)
                        after = ix.argv;
        }
        if (r < 0)
                fk_error_set(err, r, "afterStart: %s", strerror(-r));
        else if (after && vm)
                r = run_after_start(d, vm, after, env, &ix, err);
        if (after != ix.argv)
                fk_strv_free(after);
        fk_strv_free(env);
        agent_image_exec_done(&ix);
        return r;
}

void agent_after_start_done(struct agent_daemon *d, struct agent_session *s, int r,
                            const struct fk_error *err)
{
        if (r < 0) {
                s->post_start = CORE_POST_START_FAILED;
                after_start_failed(d, s, err);
                return;
        }
        s->post_start = s->spec && s->spec->n_checkpoints ? CORE_POST_START_CHECKPOINTS
                                                          : CORE_POST_START_NONE;
        agent_session_set_condition(s, AGENT_COND_AFTER_START, "True", "Succeeded",
                                    agent_now_real(d), "%s", "afterStart exited 0");
}

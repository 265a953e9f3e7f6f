/* SPDX-License-Identifier: MIT */
/* vmm_agent_exec: sends EXEC (and stdin), then turns the guest's STARTED/STDOUT/STDERR/EXIT
 * frames for that request into callbacks and a result. The output cap is enforced here too:
 * the guest's promise to honour it is not trusted. */
#include "vmm/agent-client/agent-client.h"
#include "vmm/agent-client/agent-client-internal.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/util.h"

#define HOST_DEFAULT_OUTPUT_CAP (16u * 1024 * 1024) /* same as the agent's default */

struct exec_state {
        const struct vmm_exec_request *req;
        vmm_exec_output_fn out_fn;
        void *userdata;
        struct vmm_exec_result res;
        bool started, done;
        size_t cap, seen;
        int cb_error;
};

static int fail(struct fk_error *err, int r)
{
        switch (r) {
        case -ETIMEDOUT:
                return fk_error_set(err, r, "exec: guest agent did not answer in time");
        case -ENOTCONN:
                return fk_error_set(err, r, "exec: guest agent channel is not connected");
        case -ECONNRESET:
                return fk_error_set(err, r, "exec: guest agent connection lost");
        case -EPROTO:
                return fk_error_set(err, r,
                                    "exec: guest agent broke the protocol; channel dropped");
        case -ENOBUFS:
                return fk_error_set(err, r, "exec: guest sent more than the host buffers");
        default:
                return fk_error_set(err, r, "exec: %s", strerror(-r));
        }
}

/* Encodes and sends EXEC, then stdin in chunks and STDIN_EOF. */
static int send_request(struct vmm_agent *a, struct agent_pending *p,
                        const struct vmm_exec_request *req)
{
        char *const empty[] = {NULL};
        struct guest_msg_exec m = {
                .flags = (req->detach ? GUEST_EXEC_DETACH : 0) |
                         (req->stdin_data && !req->detach ? GUEST_EXEC_HAS_STDIN : 0),
                .timeout_ms = req->timeout_ms,
                .output_cap = req->output_cap,
                .cwd = (char *)req->cwd,
                .user = (char *)req->user,
                .argv = (char **)req->argv,
                .env = (char **)(req->env ? req->env : empty),
        };
        struct guest_buf b = {0};
        int r = guest_proto_put_exec(&b, p->id, &m);

        if (r == 0)
                r = vmm_agent_send(a, p, &b);
        for (size_t off = 0; r == 0 && (m.flags & GUEST_EXEC_HAS_STDIN);) {
                size_t n = FK_MIN(req->stdin_size - off, (size_t)GUEST_PROTO_CHUNK);

                b.size = 0;
                if (n == 0)
                        r = guest_proto_put_raw(&b, GUEST_MSG_STDIN_EOF, p->id, NULL, 0);
                else
                        r = guest_proto_put_raw(&b, GUEST_MSG_STDIN, p->id,
                                                (const uint8_t *)req->stdin_data + off, n);
                if (r == 0)
                        r = vmm_agent_send(a, p, &b);
                if (n == 0)
                        break;
                off += n;
        }
        guest_buf_free(&b);
        return r;
}

static void on_output(struct vmm_agent *a, struct agent_pending *p, struct exec_state *s,
                      const struct agent_frame *f)
{
        size_t n = f->size;

        if (s->cb_error)
                return;
        if (n > s->cap - s->seen) {
                n = s->cap - s->seen;
                s->res.output_capped = true;
        }
        s->seen += n;
        if (n > 0 && s->out_fn) {
                int r = s->out_fn(f->type == GUEST_MSG_STDOUT ? 1 : 2, f->data, n, s->userdata);

                if (r < 0) { /* the caller gave up: kill the command, stop waiting */
                        struct guest_buf b = {0};

                        s->cb_error = r;
                        if (guest_proto_put_u32(&b, GUEST_MSG_SIGNAL, p->id, SIGKILL) == 0)
                                (void)vmm_agent_send(a, p, &b);
                        guest_buf_free(&b);
                }
        }
}

/* Handles one frame; returns <0 on a failure that ends the call. */
static int on_frame(struct vmm_agent *a, struct agent_pending *p, struct exec_state *s,
                    const struct agent_frame *f, struct fk_error *err)
{
        char msg[AGENT_GUEST_TEXT_MAX];
        struct guest_msg_error e;
        struct guest_msg_exit x;
        uint32_t pid;
        int r;

        switch (f->type) {
        case GUEST_MSG_STARTED:
                if (s->started || guest_proto_get_u32(f->data, f->size, &pid) < 0 || pid == 0 ||
                    pid > INT32_MAX)
                        break;
                s->started = true;
                s->res.pid = (pid_t)pid;
                s->done = s->req->detach;
                return 0;
        case GUEST_MSG_STDOUT:
        case GUEST_MSG_STDERR:
                if (!s->started)
                        break;
                on_output(a, p, s, f);
                return 0;
        case GUEST_MSG_EXIT:
                /* A signal number no kernel has: the client would turn it into an exit status
                 * (128 + N) that overflows. */
                if (!s->started || guest_proto_get_exit(f->data, f->size, &x) < 0 ||
                    ((x.flags & GUEST_EXIT_SIGNALED) && (x.signal < 1 || x.signal > 64)))
                        break;
                s->res.signaled = x.flags & GUEST_EXIT_SIGNALED;
                s->res.signal = s->res.signaled ? x.signal : 0;
                s->res.exit_code = x.exit_code;
                s->res.timed_out = x.flags & GUEST_EXIT_TIMED_OUT;
                s->res.output_capped |= !!(x.flags & GUEST_EXIT_OUTPUT_CAPPED);
                s->done = true;
                return 0;
        case GUEST_MSG_ERROR:
                if (guest_proto_get_error(f->data, f->size, &e) < 0)
                        break;
                vmm_agent_guest_text(e.message, msg, sizeof(msg));
                r = fk_error_set(err, -e.error, "exec %s: %s", s->req->argv[0], msg);
                guest_msg_error_done(&e);
                return r;
        default:
                return 0; /* a type this host does not know: ignore (newer guest) */
        }
        vmm_agent_fail_connection(a, p->generation);
        return fail(err, -EPROTO);
}

/* Deadline for the next frame: the guest must answer EXEC promptly; then the command's own
 * timeout (plus slack for the kill and the last frames) bounds the wait, or nothing does. */
static uint64_t next_deadline(const struct exec_state *s)
{
        uint64_t now = fk_now_mono_ns();

        if (!s->started)
                return now + (uint64_t)AGENT_REPLY_TIMEOUT_MS * 1000000;
        if (s->req->timeout_ms)
                return now + ((uint64_t)s->req->timeout_ms + AGENT_REPLY_TIMEOUT_MS) * 1000000;
        return 0;
}

int vmm_agent_exec(struct vmm_agent *a, const struct vmm_exec_request *req,
                   vmm_exec_output_fn out_fn, void *userdata, struct vmm_exec_result *ret,
                   struct fk_error *err)
{
        struct exec_state s = {.req = req, .out_fn = out_fn, .userdata = userdata};
        struct agent_pending *p;
        int r;

        if (!req || !req->argv || !req->argv[0] || !req->argv[0][0])
                return fk_error_set(err, -EINVAL, "exec: empty argv");
        for (size_t i = 0; req->env && req->env[i]; i++)
                if (!strchr(req->env[i], '=') || req->env[i][0] == '=')
                        return fk_error_set(err, -EINVAL, "exec: env entry \"%s\" is not K=V",
                                            req->env[i]);
        s.cap = req->output_cap ? req->output_cap : HOST_DEFAULT_OUTPUT_CAP;
        p = vmm_agent_pending_begin(a, AGENT_CONNECT_WAIT_MS, &r);
        if (!p)
                return fail(err, r);
        r = send_request(a, p, req);
        if (r < 0) {
                vmm_agent_pending_end(a, p);
                return fail(err, r);
        }
        while (!s.done && !s.cb_error) {
                uint64_t deadline = next_deadline(&s);
                struct agent_frame *f = vmm_agent_pending_next(a, p, deadline, &r);

                if (!f) {
                        r = fail(err, r);
                        break;
                }
                r = on_frame(a, p, &s, f, err);
                free(f);
                if (r < 0)
                        break;
        }
        vmm_agent_pending_end(a, p);
        if (s.cb_error)
                return fk_error_set(err, s.cb_error, "exec: output callback failed: %s",
                                    strerror(-s.cb_error));
        if (r < 0)
                return r;
        *ret = s.res;
        return 0;
}

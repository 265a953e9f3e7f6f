/* SPDX-License-Identifier: MIT */
/* Guest agent requests from the host: wait for ready, exec with streamed output, power off,
 * files, identity and freeze. Every reply payload is decoded defensively; one that breaks the
 * protocol fails the call with -EPROTO and drops the channel. */
#include "vmm/agent-client/agent-client.h"
#include "vmm/agent-client/agent-client-internal.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/util.h"

#define PING_INTERVAL_MS 500

static uint64_t after_ms(unsigned ms)
{
        return fk_now_mono_ns() + (uint64_t)ms * 1000000;
}

static int call_error(struct fk_error *err, int r, const char *what)
{
        switch (r) {
        case -ETIMEDOUT:
                return fk_error_set(err, r, "%s: guest agent did not answer in time", what);
        case -ENOTCONN:
                return fk_error_set(err, r, "%s: guest agent channel is not connected", what);
        case -ECONNRESET:
                return fk_error_set(err, r, "%s: guest agent connection lost", what);
        case -EPROTO:
                return fk_error_set(err, r, "%s: guest agent broke the protocol; channel dropped",
                                    what);
        default:
                return fk_error_set(err, r, "%s: %s", what, strerror(-r));
        }
}

/* A reply payload did not decode: the guest is misbehaving. */
static int protocol_violation(struct vmm_agent *a, struct agent_pending *p, struct fk_error *err,
                              const char *what)
{
        vmm_agent_fail_connection(a, p->generation);
        return call_error(err, -EPROTO, what);
}

static int guest_error(struct vmm_agent *a, struct agent_pending *p, const struct agent_frame *f,
                       struct fk_error *err, const char *what)
{
        struct guest_msg_error e;
        int r;

        char msg[AGENT_GUEST_TEXT_MAX];

        if (guest_proto_get_error(f->data, f->size, &e) < 0)
                return protocol_violation(a, p, err, what);
        vmm_agent_guest_text(e.message, msg, sizeof(msg));
        r = fk_error_set(err, -e.error, "%s: guest: %s", what, msg);
        guest_msg_error_done(&e);
        return r;
}

/* Waits until deadline_ns for p's next reply frame; an ERROR frame is the guest's error. Returns
 * the frame (caller frees) in *ret. */
static int reply(struct vmm_agent *a, struct agent_pending *p, uint64_t deadline_ns,
                 struct agent_frame **ret, struct fk_error *err, const char *what)
{
        struct agent_frame *f;
        int r = 0;

        f = vmm_agent_pending_next(a, p, deadline_ns, &r);
        if (!f)
                return call_error(err, r, what);
        if (f->type == GUEST_MSG_ERROR) {
                r = guest_error(a, p, f, err, what);
                free(f);
                return r;
        }
        *ret = f;
        return 0;
}

/* Sends the frame(s) in b (already encoded with p->id) and waits for one reply frame that is
 * not an ERROR. Returns the frame (caller frees) in *ret. */
static int request(struct vmm_agent *a, struct agent_pending *p, struct guest_buf *b,
                   unsigned timeout_ms, struct agent_frame **ret, struct fk_error *err,
                   const char *what)
{
        int r = vmm_agent_send(a, p, b);

        guest_buf_free(b);
        if (r < 0)
                return call_error(err, r, what);
        return reply(a, p, after_ms(timeout_ms), ret, err, what);
}

/* ---- ready ------------------------------------------------------------------------------- */

static bool hello_seen(struct vmm_agent *a)
{
        bool h;

        pthread_mutex_lock(&a->lock);
        h = a->hello;
        pthread_mutex_unlock(&a->lock);
        return h;
}

int vmm_agent_wait_ready(struct vmm_agent *a, unsigned timeout_ms, struct fk_error *err)
{
        uint64_t deadline = after_ms(timeout_ms);

        /* HELLO comes when the guest opens its port; PING covers a HELLO we missed. */
        while (!hello_seen(a)) {
                uint64_t now = fk_now_mono_ns(), until;
                struct guest_buf b = {0};
                struct agent_pending *p;
                struct agent_frame *f;
                int r;

                if (now >= deadline)
                        return fk_error_set(err, -ETIMEDOUT, "guest agent not ready after %u ms",
                                            timeout_ms);
                until = FK_MIN(deadline, now + (uint64_t)PING_INTERVAL_MS * 1000000);
                p = vmm_agent_pending_begin(a, (unsigned)((until - now) / 1000000), &r);
                if (!p)
                        continue;
                if (guest_proto_put_raw(&b, GUEST_MSG_PING, p->id, "ready?", 6) == 0 &&
                    vmm_agent_send(a, p, &b) == 0) {
                        f = vmm_agent_pending_next(a, p, until, &r);
                        if (f && f->type == GUEST_MSG_PONG) {
                                free(f);
                                guest_buf_free(&b);
                                vmm_agent_pending_end(a, p);
                                return 0;
                        }
                        free(f);
                }
                guest_buf_free(&b);
                vmm_agent_pending_end(a, p);
                /* A failed send or a drop returns at once: do not spin. */
                if (fk_now_mono_ns() < until)
                        usleep(50 * 1000);
        }
        return 0;
}

int vmm_agent_guest_version(struct vmm_agent *a, char *buf, size_t size)
{
        int r = -ENOTCONN;

        pthread_mutex_lock(&a->lock);
        if (a->hello && size > 0) {
                snprintf(buf, size, "%s", a->info.agent_version);
                r = 0;
        }
        pthread_mutex_unlock(&a->lock);
        return r;
}

/* One request of type with a raw payload whose only good answer is a frame of type want. */
static int raw_call(struct vmm_agent *a, uint16_t type, const void *data, size_t size,
                    uint16_t want, unsigned timeout_ms, const char *what, struct fk_error *err)
{
        struct guest_buf b = {0};
        struct agent_frame *f = NULL;
        struct agent_pending *p;
        int r;

        p = vmm_agent_pending_begin(a, FK_MIN(timeout_ms, AGENT_CONNECT_WAIT_MS), &r);
        if (!p)
                return call_error(err, r, what);
        r = guest_proto_put_raw(&b, type, p->id, data, size);
        if (r == 0)
                r = request(a, p, &b, timeout_ms, &f, err, what);
        else
                r = call_error(err, r, what);
        if (r == 0 && f->type != want)
                r = protocol_violation(a, p, err, what);
        free(f);
        vmm_agent_pending_end(a, p);
        return r;
}

int vmm_agent_ping(struct vmm_agent *a, unsigned timeout_ms, struct fk_error *err)
{
        return raw_call(a, GUEST_MSG_PING, "alive?", 6, GUEST_MSG_PONG, timeout_ms, "ping", err);
}

/* ---- power --------------------------------------------------------------------------------- */

int vmm_agent_poweroff(struct vmm_agent *a, unsigned timeout_ms, struct fk_error *err)
{
        return raw_call(a, GUEST_MSG_POWEROFF, NULL, 0, GUEST_MSG_OK, timeout_ms, "poweroff", err);
}

/* ---- identity, freeze ---------------------------------------------------------------------- */

/* Runs a request whose only good answer is OK. b holds the encoded frame (id p->id). */
static int ok_call(struct vmm_agent *a, struct agent_pending *p, struct guest_buf *b,
                   unsigned timeout_ms, struct fk_error *err, const char *what)
{
        struct agent_frame *f = NULL;
        int r = request(a, p, b, timeout_ms, &f, err, what);

        if (r == 0 && f->type != GUEST_MSG_OK)
                r = protocol_violation(a, p, err, what);
        free(f);
        return r;
}

int vmm_agent_set_identity(struct vmm_agent *a, const char *fork_id, const char *hostname,
                           const void *entropy, size_t entropy_size, unsigned timeout_ms,
                           struct fk_error *err)
{
        struct guest_msg_identity m = {.fork_id = (char *)(fork_id ? fork_id : ""),
                                       .hostname = (char *)(hostname ? hostname : ""),
                                       .entropy = entropy,
                                       .entropy_size = entropy_size};
        struct guest_buf b = {0};
        struct agent_pending *p;
        int r;

        p = vmm_agent_pending_begin(a, FK_MIN(timeout_ms, AGENT_CONNECT_WAIT_MS), &r);
        if (!p)
                return call_error(err, r, "set identity");
        r = guest_proto_put_identity(&b, p->id, &m);
        r = r < 0 ? call_error(err, r, "set identity")
                  : ok_call(a, p, &b, timeout_ms, err, "set identity");
        vmm_agent_pending_end(a, p);
        return r;
}

int vmm_agent_add_entropy(struct vmm_agent *a, const void *entropy, size_t entropy_size,
                          unsigned timeout_ms, struct fk_error *err)
{
        struct guest_buf b = {0};
        struct agent_pending *p;
        int r;

        p = vmm_agent_pending_begin(a, FK_MIN(timeout_ms, AGENT_CONNECT_WAIT_MS), &r);
        if (!p)
                return call_error(err, r, "add entropy");
        r = guest_proto_put_raw(&b, GUEST_MSG_ADD_ENTROPY, p->id, entropy, entropy_size);
        r = r < 0 ? call_error(err, r, "add entropy")
                  : ok_call(a, p, &b, timeout_ms, err, "add entropy");
        vmm_agent_pending_end(a, p);
        return r;
}

int vmm_agent_set_time(struct vmm_agent *a, uint64_t realtime_ns, unsigned timeout_ms,
                       struct fk_error *err)
{
        struct guest_buf b = {0};
        struct agent_pending *p;
        int r;

        p = vmm_agent_pending_begin(a, FK_MIN(timeout_ms, AGENT_CONNECT_WAIT_MS), &r);
        if (!p)
                return call_error(err, r, "set time");
        r = guest_proto_put_u64(&b, GUEST_MSG_SET_TIME, p->id, realtime_ns);
        r = r < 0 ? call_error(err, r, "set time") : ok_call(a, p, &b, timeout_ms, err, "set time");
        vmm_agent_pending_end(a, p);
        return r;
}

int vmm_agent_fsfreeze(struct vmm_agent *a, const char *path, bool freeze, unsigned timeout_ms,
                       struct fk_error *err)
{
        const char *what = freeze ? "fsfreeze" : "fsthaw";
        struct guest_buf b = {0};
        struct agent_pending *p;
        int r;

        p = vmm_agent_pending_begin(a, FK_MIN(timeout_ms, AGENT_CONNECT_WAIT_MS), &r);
        if (!p)
                return call_error(err, r, what);
        r = guest_proto_put_path(&b, freeze ? GUEST_MSG_FSFREEZE : GUEST_MSG_FSTHAW, p->id, path);
        r = r < 0 ? call_error(err, r, what) : ok_call(a, p, &b, timeout_ms, err, what);
        vmm_agent_pending_end(a, p);
        return r;
}

/* ---- files ----------------------------------------------------------------------------------- */

/* The write of data's chunk at off (the first truncates the file). */
static struct guest_msg_file_write file_chunk(const char *path, const void *data, size_t size,
                                              unsigned mode, size_t off)
{
        return (struct guest_msg_file_write){.path = (char *)path,
                                             .mode = mode,
                                             .flags = off == 0 ? GUEST_FILE_TRUNCATE : 0,
                                             .offset = off,
                                             .data = (const uint8_t *)data + off,
                                             .size = FK_MIN(size - off, (size_t)GUEST_PROTO_CHUNK)};
}

int vmm_agent_write_file(struct vmm_agent *a, const char *path, const void *data, size_t size,
                         unsigned mode, unsigned timeout_ms, struct fk_error *err)
{
        size_t off = 0;
        int r = 0;

        /* One request per chunk: each is acknowledged, so a failure stops at once. */
        do {
                struct guest_msg_file_write m = file_chunk(path, data, size, mode, off);
                struct guest_buf b = {0};
                struct agent_pending *p =
                        vmm_agent_pending_begin(a, FK_MIN(timeout_ms, AGENT_CONNECT_WAIT_MS), &r);

                if (!p)
                        return call_error(err, r, "write file");
                r = guest_proto_put_file_write(&b, p->id, &m);
                r = r < 0 ? call_error(err, r, "write file")
                          : ok_call(a, p, &b, timeout_ms, err, "write file");
                vmm_agent_pending_end(a, p);
                off += m.size;
        } while (r == 0 && off < size);
        return r;
}

/* Reads one chunk at off into *out; returns 1 at end of file. */
static int read_chunk(struct vmm_agent *a, const char *path, uint64_t off, struct guest_buf *out,
                      unsigned timeout_ms, struct fk_error *err)
{
        struct guest_msg_file_read m = {
                .path = (char *)path, .offset = off, .max = GUEST_PROTO_CHUNK};
        struct guest_msg_file_data d;
        struct agent_frame *f = NULL;
        struct guest_buf b = {0};
        struct agent_pending *p;
        int r;

        p = vmm_agent_pending_begin(a, FK_MIN(timeout_ms, AGENT_CONNECT_WAIT_MS), &r);
        if (!p)
                return call_error(err, r, "read file");
        r = guest_proto_put_file_read(&b, p->id, &m);
        r = r < 0 ? call_error(err, r, "read file")
                  : request(a, p, &b, timeout_ms, &f, err, "read file");
        if (r == 0) {
                if (f->type != GUEST_MSG_FILE_DATA ||
                    guest_proto_get_file_data(f->data, f->size, &d) < 0 ||
                    d.size > GUEST_PROTO_CHUNK)
                        r = protocol_violation(a, p, err, "read file");
                else if (guest_buf_append(out, d.data, d.size) < 0)
                        r = fk_error_set(err, -ENOMEM, "read file: out of memory");
                else
                        r = (d.flags & GUEST_FILE_EOF) || d.size == 0 ? 1 : 0;
        }
        free(f);
        vmm_agent_pending_end(a, p);
        return r;
}

int vmm_agent_read_file(struct vmm_agent *a, const char *path, size_t max, void **ret,
                        size_t *ret_size, unsigned timeout_ms, struct fk_error *err)
{
        struct guest_buf out = {0};
        int r;

        do {
                r = read_chunk(a, path, out.size, &out, timeout_ms, err);
                if (r >= 0 && out.size > max)
                        r = fk_error_set(err, -EFBIG, "read file %s: larger than %zu bytes", path,
                                         max);
        } while (r == 0);
        if (r < 0) {
                guest_buf_free(&out);
                return r;
        }
        if (guest_buf_append(&out, "", 1) < 0) { /* NUL-terminate for text callers */
                guest_buf_free(&out);
                return fk_error_set(err, -ENOMEM, "read file: out of memory");
        }
        *ret = out.data;
        if (ret_size)
                *ret_size = out.size - 1;
        return 0;
}

/* ---- a pipeline of requests ---------------------------------------------------------------- */

struct pipe_item {
        struct agent_pending *p;
        const char *what;
        bool best_effort; /* the clock: its failure goes to clock_err */
};

struct vmm_agent_pipe {
        struct vmm_agent *a;
        struct guest_buf b; /* every request's frame, in order */
        struct pipe_item *items;
        size_t n, alloc;
        int r; /* the first failure to encode or register, its message in err */
        struct fk_error err;
};

struct vmm_agent_pipe *vmm_agent_pipe_new(struct vmm_agent *a)
{
        struct vmm_agent_pipe *pp = calloc(1, sizeof(*pp));

        if (pp)
                pp->a = a;
        return pp;
}

/* Registers one more request; NULL (the failure kept) when it cannot be. */
static struct agent_pending *pipe_add(struct vmm_agent_pipe *pp, const char *what, bool best_effort)
{
        struct agent_pending *p;
        int r = 0;

        if (!pp || pp->r < 0)
                return NULL;
        if (pp->n == pp->alloc) {
                size_t alloc = pp->alloc ? 2 * pp->alloc : 8;
                struct pipe_item *v = realloc(pp->items, alloc * sizeof(*v));

                if (!v) {
                        pp->r = call_error(&pp->err, -ENOMEM, what);
                        return NULL;
                }
                pp->items = v;
                pp->alloc = alloc;
        }
        p = vmm_agent_pending_begin(pp->a, AGENT_CONNECT_WAIT_MS, &r);
        if (!p) {
                pp->r = call_error(&pp->err, r, what);
                return NULL;
        }
        pp->items[pp->n++] = (struct pipe_item){p, what, best_effort};
        return p;
}

static void pipe_encoded(struct vmm_agent_pipe *pp, int r, const char *what)
{
        if (r < 0 && pp->r == 0)
                pp->r = call_error(&pp->err, r, what);
}

void vmm_agent_pipe_write_file(struct vmm_agent_pipe *pp, const char *path, const void *data,
                               size_t size, unsigned mode)
{
        size_t off = 0;

        do {
                struct guest_msg_file_write m = file_chunk(path, data, size, mode, off);
                struct agent_pending *p = pipe_add(pp, "write file", false);

                if (!p)
                        return;
                pipe_encoded(pp, guest_proto_put_file_write(&pp->b, p->id, &m), "write file");
                off += m.size;
        } while (off < size);
}

void vmm_agent_pipe_set_identity(struct vmm_agent_pipe *pp, const char *fork_id,
                                 const void *entropy, size_t entropy_size)
{
        struct guest_msg_identity m = {.fork_id = (char *)(fork_id ? fork_id : ""),
                                       .hostname = (char *)"",
                                       .entropy = entropy,
                                       .entropy_size = entropy_size};
        struct agent_pending *p = pipe_add(pp, "set identity", false);

        if (p)
                pipe_encoded(pp, guest_proto_put_identity(&pp->b, p->id, &m), "set identity");
}

void vmm_agent_pipe_set_time(struct vmm_agent_pipe *pp, uint64_t realtime_ns)
{
        struct agent_pending *p = pipe_add(pp, "set time", true);

        if (p)
                pipe_encoded(pp,
                             guest_proto_put_u64(&pp->b, GUEST_MSG_SET_TIME, p->id, realtime_ns),
                             "set time");
}

/* The answer to one request of the pipeline: 0 for OK. */
static int pipe_answer(struct vmm_agent *a, const struct pipe_item *it, uint64_t deadline,
                       struct fk_error *err)
{
        struct agent_frame *f = NULL;
        int r = reply(a, it->p, deadline, &f, err, it->what);

        if (r == 0 && f->type != GUEST_MSG_OK)
                r = protocol_violation(a, it->p, err, it->what);
        free(f);
        return r;
}

int vmm_agent_pipe_run(struct vmm_agent_pipe *pp, unsigned timeout_ms, struct fk_error *err,
                       struct fk_error *clock_err)
{
        uint64_t deadline = after_ms(timeout_ms);
        int r;

        if (!pp)
                return fk_error_set(err, -ENOMEM, "guest agent requests: out of memory");
        r = pp->r;
        if (r < 0)
                *err = pp->err;
        else if (pp->n > 0 && (r = vmm_agent_send(pp->a, pp->items[0].p, &pp->b)) < 0)
                r = call_error(err, r, pp->items[0].what);
        /* the answers in order, up to the first failure of a request that must succeed: the
         * rest are not awaited (their late answers are dropped with their ids) */
        for (size_t i = 0; r >= 0 && i < pp->n; i++) {
                struct fk_error e = {0};
                int k = pipe_answer(pp->a, &pp->items[i], deadline, &e);

                if (k < 0 && pp->items[i].best_effort) {
                        if (clock_err)
                                *clock_err = e;
                } else if (k < 0) {
                        *err = e;
                        r = k;
                }
        }
        for (size_t i = 0; i < pp->n; i++)
                vmm_agent_pending_end(pp->a, pp->items[i].p);
        guest_buf_free(&pp->b);
        free(pp->items);
        free(pp);
        return r;
}

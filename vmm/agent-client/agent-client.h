/* SPDX-License-Identifier: MIT */
/* fk_vmm_agent: the host side of the guest agent channel (a virtio-serial port QEMU exposes as
 * a unix socket): connection and reader thread, exec with streamed output, files, identity
 * after a restore, clock, filesystem freeze, power-off. The protocol is vmm/guest/protocol.h. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

struct vmm_agent;

/* Connects to the agent chardev socket (retrying until timeout_ms). A background reader thread
 * demultiplexes frames; all calls below are thread-safe and may run concurrently. If the
 * channel closes, the client reconnects on the next call. */
int vmm_agent_connect(const char *socket_path, unsigned timeout_ms, struct vmm_agent **ret,
                      struct fk_error *err);
struct vmm_agent *vmm_agent_free(struct vmm_agent *a);
/* Waits until the guest agent has said hello / answers ping. */
int vmm_agent_wait_ready(struct vmm_agent *a, unsigned timeout_ms, struct fk_error *err);

struct vmm_exec_request {
        char *const *argv;      /* borrowed, argv[0] looked up in the guest PATH */
        char *const *env;       /* borrowed "K=V" strv or NULL (added to the agent's default env) */
        const char *cwd;        /* NULL: / */
        const char *user;       /* NULL: root; else USER[:GROUP] or UID[:GID] in the guest */
        const void *stdin_data; /* borrowed; NULL/0: stdin is /dev/null */
        size_t stdin_size;
        unsigned timeout_ms; /* 0: none; on expiry the process group is killed */
        size_t output_cap;   /* bytes of stdout+stderr before the rest is dropped; 0: default */
        bool detach;         /* start in background (setsid), return its pid at once */
};

/* Output callback: stream 1 = stdout, 2 = stderr. Called from the caller's thread. */
typedef int (*vmm_exec_output_fn)(int stream, const void *data, size_t size, void *userdata);

struct vmm_exec_result {
        pid_t pid;     /* guest pid */
        int exit_code; /* valid when !signaled */
        int signal;    /* killing signal when signaled */
        bool signaled;
        bool timed_out;
        bool output_capped; /* output hit output_cap and was cut */
};

/* Runs a command in the guest and waits for it (unless detach). Output is passed to out_fn as
 * it arrives. -ETIMEDOUT if the agent does not answer; guest-side failures to start (ENOENT for
 * a missing binary, ...) return that -errno with err filled. */
int vmm_agent_exec(struct vmm_agent *a, const struct vmm_exec_request *req,
                   vmm_exec_output_fn out_fn, void *userdata, struct vmm_exec_result *ret,
                   struct fk_error *err);
/* Liveness: one PING answered by a PONG within timeout_ms (-ETIMEDOUT, -ENOTCONN while the
 * channel is down, -ECONNRESET when it dropped). */
int vmm_agent_ping(struct vmm_agent *a, unsigned timeout_ms, struct fk_error *err);
/* Asks the guest to power off cleanly (sync, then poweroff). Returns once the agent acked. */
int vmm_agent_poweroff(struct vmm_agent *a, unsigned timeout_ms, struct fk_error *err);

/* Guest agent calls beyond exec: files, identity after a fork, filesystem freeze, clock. Same
 * rules as above: thread-safe, -errno returns, err filled on failure, no logging. */
/* Copies the agent version the guest announced on this connection (escaped, see
 * vmm_agent_guest_text) into buf (NUL-terminated, cut to size). -ENOTCONN before its HELLO. A copy:
 * the guest may send another HELLO at any time. */
int vmm_agent_guest_version(struct vmm_agent *a, char *buf, size_t size);

/* Writes data to path in the guest (created with mode, truncated first), in chunks. */
int vmm_agent_write_file(struct vmm_agent *a, const char *path, const void *data, size_t size,
                         unsigned mode, unsigned timeout_ms, struct fk_error *err);
/* Reads the guest file path into a heap buffer (caller frees *ret); -EFBIG past max bytes. */
int vmm_agent_read_file(struct vmm_agent *a, const char *path, size_t max, void **ret,
                        size_t *ret_size, unsigned timeout_ms, struct fk_error *err);

/* After a fork or rollback: gives the guest its fork id (written to /run/forklet/identity,
 * which /run/forklet/fork-id also names), a hostname (NULL/"": keep) and fresh entropy
 * (credited, then the CRNG is reseeded). */
int vmm_agent_set_identity(struct vmm_agent *a, const char *fork_id, const char *hostname,
                           const void *entropy, size_t entropy_size, unsigned timeout_ms,
                           struct fk_error *err);

/* After a cold boot: credits entropy (1..GUEST_ENTROPY_MAX bytes) to the guest's pool and
 * reseeds its CRNG, so the CRNG is ready before a checkpoint copies it to forks. Agents older
 * than the message answer -ENOSYS. */
int vmm_agent_add_entropy(struct vmm_agent *a, const void *entropy, size_t entropy_size,
                          unsigned timeout_ms, struct fk_error *err);

/* Sets the guest's CLOCK_REALTIME to realtime_ns (after a resume or a restore: the guest clock
 * does not advance while QEMU is stopped). Agents older than the message answer -ENOSYS. */
int vmm_agent_set_time(struct vmm_agent *a, uint64_t realtime_ns, unsigned timeout_ms,
                       struct fk_error *err);

/* A pipeline: requests sent together and answered in order (the guest agent handles frames one
 * after the other), so a restore's setup is one round trip into the guest instead of one per
 * request; each wake of a restored guest's vCPU waits for a CPU when many forks start at once.
 * Every request's only good answer is OK. Adding never fails: the first failure to encode or
 * register is kept and returned by vmm_agent_pipe_run. */
struct vmm_agent_pipe;
struct vmm_agent_pipe *vmm_agent_pipe_new(struct vmm_agent *a);
/* As vmm_agent_write_file: one request per chunk. */
void vmm_agent_pipe_write_file(struct vmm_agent_pipe *pp, const char *path, const void *data,
                               size_t size, unsigned mode);
/* As vmm_agent_set_identity. */
void vmm_agent_pipe_set_identity(struct vmm_agent_pipe *pp, const char *fork_id,
                                 const void *entropy, size_t entropy_size);
/* As vmm_agent_set_time, best effort: its failure goes to run's *clock_err, not its result. */
void vmm_agent_pipe_set_time(struct vmm_agent_pipe *pp, uint64_t realtime_ns);
/* Sends every request at once and waits for each answer in turn, timeout_ms in all; frees pp
 * (NULL: -ENOMEM). Returns the first failure of a request other than the clock's, with its
 * message in err; clock_err (may be NULL) gets the clock's. */
int vmm_agent_pipe_run(struct vmm_agent_pipe *pp, unsigned timeout_ms, struct fk_error *err,
                       struct fk_error *clock_err);

/* FIFREEZE / FITHAW the filesystem mounted at path (e.g. "/workspace"). Idempotent. */
int vmm_agent_fsfreeze(struct vmm_agent *a, const char *path, bool freeze, unsigned timeout_ms,
                       struct fk_error *err);

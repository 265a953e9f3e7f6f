/* SPDX-License-Identifier: MIT */
/* The pure core that forkletd, forklet and forklet-scheduler share: session phases and the
 * action table, the reconcile planner, capacity and admission arithmetic, and the audit log's
 * hash chain (the cluster's key layout and node status document: core/cluster/cluster.h). No clock,
 * no logging, no I/O but reading a stream the caller opened (core_audit_verify): every other
 * function here is a function of its arguments. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/error.h"

typedef struct json_t json_t; /* jansson */
struct node_config;
struct size_class;

/* ---- phases and actions (core/plan.c)
 * ------------------------------------------------------------------------------ */

enum session_phase {
        SESSION_PHASE_PENDING,
        SESSION_PHASE_STARTING,
        SESSION_PHASE_RUNNING,
        SESSION_PHASE_PAUSED,
        SESSION_PHASE_STOPPED,
        SESSION_PHASE_FAILED,
        _SESSION_PHASE_MAX,
        _SESSION_PHASE_INVALID = -1,
};
const char *session_phase_to_string(enum session_phase p);
/* Case-sensitive ("Running"); returns _SESSION_PHASE_INVALID for unknown text. */
enum session_phase session_phase_from_string(const char *s);

/* ---- API limits both ends hold to ---------------------------------------------------------- */

/* Largest request body forkletd's API reads. */
#define CORE_API_MAX_BODY (8u * 1024 * 1024)
/* Largest guest file the files route moves either way. */
#define CORE_API_MAX_FILE (64u * 1024 * 1024)

/* ---- planner (core/plan.c)
 * ------------------------------------------------------------------------ */

/* What a request asked of a session and still waits for (agent/daemon/intent.c keeps the records;
 * the planner sees the oldest pending one). */
enum core_intent_kind {
        CORE_INTENT_NONE,
        CORE_INTENT_CHECKPOINT, /* POST .../checkpoints */
        CORE_INTENT_ROLLBACK,   /* POST .../rollback */
        CORE_INTENT_SNAPSHOT,   /* POST .../snapshots */
        CORE_INTENT_FORK,       /* POST .../forks */
        _CORE_INTENT_MAX,
};
const char *core_intent_to_string(enum core_intent_kind k);

/* How long a request waits for a busy session before it is refused (-EBUSY). */
#define CORE_INTENT_BUSY_WAIT_NS (30ull * 1000000000ull)

/* What is left to do on a VM after its cold boot, in this order. */
enum core_post_start {
        CORE_POST_START_NONE,        /* nothing: done, or a restored or adopted VM */
        CORE_POST_START_AFTER_START, /* lifecycle.afterStart has not run */
        CORE_POST_START_CHECKPOINTS, /* spec.checkpoints not attempted on this VM */
        CORE_POST_START_FAILED,      /* afterStart failed: declared checkpoints and forks wait */
};

/* What the manifests and the requests ask for, one entry per session (index-aligned with
 * core_observed). */
struct core_desired {
        bool present;        /* false: the manifest was deleted */
        int state;           /* enum session_state */
        uint64_t generation; /* metadata.generation */
        bool restart_on_failure;
        enum core_intent_kind intent; /* the oldest request waiting to run, NONE: none */
        uint64_t intent_since_ns;     /* monotonic: when it was recorded */
        bool has_forks;               /* spec.forks */
        unsigned forks_count;         /* spec.forks.count */
};

/* What is true on the node for the same session. */
struct core_observed {
        enum session_phase phase;
        bool busy;                    /* an action is in flight: plan nothing for its VM */
        bool has_vm;                  /* a QEMU process is attached */
        uint64_t observed_generation; /* generation last acted upon */
        uint64_t retry_at_ns;         /* Failed + restart: earliest next boot (monotonic) */
        bool unhealthy;               /* the guest died (panic, OOM, no answer): end the VM */
        bool io_stopped;              /* QEMU stopped the VM on a disk write error */
        bool io_resume_due;           /* ... and it may continue now (space is back) */
        bool class_changed;           /* spec.sizeClass differs from the class applied to the VM */
        bool has_net;                 /* a session network exists (its egress follows the spec) */
        enum core_post_start post_start;
        unsigned forks;        /* forks spec.forks made that are still wanted by name */
        unsigned forks_beyond; /* forks spec.forks made whose index is >= forks_count */
        bool forks_source;     /* the checkpoint spec.forks.from names exists */
};

enum core_action_kind {
        CORE_ACTION_OBSERVE, /* record observedGeneration = generation */
        CORE_ACTION_BOOT,
        CORE_ACTION_STOP, /* graceful stop, keep state (spec.state: Stopped) */
        CORE_ACTION_PAUSE,
        CORE_ACTION_RESUME,
        CORE_ACTION_DESTROY,     /* stop, remove run/state files, forget the session */
        CORE_ACTION_FAIL,        /* end the VM of a dead guest without asking it; phase Failed */
        CORE_ACTION_RESIZE,      /* apply a changed size class to the running VM's cgroup */
        CORE_ACTION_EGRESS,      /* apply spec.egress to the session's nftables table */
        CORE_ACTION_REJECT,      /* the oldest intent cannot run: it ends with action.error */
        CORE_ACTION_CHECKPOINT,  /* the requested checkpoint (intent) */
        CORE_ACTION_ROLLBACK,    /* stop the VM, boot it from its own checkpoint (intent) */
        CORE_ACTION_SNAPSHOT,    /* filesystem snapshot of the workspace disk (intent) */
        CORE_ACTION_FORK,        /* POST forks: new fork sessions (intent) */
        CORE_ACTION_AFTER_START, /* run lifecycle.afterStart in the new VM */
        CORE_ACTION_DECLARED_CHECKPOINTS, /* take the spec.checkpoints not taken yet */
        CORE_ACTION_FORK_SCALE,           /* make the missing spec.forks */
        CORE_ACTION_FORK_TRIM,            /* delete spec.forks beyond the count */
        CORE_ACTION_FORKS_WAIT,           /* spec.forks cannot grow yet: say why */
        _CORE_ACTION_MAX,
};
const char *core_action_to_string(enum core_action_kind k);
/* Whether k serves an intent (REJECT, CHECKPOINT, ROLLBACK, SNAPSHOT, FORK). */
bool core_action_serves_intent(enum core_action_kind k);

struct core_action {
        size_t index; /* into the desired/observed arrays */
        enum core_action_kind kind;
        int error; /* CORE_ACTION_REJECT: the intent's -errno */
};

struct core_plan {
        struct core_action *actions; /* owned array of n */
        size_t n;
};

/* Computes the actions that move observed towards desired for n sessions. Pure: no I/O, no
 * clock (now_mono_ns is passed in). Actions for one session come in execution order.
 * Returns 0 or -ENOMEM; *ret is written only on success (free with core_plan_done). */
int core_plan(const struct core_desired *desired, const struct core_observed *observed, size_t n,
              uint64_t now_mono_ns, struct core_plan *ret);
void core_plan_done(struct core_plan *p);

/* ---- node capacity and admission (core/capacity.c)
 * ------------------------------------------------------ */

enum core_resource {
        CORE_RESOURCE_MEMORY,
        CORE_RESOURCE_CPU,
        CORE_RESOURCE_SESSIONS,
        _CORE_RESOURCE_MAX,
};
/* "InsufficientMemory", "InsufficientCPU", "InsufficientSessions" (static). */
const char *core_resource_reason(enum core_resource r);

/* What the node has and what the config holds back from sessions. */
struct core_node_resources {
        uint64_t host_memory_bytes; /* MemTotal */
        unsigned host_cpus;         /* CPUs forkletd may run on */
        uint64_t reserve_memory_bytes;
        unsigned cpu_overcommit_percent; /* 100: one vCPU per host CPU */
        unsigned max_sessions;           /* session slots; 0: unlimited */
};

/* What one session holds while it is admitted (Starting, Running, Paused). */
struct core_charge {
        unsigned vcpus;
        uint64_t memory_bytes;
};

/* Per-session inputs of core_charge_for. */
struct core_charge_input {
        unsigned vcpus;
        unsigned memory_mib;        /* guest RAM */
        unsigned qemu_overhead_mib; /* measured QEMU overhead beyond guest RAM */
        bool fork;                  /* RAM copy-on-write on a checkpoint */
        unsigned fork_memory_percent;
        uint64_t pss_bytes; /* fork: measured PSS of its QEMU, 0 when not known yet */
};

/* A session is charged what its cgroup may use: guest RAM + QEMU overhead (memory.max). A
 * fork shares its RAM with the checkpoint until it writes, so it is charged
 * overhead + fork_memory_percent of RAM, or its measured PSS when that is larger. */
struct core_charge core_charge_for(const struct core_charge_input *in);
/* The charge of one session of class sc on a node configured by cfg (qemuOverheadMiB,
 * forkMemoryPercent): what admission charges and what the node publishes to the control plane
 * (pss_bytes as in core_charge_input). Pure. */
struct core_charge core_class_charge(const struct node_config *cfg, const struct size_class *sc,
                                     bool fork, uint64_t pss_bytes);

struct core_capacity {
        struct core_charge allocatable, used;
        unsigned allocatable_sessions, used_sessions; /* allocatable 0: unlimited */
};

/* Allocatable = host - reserve (memory; never below 0), host CPUs * overcommit (vCPUs),
 * max_sessions (slots); used = the sum of held[0..n). Pure. */
void core_capacity_compute(const struct core_node_resources *node, const struct core_charge *held,
                           size_t n, struct core_capacity *ret);
/* 0 when want fits next to what is used; -ENOSPC and *ret_short (the first resource that is
 * short, in the order sessions, memory, CPU) otherwise. Pure. */
int core_capacity_admit(const struct core_capacity *c, const struct core_charge *want,
                        enum core_resource *ret_short);
/* How many more sessions charged one each fit (UINT_MAX when nothing bounds it). Pure. */
unsigned core_capacity_fits(const struct core_capacity *c, const struct core_charge *one);

/* ---- the audit log's hash chain (core/audit-chain.c) ------------------------------------------
 * Each line of the audit log is a JSON object whose "prev" is the SHA-256 (hex) of the whole
 * previous line (64 zeros for the first) and whose last field "hash" is the SHA-256 of the line
 * up to that field: {"time":..., "prev":"<hex>","hash":"<hex>"}. */

#define CORE_AUDIT_HEX_SIZE 65 /* SHA-256 in hex + NUL */

/* Checks the chain of the log read from f (opened by the caller; read to its end, not closed).
 * 0 when intact, with *ret_lines; -EBADMSG with *ret_bad_line (1-based) and err "line N: why"
 * (torn, not an audit record, prev or hash wrong); -EIO when f cannot be read; -ENOMEM. The one
 * function here that reads (a stream it is handed); it opens nothing and does not log. */
int core_audit_verify(FILE *f, size_t *ret_lines, size_t *ret_bad_line, struct fk_error *err);
/* The line to append after prev for body (a JSON object text without its closing brace, its
 * last field "prev"): body + ,"hash":"<hex>"} + newline; *ret is a heap string and ret_head
 * (optional) gets the new chain head. 0 or -ENOMEM. Pure. */
int core_audit_seal(const char *body, char **ret, char ret_head[CORE_AUDIT_HEX_SIZE]);

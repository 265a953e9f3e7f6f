/* SPDX-License-Identifier: MIT */
/* Inside fk_agent only: memory back to the host (give-back.c), when a session's VM lets the
 * balloon take its guest's free memory back out of its RAM file. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct agent_daemon;
struct agent_session;

/* What decides whether a session's VM gives memory back now (pure, table-tested). */
struct agent_give_back_in {
        bool enabled;     /* memoryGiveBack.enabled */
        bool idle;        /* Running with a VM, no job, no request pending, boot work done */
        bool private_ram; /* a fork or rolled-back session: its RAM file is a checkpoint's */
        bool off;         /* its VM cannot (no balloon device) */
        bool due;         /* a live checkpoint of it was written */
        uint64_t now_ns, next_check_ns, interval_ns; /* interval 0: no periodic checks */
        uint64_t ram_file_bytes;  /* its RAM file's allocated bytes (read when a check is due) */
        uint64_t threshold_bytes; /* the least worth giving back */
};
enum agent_give_back_why {
        AGENT_GIVE_BACK_NONE,
        AGENT_GIVE_BACK_CHECKPOINT, /* after a live checkpoint's Writing phase */
        AGENT_GIVE_BACK_CHECK,      /* periodic: gives back when the guest's stats say it pays */
};
enum agent_give_back_why agent_give_back_decide(const struct agent_give_back_in *in);
const char *agent_give_back_why_to_string(enum agent_give_back_why w);
/* Under the lock, after each reconcile pass: starts a give-back job (the session busy) for
 * every session that is due. Logs. */
void agent_give_back_tick(struct agent_daemon *d);
/* Under the lock: a live checkpoint of s was written (its save read every RAM page). */
void agent_give_back_after_checkpoint(struct agent_daemon *d, struct agent_session *s);

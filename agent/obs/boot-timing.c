/* SPDX-License-Identifier: MIT */
/* The fork timing breakdown's names and renderings (the event text and status.bootTiming). */
#include "agent/obs/obs.h"

#include <jansson.h>
#include <stdio.h>

static const char *const step_names[_AGENT_BOOT_STEP_MAX] = {
        [AGENT_BOOT_STEP_QUEUE] = "queue",       [AGENT_BOOT_STEP_LOCK] = "lock",
        [AGENT_BOOT_STEP_LINKS] = "links",       [AGENT_BOOT_STEP_DISK] = "disk",
        [AGENT_BOOT_STEP_NETNS] = "netns",       [AGENT_BOOT_STEP_CGROUP] = "cgroup",
        [AGENT_BOOT_STEP_JAIL] = "jail",         [AGENT_BOOT_STEP_SPAWN] = "spawn",
        [AGENT_BOOT_STEP_PRE_EXEC] = "preExec",  [AGENT_BOOT_STEP_QEMU] = "qemu",
        [AGENT_BOOT_STEP_RESTORE] = "restore",   [AGENT_BOOT_STEP_AGENT] = "agent",
        [AGENT_BOOT_STEP_IDENTITY] = "identity", [AGENT_BOOT_STEP_DIRTY_LOG] = "dirtyLog",
        [AGENT_BOOT_STEP_FINISH] = "finish",     [AGENT_BOOT_STEP_TOTAL] = "total",
};

const char *agent_boot_step_to_string(enum agent_boot_step s)
{
        return (unsigned)s < _AGENT_BOOT_STEP_MAX ? step_names[s] : NULL;
}

void agent_boot_timing_format(const struct agent_boot_timing *t, char *buf, size_t size)
{
        size_t off = 0;

        if (size == 0)
                return;
        buf[0] = '\0';
        for (unsigned i = 0; i < _AGENT_BOOT_STEP_MAX && off < size; i++) {
                uint64_t ms = (t->ns[i] + 500000) / 1000000;
                int n;

                if (t->ns[i] == 0)
                        continue;
                n = snprintf(buf + off, size - off, "%s%s %llu ms", off ? ", " : "", step_names[i],
                             (unsigned long long)(ms ? ms : 1));
                if (n < 0)
                        return;
                off += (size_t)n;
        }
        if (t->retries && off < size)
                snprintf(buf + off, size - off, "%s%u %s", off ? ", " : "", t->retries,
                         t->retries == 1 ? "retry" : "retries");
}

json_t *agent_boot_timing_json(const struct agent_boot_timing *t)
{
        json_t *o = json_object();
        char key[32];

        for (unsigned i = 0; o && i < _AGENT_BOOT_STEP_MAX; i++) {
                if (t->ns[i] == 0)
                        continue;
                snprintf(key, sizeof(key), "%sMs", step_names[i]);
                if (json_object_set_new(o, key, json_real((double)(t->ns[i] / 100000) / 10.0)) <
                    0) {
                        json_decref(o);
                        return NULL;
                }
        }
        if (o && t->retries && json_object_set_new(o, "retries", json_integer(t->retries)) < 0) {
                json_decref(o);
                return NULL;
        }
        return o;
}

/* SPDX-License-Identifier: MIT */
/* What the serial console says about the guest's health: a pure scanner fed the bytes the
 * console thread copies, keeping the last lines (printable only) and counting kernel panics and
 * the OOM killer's kills. */
#include "vmm/console/console.h"

#include <stdio.h>
#include <string.h>

#define PANIC_MARK "Kernel panic - not syncing"

enum vmm_console_line vmm_console_classify(const char *line)
{
        if (strstr(line, PANIC_MARK))
                return VMM_CONSOLE_LINE_PANIC;
        /* "Out of memory: Killed process N (comm) ..." and the memory cgroup's own variant. */
        if (strstr(line, "ut of memory: Killed process"))
                return VMM_CONSOLE_LINE_OOM_KILL;
        if (strstr(line, "APIC frequency too slow, disabling apic timer"))
                return VMM_CONSOLE_LINE_NO_TIMER;
        return VMM_CONSOLE_LINE_PLAIN;
}

/* "... Kernel panic - not syncing: why" -> "Kernel panic - not syncing: why"; an OOM kill line
 * loses its memory figures after the process name. */
static void summarize(char *dst, const char *line, enum vmm_console_line kind)
{
        const char *start = line, *end;

        if (kind == VMM_CONSOLE_LINE_PANIC)
                start = strstr(line, PANIC_MARK);
        else if (kind == VMM_CONSOLE_LINE_OOM_KILL)
                start = strstr(line, "ut of memory: Killed process") - 1;
        end = kind == VMM_CONSOLE_LINE_OOM_KILL ? strstr(start, " total-vm") : NULL;
        if (!end)
                end = start + strlen(start);
        snprintf(dst, VMM_CONSOLE_LINE_MAX, "%.*s", (int)(end - start), start);
}

static void end_line(struct vmm_console_scan *s)
{
        struct vmm_console_report *r = &s->report;
        enum vmm_console_line kind;

        s->line[s->len] = '\0';
        /* A bare carriage return (progress output) or an empty line is not worth a slot. */
        if (s->len == 0)
                return;
        kind = vmm_console_classify(s->line);
        if (kind == VMM_CONSOLE_LINE_PANIC && r->panics++ == 0)
                summarize(r->panic, s->line, kind);
        if (kind == VMM_CONSOLE_LINE_NO_TIMER)
                r->timer_lost++;
        if (kind == VMM_CONSOLE_LINE_OOM_KILL) {
                r->oom_kills++;
                summarize(r->oom, s->line, kind);
        }
        memcpy(s->ring[s->next], s->line, s->len + 1);
        s->next = (s->next + 1) % VMM_CONSOLE_TAIL_LINES;
        if (s->n < VMM_CONSOLE_TAIL_LINES)
                s->n++;
        s->len = 0;
}

void vmm_console_scan_feed(struct vmm_console_scan *s, const void *data, size_t size)
{
        const unsigned char *p = data;

        for (size_t i = 0; i < size; i++) {
                unsigned char c = p[i];

                if (c == '\n') {
                        end_line(s);
                        continue;
                }
                if (c == '\r')
                        continue;
                /* The guest is untrusted: whatever reaches status and logs is plain text. */
                if (c == '\t')
                        c = ' ';
                else if (c < 0x20 || c >= 0x7f)
                        c = '?';
                if (s->len < VMM_CONSOLE_LINE_MAX - 1)
                        s->line[s->len++] = (char)c;
        }
}

void vmm_console_scan_report(const struct vmm_console_scan *scan, struct vmm_console_report *ret)
{
        struct vmm_console_scan copy = *scan, *s = &copy;
        unsigned first;

        /* A guest that died mid-line (QEMU gone) still said it: count the partial line. */
        end_line(s);
        first = (s->next + VMM_CONSOLE_TAIL_LINES - s->n) % VMM_CONSOLE_TAIL_LINES;
        *ret = s->report;
        ret->n_tail = s->n;
        for (unsigned i = 0; i < s->n; i++)
                memcpy(ret->tail[i], s->ring[(first + i) % VMM_CONSOLE_TAIL_LINES],
                       VMM_CONSOLE_LINE_MAX);
}

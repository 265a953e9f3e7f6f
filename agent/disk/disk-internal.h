/* SPDX-License-Identifier: MIT */
/* Inside agent/disk only: what disk.c and disk-overlay.c share. */
#pragma once

struct fk_error;

#define QCOW2_MAGIC "QFI\xfb"

/* Runs argv (PATH lookup) with stdout/stderr captured; err gets the last output line. */
int agent_disk_run_tool(char *const *argv, struct fk_error *err);

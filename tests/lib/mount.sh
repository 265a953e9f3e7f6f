#!/bin/bash
# SPDX-License-Identifier: MIT
# Part of the test harness (sourced by harness.sh; functions only; bench/cluster.sh too): a
# node's runDir on a tmpfs, as a stock systemd host has it (/run), and the removal of every mount
# a test left under its temp dir (its own tmpfs, forkletd's guest RAM tmpfs on <runDir>/sessions).

# fk_run_tmpfs DIR: makes DIR and mounts a tmpfs on it unless one is there (8G: a tmpfs holds
# only what is written: sparse guest RAM files, sockets, logs)
fk_run_tmpfs() {
        mkdir -p "$1" || return 1
        mountpoint -q "$1" || mount -t tmpfs -o mode=0755,size=8G fk-test-run "$1"
}

# fk_unmount_under DIR: every mount at or below DIR, deepest first; a busy one is retried for
# 5 s, then detached (lazy) so nothing of it outlives the test. Call it after the test's
# forkletd and QEMUs are gone, before removing DIR.
fk_unmount_under() {
        local m p
        for _ in $(seq 20); do
                m=$(awk -v d="$1" '$5 == d || index($5, d "/") == 1 {print $5}' \
                        /proc/self/mountinfo | sort -r)
                [ -n "$m" ] || return 0
                for p in $m; do umount "$p" 2>/dev/null; done
                sleep 0.25
        done
        for p in $m; do
                echo "WARNING: $p still busy, detaching it" >&2
                umount -l "$p"
        done
}

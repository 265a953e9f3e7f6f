#!/bin/bash
# SPDX-License-Identifier: MIT
# Part of the test harness (sourced by harness.sh; functions only): skip (exit 77) and fail,
# prerequisites, TAP-like ok/bad/expect counters (FAILS, set to 0 by fk_setup or fk_checks_init),
# a bounded poll and a free port.

skip() { echo "SKIP: $*" >&2; exit 77; }
# fail MSG: exits 1; the tail of forkletd's log when the test has one (a test with other logs
# defines its own fail after sourcing)
fail() {
        echo "FAIL: $*" >&2
        [ -f "${T:-/nonexistent}/forkletd.log" ] &&
                { echo "--- forkletd.log (tail)" >&2; tail -n 40 "$T/forkletd.log" >&2; }
        exit 1
}

fk_require_root() { [ "$(id -u)" = 0 ] || skip "needs root"; }
# fk_require_cmds CMD...: each is on PATH, else skip naming it
fk_require_cmds() {
        local c
        for c in "$@"; do command -v "$c" >/dev/null 2>&1 || skip "$c not installed"; done
}

fk_checks_init() { FAILS=0; }
ok() { echo "ok - $*"; }
bad() {
        echo "not ok - $*"
        FAILS=$((${FAILS:-0} + 1))
}
expect() { # expect DESCRIPTION PATTERN TEXT
        if printf '%s' "$3" | grep -q -- "$2"; then ok "$1"; else
                bad "$1 (got: $(printf '%s' "$3" | tr '\n' ' ' | cut -c1-300))"
        fi
}
expect_not() { # expect_not DESCRIPTION PATTERN TEXT
        if printf '%s' "$3" | grep -q -- "$2"; then
                bad "$1 (got: $(printf '%s' "$3" | tr '\n' ' ' | cut -c1-300))"
        else ok "$1"; fi
}

# fk_wait SECONDS CMD...: runs CMD every 0.2 s until it succeeds; after SECONDS, CMD's last status
fk_wait() {
        local end=$((SECONDS + $1))
        shift
        while [ $SECONDS -lt $end ]; do
                "$@" && return 0
                sleep 0.2
        done
        "$@"
}

# fk_free_port: a loopback TCP port nothing listens on (cl_free_port)
fk_free_port() { cl_free_port; }

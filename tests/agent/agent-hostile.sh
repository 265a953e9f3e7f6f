#!/bin/bash
# SPDX-License-Identifier: MIT
# A compromised guest against forkletd on real QEMU (TCG): the guest replays raw frames onto its
# agent port through /run/forklet/inject (guest paths and format strings in every string field,
# NULs, 1 MiB strings, bad and oversized lengths, bad magic/version, unknown types, frames for
# foreign ids, a 32 MiB flood) while strace records forkletd's file, connect and bind syscalls.
# Passes when no traced path carries the guest's strings or lies outside the node's dirs and the
# system trees, the only connects are the hostile session's agent reconnects, the canary dir the
# frames name is untouched, guest text reaches forkletd's log, status and exec client only
# escaped, its memory stays bounded, and both the hostile session (the channel drops and
# reconnects) and a bystander session keep serving exec.
# Usage: agent-hostile.sh FORKLETD FORKLET HOSTILE_FRAMES   (root; 77 when QEMU/image/strace miss)
FORKLETD=${1:?forkletd path}
FORKLET=${2:?forklet path}
FRAMES=${3:?hostile-frames path}
FK_TAG=hostile
. "$(dirname "$0")/../lib/harness.sh"
fk_setup
command -v strace >/dev/null || skip "strace not installed"

CANARY=/tmp/fk-hostile-canary-$$
MARK=hostile-$$-$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')
SPID=
# (fk_cleanup stops forkletd first: one stuck on an exec in flight is killed after 10 s)
fk_cleanup_extra() {
        [ -n "$SPID" ] && kill "$SPID" 2>/dev/null && wait "$SPID" 2>/dev/null
        rm -rf "$CANARY"
}

canary_state() { (cd "$CANARY" && find . -printf '%p %s %T@ %C@ %m %u\n' | sort &&
        find . -type f -exec sha256sum {} + | sort); }
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$DPID/status"; }

# replay NAME [TIMES]: the guest's agent writes /tmp/NAME.bin raw onto its port TIMES times.
# The exec carrying it may fail (the channel drops under it, or a forged ERROR ends it): only a
# hang is wrong (a frame left unfinished is given up after 30 s, and the channel reconnects).
replay() {
        local n=${2:-1} rc=0
        timeout 150 "$FORKLET" exec hostile -- sh -c \
                "for i in \$(seq $n); do echo /tmp/$1.bin; done >/run/forklet/inject; sleep 2" \
                >"$T/replay-$1.out" 2>"$T/replay-$1.err" || rc=$?
        [ $rc = 124 ] && fail "replay $1: forklet exec hung"
        echo "replayed $1 x$n (exec rc $rc: $(head -c 200 "$T/replay-$1.err" | tr '\n' ' '))"
        kill -0 "$DPID" 2>/dev/null || fail "forkletd died on $1"
}

# recovered NAME: the hostile session's agent channel serves exec again within 60 s
recovered() {
        local i
        for i in $(seq 60); do
                [ "$("$FORKLET" exec hostile -- echo "back-$1" 2>/dev/null)" = "back-$1" ] && return 0
                sleep 1
        done
        fail "hostile session's agent channel did not recover after $1"
}

mkdir -p "$CANARY/sub" "$T/frames"
echo "do not touch" >"$CANARY/keep"
echo "nor this" >"$CANARY/sub/keep"
before=$(canary_state)
[ -n "$before" ] || fail "canary state empty"
"$FRAMES" "$T/frames" "$CANARY" "$MARK" || fail "hostile-frames"

# Liveness (agent-health's subject) must not end the hostile VM here: a frame left unfinished
# blocks the channel, and its pings, for 30 s, and on a loaded host the default four misses in
# a row come quickly; then the channel could never recover.
fk_node_config "health: {failureThreshold: 20}" >"$T/node.yaml"
start_daemon
session hostile
session bystander
for s in hostile bystander; do
        "$FORKLET" wait "$s" --for=Running --timeout=300 || fail "$s not Running"
done
gsh hostile 'test -p /run/forklet/inject && stat -c %a:%u /run/forklet/inject' | grep -qx 600:0 ||
        fail "guest has no root-only /run/forklet/inject FIFO"
cases="text long nul unknown-types truncated len-huge len-past-max bad-version bad-magic flood"
for c in $cases; do
        "$FORKLET" cp "$T/frames/$c.bin" "hostile:/tmp/$c.bin" || fail "cp $c.bin into the guest"
done

# ---- replay under strace ------------------------------------------------------------------
strace -f -qq -tt -s 4096 -e trace=%file,connect,bind -o "$T/strace.log" -p "$DPID" &
SPID=$!
for _ in $(seq 50); do [ -s "$T/strace.log" ] && break; sleep 0.1; done
"$FORKLET" get sessions >/dev/null # some traced file activity to prove the trace works
rss0=$(rss_kib)
for c in $cases; do
        if [ "$c" = flood ]; then replay flood 32; else replay "$c"; fi
        recovered "$c"
        [ "$("$FORKLET" exec bystander -- echo alive)" = alive ] || fail "bystander exec after $c"
done
rss1=$(rss_kib)
# a session still Running and ready: its own guest broke only its own requests
"$FORKLET" describe hostile >"$T/describe.txt" || fail "describe hostile"
[ "$(field hostile phase)" = Running ] || fail "hostile session is $(field hostile phase)"
"$FORKLET" wait bystander --for=Running --timeout=10 || fail "bystander not Running"
kill "$SPID" && wait "$SPID" 2>/dev/null
SPID=

# ---- what forkletd touched ----------------------------------------------------------------
lines=$(wc -l <"$T/strace.log")
[ "$lines" -gt 0 ] || fail "strace recorded nothing (tracing broken?)"
if grep -F -e "$MARK" -e "$CANARY" -e "FAKE-LOG" "$T/strace.log" >"$T/bad.txt"; then
        fail "forkletd used a guest-chosen path: $(head -n 5 "$T/bad.txt")"
fi
# the channel recovered by reconnecting, to the hostile session's own socket and nowhere else
grep 'connect(' "$T/strace.log" | grep -o 'sun_path="[^"]*"' | sort -u >"$T/connects.txt"
grep -q "default.hostile/agent.sock" "$T/connects.txt" || fail "no agent reconnect was traced"
grep -v -x "sun_path=\"$T/run/sessions/default.hostile/agent.sock\"" "$T/connects.txt" &&
        fail "forkletd connected elsewhere"
# every path in a traced syscall: the node's dirs, system trees, or forkletd's own binaries
grep -o '"/[^"]*"' "$T/strace.log" | tr -d '"' | sort -u >"$T/paths.txt"
grep -v -E "^($T/|/proc/|/sys/|/dev/|/run/netns|/var/run/netns|/etc/|/usr/|/lib|/bin/|/sbin/)" \
        "$T/paths.txt" >"$T/outside.txt"
[ -s "$T/outside.txt" ] && fail "forkletd touched paths outside its dirs: $(head -n 5 "$T/outside.txt")"
# writes (create, write, remove, rename, mode/owner changes) only under the node's dirs, the
# cgroup tree and /proc (e.g. oom_score_adj)
grep -E 'O_WRONLY|O_RDWR|O_CREAT|O_TRUNC|mkdir|unlink|rmdir|rename|link\(|chmod|chown|truncate' \
        "$T/strace.log" | grep -o '"/[^"]*"' | tr -d '"' | sort -u >"$T/written.txt"
grep -v -E "^($T/|/sys/fs/cgroup/|/proc/|/dev/null$)" "$T/written.txt" >"$T/written-outside.txt"
[ -s "$T/written-outside.txt" ] &&
        fail "forkletd wrote outside its dirs: $(head -n 5 "$T/written-outside.txt")"
[ "$(canary_state)" = "$before" ] || fail "canary dir changed: $(canary_state)"
find / -xdev -maxdepth 4 -name "*$MARK*" 2>/dev/null | grep . && fail "a file named after the guest"

# ---- what forkletd said ------------------------------------------------------------------
grep -q $'\x1b' "$T/forkletd.log" && fail "a raw escape from the guest reached forkletd's log"
grep -q '^FAKE-LOG-LINE' "$T/forkletd.log" && fail "the guest forged a line in forkletd's log"
grep -q "FAKE-LOG-LINE $MARK" "$T/forkletd.log" ||
        fail "the guest's HELLO text never reached the (debug) log: was it replayed?"
for c in $cases; do
        grep -q $'[\x1b\r]' "$T/replay-$c.err" && fail "raw guest control bytes reached the exec client ($c)"
done
# the ERROR forged for the exec in flight reaches its client as a clean, escaped error (raw, its
# invalid UTF-8 made the API drop the result line: "the stream ended without an exit status")
grep -qF "\\x0d\\x0aFAKE-LOG-LINE $MARK" "$T/replay-text.err" ||
        fail "the forged ERROR did not reach the exec client escaped: $(cat "$T/replay-text.err")"
"$FORKLET" get session hostile -o json >>"$T/describe.txt" || fail "get session hostile"
grep -q -e $'\x1b' -e "$MARK" "$T/describe.txt" && fail "guest text in the hostile session's status"
# the serial console is the guest's too: `forklet logs` on a terminal shows its escapes as \xNN
# (piped, it stays byte-exact for scripts)
"$FORKLET" exec hostile -- sh -c "printf '\\033]0;pwned-$MARK\\007\\n' >/dev/console" ||
        fail "write an escape to the console"
for _ in $(seq 40); do "$FORKLET" logs hostile | grep -q "pwned-$MARK" && break; sleep 0.25; done
"$FORKLET" logs hostile | grep -q $'\x1b]0;pwned-'"$MARK" || fail "piped logs are not byte-exact"
script -qec "$FORKLET logs hostile" /dev/null >"$T/logs-tty.txt" </dev/null || fail "logs on a pty"
grep -q $'\x1b]0;pwned' "$T/logs-tty.txt" && fail "a guest escape reached the terminal raw"
grep -qF "\x1b]0;pwned-$MARK\x07" "$T/logs-tty.txt" ||
        fail "logs on a terminal: escape not shown as \\xNN: $(tail -c 300 "$T/logs-tty.txt")"
# bounded: the flood (32 MiB for ids nobody asked for) and 1 MiB strings cost no lasting memory
[ $((rss1 - rss0)) -lt 131072 ] || fail "forkletd grew from $rss0 to $rss1 KiB"

echo "agent-hostile: OK ($lines file syscalls traced, $(wc -l <"$T/paths.txt") paths, rss $rss0 -> $rss1 KiB)"

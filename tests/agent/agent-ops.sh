#!/bin/bash
# SPDX-License-Identifier: MIT
# forkletd operations against real QEMU: promtool on a live /metrics scrape, the bearer-token
# TCP listener (short token refused at start, wrong/missing token 401), Idempotency-Key replay,
# re-apply never boots a second VM, kill -9 of forkletd during a boot then restart (no duplicate
# QEMU, no journal or orphan files, session Running or Failed with a reason), 50 concurrent
# clients doing get/exec (no error; fd count and RSS of forkletd flat), hostile requests, stop
# and delete twice, and `forklet audit verify` passing, then failing on an edited line.
# Usage: agent-ops.sh FORKLETD FORKLET   (root; 77 when the image, QEMU, curl or promtool is
# missing). FORKLET_LOAD_SECONDS sets the load phase (default 30: the shared 2-core CI host
# runs TCG guests; 60 on an idle machine).
FORKLETD=${1:?forkletd path}
FORKLET=${2:?forklet path}
FK_TAG=ops
. "$(dirname "$0")/../lib/harness.sh"
fk_setup
LOAD_S=${FORKLET_LOAD_SECONDS:-30}
CLIENTS=50
PORT=$(fk_free_port) || fail "no free loopback port"
SOCK=$T/run/api.sock

command -v curl >/dev/null || skip "curl not installed"
command -v promtool >/dev/null || skip "promtool not installed (Debian package prometheus)"

# PIDs of the QEMU processes whose command line names our run dir (only ours: unique $T).
our_qemus() {
        local p
        for p in /proc/[0-9]*; do
                grep -qs "$T/run/sessions/$1" "$p/cmdline" && tr '\0' ' ' <"$p/cmdline" |
                        grep -q '^[^ ]*qemu' && echo "${p#/proc/}"
        done
}

node_config() { # TOKENFILE
        FK_API="{socket: $T/run/api.sock, listen: \"127.0.0.1:$PORT\", tokenFile: $1}" fk_node_config
}

# ---- a short token is refused at start ---------------------------------------------------------
printf 'only-31-bytes-of-token-material' >"$T/short.token"
chmod 600 "$T/short.token"
node_config "$T/short.token" >"$T/short.yaml"
"$FORKLETD" --config "$T/short.yaml" >"$T/short.log" 2>&1
[ $? = 1 ] || fail "forkletd started with a 31-byte token"
grep -q "31 bytes" "$T/short.log" || fail "short token: no reason given: $(cat "$T/short.log")"

head -c 48 /dev/urandom | base64 -w0 >"$T/token"
chmod 600 "$T/token"
TOKEN=$(cat "$T/token")
node_config "$T/token" >"$T/node.yaml"

code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }

start_daemon

# ---- TCP listener and token ---------------------------------------------------------------------
[ "$(code "http://127.0.0.1:$PORT/healthz")" = 401 ] || fail "TCP without a token not 401"
[ "$(code -H "Authorization: Bearer ${TOKEN}x" "http://127.0.0.1:$PORT/healthz")" = 401 ] ||
        fail "TCP with a wrong token not 401"
[ "$(code -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$PORT/healthz")" = 200 ] ||
        fail "TCP with the token not 200"
[ "$(code -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$PORT/version")" = 200 ] ||
        fail "/version"
[ "$(code -X DELETE -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$PORT/api/v1alpha1/namespaces/default/sessions/nosuch")" = 404 ] ||
        fail "TCP DELETE of a missing session not 404"

# ---- boot, re-apply and Idempotency-Key never start a second VM ----------------------------------
"$FORKLET" apply -f "$SRC/examples/hello.yaml" >/dev/null || fail "apply hello"
"$FORKLET" wait hello --for=Running --timeout=240 || fail "hello not Running"
pid=$(field hello pid)
[ "$("$FORKLET" apply -f "$SRC/examples/hello.yaml")" = "session/hello unchanged" ] || fail "re-apply"
idem() {
        curl -s -D "$T/h.$1" -o "$T/b.$1" -w '%{http_code}' --unix-socket "$SOCK" -X POST \
                -H "Idempotency-Key: ops-$$" -H "Content-Type: application/json" \
                --data-binary @"$T/idem.json" http://x/api/v1alpha1/sessions
}
sed 's/"name": *"hello"/"name": "idem"/' <<<'{"apiVersion":"forklet.dev/v1alpha1","kind":"Session","metadata":{"name":"idem"},"spec":{"sizeClass":"small","image":"minimal","state":"Stopped"}}' >"$T/idem.json"
[ "$(idem 1)" = 201 ] || fail "idempotent POST #1"
[ "$(idem 2)" = 201 ] || fail "idempotent POST #2 did not replay 201"
grep -qi "^Idempotency-Replayed: true" "$T/h.2" || fail "no Idempotency-Replayed header"
cmp -s "$T/b.1" "$T/b.2" || fail "replayed body differs"

# ---- stop twice, delete twice ----------------------------------------------------------------------
"$FORKLET" wait idem --for=Stopped --timeout=30 || fail "idem not Stopped"
"$FORKLET" delete idem | grep -qx "session/idem deleted" || fail "delete #1"
"$FORKLET" wait idem --for=Deleted --timeout=30 || fail "idem not deleted"
out=$("$FORKLET" delete idem) || fail "delete #2 failed"
[ "$out" = "session/idem already gone" ] || fail "delete #2 printed '$out'"

# ---- promtool on a live scrape -------------------------------------------------------------------
curl -s --unix-socket "$SOCK" http://x/metrics >"$T/metrics.txt" || fail "scrape"
promtool check metrics <"$T/metrics.txt" || fail "promtool check metrics: $(promtool check metrics <"$T/metrics.txt" 2>&1)"
grep -q '^forklet_sessions{phase="Running"} 1$' "$T/metrics.txt" || fail "sessions by phase"
grep -q '^forklet_operation_duration_seconds_count{op="boot"} 1$' "$T/metrics.txt" ||
        fail "boot histogram"

# ---- hostile requests change nothing -------------------------------------------------------------
# Compare what a request could change (names, specs, phases), not live stats such as CPU usage.
state() { "$FORKLET" get sessions -o json | jq -S '[.items[] | {metadata, spec, phase: .status.phase}]' | md5sum; }
before=$(state)
head -c $((9 * 1024 * 1024)) /dev/zero | tr '\0' '{' >"$T/big.json"
[ "$(code --unix-socket "$SOCK" -X POST --data-binary @"$T/big.json" http://x/api/v1alpha1/sessions)" = 413 ] ||
        fail "oversized body not 413"
[ "$(code --unix-socket "$SOCK" -X POST -d '{"kind":' http://x/api/v1alpha1/sessions)" = 400 ] ||
        fail "bad JSON not 400"
[ "$(code --unix-socket "$SOCK" -X POST -d '{"apiVersion":"forklet.dev/v1alpha1","kind":"Session","metadata":{"name":"x"},"spec":{"sizeClass":"small","image":"minimal","nope":1}}' http://x/api/v1alpha1/sessions)" = 422 ] ||
        fail "unknown field not 422"
[ "$(code --unix-socket "$SOCK" -X POST -d '{"apiVersion":"forklet.dev/v1alpha1","kind":"Session","metadata":{"name":"../../etc"},"spec":{"sizeClass":"small","image":"minimal"}}' http://x/api/v1alpha1/sessions)" = 422 ] ||
        fail "name with ../ not 422"
c=$(code --path-as-is --unix-socket "$SOCK" -X DELETE "http://x/api/v1alpha1/namespaces/default/sessions/../../../etc")
[ "${c:0:1}" = 4 ] || fail "path with ../ answered $c"
c=$(code -H "X-Big: $(head -c 40000 /dev/zero | tr '\0' a)" --unix-socket "$SOCK" http://x/api/v1alpha1/sessions)
[ "${c:0:1}" = 4 ] || fail "oversized header answered $c"
[ "$(code -X POST -H "Authorization: Bearer short" -d @"$T/idem.json" "http://127.0.0.1:$PORT/api/v1alpha1/sessions")" = 401 ] ||
        fail "short token not 401"
[ "$(state)" = "$before" ] || fail "a hostile request changed state"
kill -0 "$DPID" || fail "forkletd died under hostile requests"

# ---- kill -9 during a boot, restart ------------------------------------------------------------------
sed 's/name: hello/name: crashme/' "$SRC/examples/hello.yaml" >"$T/crashme.yaml"
"$FORKLET" apply -f "$T/crashme.yaml" >/dev/null || fail "apply crashme"
for _ in $(seq 600); do
        [ -n "$(our_qemus default.crashme)" ] && break
        sleep 0.1
done
[ -n "$(our_qemus default.crashme)" ] || fail "crashme's QEMU never started"
sleep 0.$((RANDOM % 10))
echo "kill -9 forkletd while crashme is $(field crashme phase)"
kill -9 "$DPID"
wait "$DPID" 2>/dev/null
DPID=
kill -0 "$pid" || fail "hello's QEMU died with forkletd"
start_daemon
"$FORKLET" wait crashme --for=Running --timeout=300
ph=$(field crashme phase)
if [ "$ph" = Failed ]; then
        "$FORKLET" describe crashme | grep -q "Reason" || fail "crashme Failed without a reason"
else
        [ "$ph" = Running ] || fail "crashme is $ph after restart"
fi
[ "$(field hello pid)" = "$pid" ] || fail "restart replaced hello's VM"
[ "$(our_qemus default.hello | wc -w)" = 1 ] || fail "hello has $(our_qemus default.hello | wc -w) QEMUs"
n=$(our_qemus default.crashme | wc -w)
[ "$ph" = Running ] && [ "$n" != 1 ] && fail "crashme has $n QEMUs"
[ -z "$(ls -A "$T/state/journal" 2>/dev/null)" ] || fail "journal entries left: $(ls "$T/state/journal")"
[ "$(ls "$T/run/sessions" | sort | tr '\n' ' ')" = "default.crashme default.hello " ] ||
        fail "run dirs: $(ls "$T/run/sessions")"

# ---- 50 concurrent clients: get + exec, no error, no leak -----------------------------------------
fds() { ls "/proc/$DPID/fd" | wc -l; }
rss() { awk '/^VmRSS/ {print $2}' "/proc/$DPID/status"; }
client() { # ID SECONDS
        local end=$((SECONDS + $2)) n=0
        while [ $SECONDS -lt $end ]; do
                "$FORKLET" get session hello -o json >/dev/null || { echo "get $1" >>"$T/errors"; }
                [ "$("$FORKLET" exec hello -- echo "c$1")" = "c$1" ] || echo "exec $1" >>"$T/errors"
                n=$((n + 1))
        done
        echo "$n" >>"$T/rounds"
}
run_clients() { # SECONDS; waits for the clients only (forkletd is a job too)
        local i pids=()
        for i in $(seq $CLIENTS); do
                client "$i" "$1" &
                pids+=($!)
        done
        wait "${pids[@]}"
}
run_clients 3 # warm-up: threads, malloc arenas
rm -f "$T/errors" "$T/rounds"
fd0=$(fds) rss0=$(rss)
run_clients "$LOAD_S"
fd1=$(fds) rss1=$(rss)
rounds=$(awk '{s += $1} END {print s}' "$T/rounds")
echo "load: $CLIENTS clients x ${LOAD_S}s, $rounds get+exec rounds; fds $fd0 -> $fd1, RSS ${rss0} -> ${rss1} KiB"
[ -f "$T/errors" ] && fail "$(wc -l <"$T/errors") client errors, e.g. $(head -n3 "$T/errors" | tr '\n' ' ')"
[ "$rounds" -ge "$CLIENTS" ] || fail "only $rounds rounds"
[ "$fd1" -le $((fd0 + 4)) ] || fail "fd count grew $fd0 -> $fd1"
[ "$rss1" -le $((rss0 + 16384)) ] || fail "RSS grew ${rss0} -> ${rss1} KiB"
curl -s --unix-socket "$SOCK" http://x/metrics | promtool check metrics || fail "promtool after load"

# ---- SIGTERM with an exec still streaming: forkletd stops promptly, the client is told -------
"$FORKLET" exec hello -- sleep 1000 >/dev/null 2>"$T/exec-term.err" &
epid=$!
for _ in $(seq 40); do gsh hello 'ps' | grep -q 'sleep 1000' && break; sleep 0.25; done
gsh hello 'ps' | grep -q 'sleep 1000' || fail "the long exec did not start"
kill "$DPID"
for _ in $(seq 40); do kill -0 "$DPID" 2>/dev/null || break; sleep 0.25; done
kill -0 "$DPID" 2>/dev/null && fail "forkletd still running 10 s after SIGTERM with an exec streaming"
wait "$DPID"
DPID=
for _ in $(seq 40); do kill -0 "$epid" 2>/dev/null || break; sleep 0.25; done
kill -0 "$epid" 2>/dev/null && fail "forklet exec still waiting after forkletd stopped"
wait "$epid" && fail "forklet exec exited 0 when forkletd stopped under it"
grep -q "shutting down" "$T/exec-term.err" || fail "exec client not told: $(cat "$T/exec-term.err")"
start_daemon
"$FORKLET" wait hello --for=Running --timeout=60 || fail "hello not adopted after the SIGTERM"
echo "ok: SIGTERM with an exec streaming: forkletd stopped, the client was told"

# ---- delete everything: no QEMU and no files left ------------------------------------------------
"$FORKLET" delete hello >/dev/null || fail "delete hello"
"$FORKLET" delete crashme >/dev/null || fail "delete crashme"
"$FORKLET" wait hello --for=Deleted --timeout=60 || fail "hello not deleted"
"$FORKLET" wait crashme --for=Deleted --timeout=60 || fail "crashme not deleted"
for _ in $(seq 40); do [ -z "$(our_qemus "")" ] && break; sleep 0.25; done
[ -z "$(our_qemus "")" ] || fail "QEMU left: $(our_qemus "")"
[ -z "$(ls -A "$T/run/sessions")" ] || fail "run files left: $(ls "$T/run/sessions")"
[ -z "$(ls -A "$T/state/sessions")" ] || fail "state files left: $(ls "$T/state/sessions")"

# ---- audit log: verifies, then an edited line is named --------------------------------------------
"$FORKLET" audit verify || fail "audit verify (daemon)"
stop_daemon
"$FORKLET" audit verify --file "$T/state/audit.log" || fail "audit verify --file"
grep -q '"caller":"token:' "$T/state/audit.log" || fail "TCP caller not audited by token id"
grep -q '"caller":"tcp:unauthenticated".*"result":"401"' "$T/state/audit.log" ||
        fail "refused TCP attempts not audited"
grep -q '"action":"transition","result":"Starting->Running' "$T/state/audit.log" ||
        fail "transitions not audited"
sed -i '3s/"caller":"[^"]*"/"caller":"uid:4242"/' "$T/state/audit.log"
out=$("$FORKLET" audit verify --file "$T/state/audit.log")
[ $? = 1 ] || fail "audit verify passed an edited log"
echo "$out" | grep -q "line 3:" || fail "audit verify did not name line 3: $out"
echo "PASS"

#!/bin/bash
# SPDX-License-Identifier: MIT
# spec.secrets through forkletd + CLI on real QEMU (TCG): a file secret and a minted one (the
# node's mintCommand is a script printing a random value per call) reach the guest's tmpfs at
# /run/forklet/secrets/NAME (0400); after a checkpoint and fork 2 the minted secret differs in
# the parent and every fork, the file secret is the same and listed as inherited in each fork's
# ledger (status.identity, forklet describe, metric); a rollback mints anew; no secret value is
# found in console logs, the audit log, forkletd's log or anywhere under stateDir/runDir.
# Usage: fork-secrets.sh FORKLETD FORKLET   (root; exit 77 when the image or QEMU is missing)
FORKLETD=${1:?forkletd path}
FORKLET=${2:?forklet path}
. "$(dirname "$0")/../lib/harness.sh"
fk_setup

FILE_VALUE=file-secret-$$-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
mkdir -p "$T/node-secrets"
printf '%s' "$FILE_VALUE" >"$T/node-secrets/token"
chmod 0600 "$T/node-secrets/token"
# the mint command: a new random value per call; the test keeps a copy of each (outside
# stateDir/runDir) to grep for, with the arguments it got
cat >"$T/mint.sh" <<EOT
#!/bin/sh
v=minted-\$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
echo "\$v \$*" >>"$T/node-secrets/minted.log"
printf '%s' "\$v"
EOT
chmod 0755 "$T/mint.sh"
echo "secrets: {mintCommand: [$T/mint.sh], fileDirs: [$T/node-secrets]}" >>"$T/node.yaml"

secret() { gsh "$1" "cat /run/forklet/secrets/$2"; }
describe_line() { "$FORKLET" describe "$1" | grep "$2"; }

start_daemon
session vault \
        "secrets: [{name: API_TOKEN, file: $T/node-secrets/token}, {name: session-key, mint: true}]" \
        'lifecycle: {afterStart: ["sh", "-c", "cat /run/forklet/secrets/session-key > /tmp/seen-by-afterstart"]}'
"$FORKLET" wait vault --for=Running --timeout=240 || fail "vault not Running"
[ "$(secret vault API_TOKEN)" = "$FILE_VALUE" ] || fail "file secret not delivered"
m0=$(secret vault session-key)
echo "$m0" | grep -Eqx 'minted-[0-9a-f]{32}' || fail "minted secret is '$m0'"
[ "$(gsh vault 'stat -c %a /run/forklet/secrets/API_TOKEN')" = 400 ] || fail "secret mode"
gsh vault 'grep -q "^tmpfs /run " /proc/mounts' || fail "/run is not a tmpfs in the guest"
# delivered before afterStart ran (it saw the value)
for _ in $(seq 60); do
        [ -n "$(gsh vault 'cat /tmp/seen-by-afterstart 2>/dev/null')" ] && break
        sleep 0.5
done
[ "$(gsh vault 'cat /tmp/seen-by-afterstart')" = "$m0" ] || fail "afterStart did not see the secret"
grep -q "^$m0 --session default.vault --parent  --fork-id \$" "$T/node-secrets/minted.log" ||
        fail "mint argv: $(cat "$T/node-secrets/minted.log")"
describe_line vault "Minted secrets (new): session-key" >/dev/null || fail "describe vault"
describe_line vault "Inherited secrets (copied): -" >/dev/null || fail "cold boot inherited"

# ---- checkpoint, fork 2 -------------------------------------------------------------------
ck=$("$FORKLET" checkpoint create vault) || fail "checkpoint create"
names=$("$FORKLET" fork vault --from "$ck" --count 2) || fail "fork"
for f in $names; do
        "$FORKLET" wait "$f" --for=Running --timeout=240 || fail "$f not Running"
done
all="$m0"
for f in $names; do
        [ "$(secret "$f" API_TOKEN)" = "$FILE_VALUE" ] || fail "$f: file secret differs"
        m=$(secret "$f" session-key)
        echo "$m" | grep -Eqx 'minted-[0-9a-f]{32}' || fail "$f: minted secret is '$m'"
        all="$all $m"
        id=$(field "$f" forkId)
        grep -q "^$m --session default.$f --parent default.vault --fork-id $id\$" \
                "$T/node-secrets/minted.log" || fail "$f: mint argv"
        d=$("$FORKLET" describe "$f")
        echo "$d" | grep -q "Inherited secrets (copied): API_TOKEN$" || fail "$f: ledger: $d"
        echo "$d" | grep -q "Minted secrets (new): session-key$" || fail "$f: ledger minted"
        echo "$d" | grep -q "from checkpoint $ck, kernel reseeded yes" || fail "$f: ledger: $d"
        "$FORKLET" get session "$f" -o json | grep -q '"kernelReseeded": true' ||
                fail "$f: status.identity.kernelReseeded"
done
[ "$(secret vault session-key)" = "$m0" ] || fail "the parent's secret changed under it"
[ "$(echo $all | tr ' ' '\n' | sort -u | grep -c .)" = 3 ] ||
        fail "minted secret repeats across parent and forks: $all"
curl -s --unix-socket "$FORKLET_SOCKET" http://x/metrics | grep -q '^forklet_forks_inherited_secrets_total 2$' ||
        fail "metric forklet_forks_inherited_secrets_total != 2"

# ---- rollback mints anew, the file secret is copied ----------------------------------------
"$FORKLET" rollback vault "$ck" | grep -q "rolled back" || fail "rollback"
m1=$(secret vault session-key)
echo "$m1" | grep -Eqx 'minted-[0-9a-f]{32}' || fail "after rollback: '$m1'"
for m in $all; do [ "$m1" != "$m" ] || fail "rollback kept a minted value"; done
all="$all $m1"
[ "$(secret vault API_TOKEN)" = "$FILE_VALUE" ] || fail "rollback: file secret"
describe_line vault "Inherited secrets (copied): API_TOKEN$" >/dev/null || fail "rollback ledger"

# ---- the ledger survives a forkletd restart (the VM is adopted, not booted again) -----------
f0=$(echo $names | cut -d' ' -f1)
qpid=$(field "$f0" pid)
stop_daemon
start_daemon
"$FORKLET" wait "$f0" --for=Running --timeout=60 || fail "$f0 not adopted"
[ "$(field "$f0" pid)" = "$qpid" ] || fail "restart booted $f0 again"
describe_line "$f0" "Inherited secrets (copied): API_TOKEN$" >/dev/null || fail "ledger after restart"
[ "$(secret "$f0" session-key)" = "$(echo $all | cut -d' ' -f2)" ] || fail "$f0 secret changed by adopt"

# ---- no value anywhere forkletd writes ---------------------------------------------------
# Except guest RAM images (checkpoints/*/ram, a VM's mem.ram): a checkpoint is a copy of the
# guest's memory, so it holds what the guest holds (docs/security.md: Secrets and copied identity).
ls "$T"/state/sessions/*/console.log >/dev/null 2>&1 || fail "no console logs to check"
[ -s "$T/state/audit.log" ] || fail "no audit log to check"
for v in "$FILE_VALUE" $all; do
        hits=$(grep -rlaF --exclude=ram --exclude=mem.ram -- "$v" "$T/state" "$T/run" \
                "$T/forkletd.log" 2>/dev/null)
        [ -z "$hits" ] || fail "secret value found in: $hits"
done
echo "fork-secrets: ok (minted: $(echo $all | wc -w) distinct values, file secret inherited)"

#!/bin/bash
# SPDX-License-Identifier: MIT
# A QEMU that is slow to start is waited for, and one that dies at its start is reported at
# once. forkletd runs with a qemu-system-x86_64 first in its PATH that, when a marker file
# exists, sleeps 18 s before it execs the real QEMU (longer than the 15 s forkletd's connects
# wait: a host starting dozens of QEMUs at once gets there), or exits 1 at once. The first
# session must come up Running; the second must fail within a few seconds naming QEMU's exit,
# not after the boot's 120 s. The jail is off: its mount namespace would not show the wrapper.
# Usage: agent-slow-start.sh FORKLETD FORKLET   (root; exit 77 when the image or QEMU is missing)
FORKLETD=${1:?forkletd path}
FORKLET=${2:?forklet path}
FK_TAG=slow
. "$(dirname "$0")/../lib/harness.sh"
fk_setup

QEMU=$(command -v qemu-system-x86_64)
mkdir -p "$T/bin"
mkfifo "$T/never"
# The wait is bash's read on a FIFO nobody writes, not sleep(1): a child of the wrapper would
# outlive it in the session's cgroup when forkletd kills the wrapper (a failing forkletd does).
cat >"$T/bin/qemu-system-x86_64" <<EOF
#!/bin/bash
if [ -e "$T/slow" ]; then rm -f "$T/slow"; read -r -t 18 _ <>"$T/never"; fi
if [ -e "$T/die" ]; then rm -f "$T/die"; echo "wrapper: dying at start" >&2; exit 1; fi
exec "$QEMU" "\$@"
EOF
chmod 755 "$T/bin/qemu-system-x86_64"
FK_JAIL="{uidBase: $FK_UID_BASE, uidCount: 0}"
fk_node_config >"$T/node.yaml"
PATH="$T/bin:$PATH" start_daemon

touch "$T/slow"
t0=$SECONDS
session slow
"$FORKLET" wait slow --for=Running --timeout=240 >/dev/null ||
        fail "slow: $(field slow phase): $("$FORKLET" get session slow -o json | grep -m1 '"message"')"
[ ! -e "$T/slow" ] || fail "the wrapper did not run (is it first in forkletd's PATH?)"
[ $((SECONDS - t0)) -ge 18 ] || fail "slow came up in $((SECONDS - t0)) s: the wrapper did not sleep"
ok "a QEMU that took 18 s to start its sockets booted (Running after $((SECONDS - t0)) s)"
expect "forkletd said the start was slow" "took .* s to create its sockets" "$(cat "$T/forkletd.log")"
[ "$("$FORKLET" exec slow -- echo up)" = up ] && ok "slow answers exec" || bad "slow answers exec"

touch "$T/die"
t0=$SECONDS
session dies
fk_wait 60 sh -c "\"$FORKLET\" get session dies -o json | grep -q '\"phase\": \"Failed\"'" ||
        fail "dies is $(field dies phase) after 60 s"
[ $((SECONDS - t0)) -lt 30 ] && ok "a QEMU that died at its start failed the boot in $((SECONDS - t0)) s" ||
        bad "a QEMU that died at its start failed the boot only after $((SECONDS - t0)) s"
expect "the failure names QEMU's exit" "QEMU exited" "$("$FORKLET" get session dies -o json)"
echo "# $FAILS failure(s)"
[ $FAILS -eq 0 ]

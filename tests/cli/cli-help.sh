#!/bin/bash
# SPDX-License-Identifier: MIT
# forklet VERB --help, -h and forklet help VERB: every verb of `forklet --help` prints its usage
# line and what it does, exit 0, without a daemon; an unknown verb is a usage error; and exec's
# guest command keeps its own --help. No root, no forkletd: the socket does not exist.
set -u
FORKLET=${1:?usage: cli-help.sh FORKLET}
fails=0
bad() { echo "not ok - $*"; fails=$((fails + 1)); }
export FORKLET_SOCKET=/nonexistent/forklet-cli-help.sock

verbs=$("$FORKLET" --help | sed -n 's/^  forklet \([a-z-]*\).*/\1/p')
[ "$(wc -w <<<"$verbs")" -ge 20 ] || bad "forklet --help lists $(wc -w <<<"$verbs") verbs"
for v in $verbs; do
        for how in "$v --help" "$v -h" "help $v" "$v NAME --help"; do
                # shellcheck disable=SC2086 # the words of $how are the arguments
                out=$("$FORKLET" $how 2>&1)
                rc=$?
                [ $rc -eq 0 ] || { bad "forklet $how: exit $rc: $out"; continue; }
                head -n1 <<<"$out" | grep -q "^Usage: forklet \[global options\] $v " ||
                        [ "$(head -n1 <<<"$out")" = "Usage: forklet [global options] $v" ] ||
                        bad "forklet $how: first line '$(head -n1 <<<"$out")'"
                # the usage line, a blank line, then what the verb does
                [ -n "$(sed -n 3p <<<"$out")" ] || bad "forklet $how: no description"
        done
done
echo "ok - $(wc -w <<<"$verbs") verbs: --help, -h, help VERB"

out=$("$FORKLET" help no-such-verb 2>&1)
rc=$?
[ $rc -eq 2 ] && grep -q 'unknown command "no-such-verb"' <<<"$out" ||
        bad "forklet help no-such-verb: exit $rc: $out"
# exec's guest command keeps its arguments: these go to the (missing) daemon, not to help
for how in "exec box ls --help" "exec box -- ls -h" "exec --timeout 5 box ls -h"; do
        # shellcheck disable=SC2086
        out=$("$FORKLET" $how 2>&1)
        rc=$?
        [ $rc -ne 0 ] && ! grep -q "^Usage:" <<<"$out" ||
                bad "forklet $how: printed help or succeeded (exit $rc): $out"
done
echo "ok - unknown verb is a usage error; exec's command keeps its own --help"
[ $fails -eq 0 ] || { echo "# $fails failure(s)"; exit 1; }

#!/bin/sh
# SPDX-License-Identifier: MIT
# The main job on a fresh Debian 12 machine, as root: install dependencies, build, build the
# guest image, start forkletd with its embedded default config (manifests from
# /etc/forklet/sessions, API on /run/forklet/api.sock), apply examples/hello.yaml, wait for it to
# run, exec commands inside the microVM and print the results. forkletd keeps running afterwards
# (its pid is in /run/forklet/forkletd.pid, its log in /var/log/forklet/forkletd.log).
set -eu
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh

# The embedded default config looks for images under /var/lib/forklet/images.
mkdir -p /var/lib/forklet/images /etc/forklet/sessions /var/log/forklet
rm -rf /var/lib/forklet/images/minimal.new
cp -r build/images/minimal /var/lib/forklet/images/minimal.new
rm -rf /var/lib/forklet/images/minimal
mv /var/lib/forklet/images/minimal.new /var/lib/forklet/images/minimal

FORKLET=build/cli/forklet
export FORKLET_SOCKET=/run/forklet/api.sock
if [ -f /run/forklet/forkletd.pid ] && kill -0 "$(cat /run/forklet/forkletd.pid)" 2>/dev/null; then
        echo "forkletd already running (pid $(cat /run/forklet/forkletd.pid))"
else
        mkdir -p /run/forklet
        setsid build/agent/forkletd >>/var/log/forklet/forkletd.log 2>&1 </dev/null &
        echo $! >/run/forklet/forkletd.pid
        echo "started forkletd (pid $!), log /var/log/forklet/forkletd.log"
fi
i=0
until $FORKLET get sessions >/dev/null 2>&1; do
        i=$((i + 1))
        if [ $i -gt 100 ]; then
                echo "forkletd did not come up; see /var/log/forklet/forkletd.log" >&2
                exit 1
        fi
        sleep 0.1
done

$FORKLET validate -f examples/hello.yaml
$FORKLET apply -f examples/hello.yaml
echo "waiting for the microVM to boot (TCG without /dev/kvm takes a few seconds)..."
$FORKLET wait hello --for=Running --timeout=300
$FORKLET get sessions
echo "--- forklet exec hello -- uname -a"
$FORKLET exec hello -- uname -a
echo "--- forklet exec hello -- sh -c 'echo \$GREETING from pid \$\$; cat /proc/meminfo | head -1'"
$FORKLET exec hello -- sh -c 'echo $GREETING from pid $$; head -1 /proc/meminfo'
echo "--- done: try 'FORKLET_SOCKET=$FORKLET_SOCKET $FORKLET exec hello -- ps'"
echo "    stop everything with: $FORKLET delete hello && kill \$(cat /run/forklet/forkletd.pid)"

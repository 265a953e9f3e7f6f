#!/bin/bash
# SPDX-License-Identifier: MIT
# forkletd's TLS listener and cross-host verb routing, no VMs. Everything runs inside a network
# namespace this test creates, with TEST-NET-1 addresses on its loopback link (nothing on the host's
# interfaces): a throwaway CA and server certs (openssl), etcd, node A (TLS on 192.0.2.10) and
# node B (mutual TLS on 192.0.2.11). Checks: HTTPS + token works, a wrong token is 401, plain
# HTTP fails, an untrusted CA or a wrong pin fails, forkletd refuses a non-loopback listen
# without TLS and a group-readable key, the node status publishes api.url/pinnedPublicKey/
# hostID, and `forklet --etcd describe` reaches a session over the node's socket when it is
# reachable and over https when it is not. "Another host" is simulated twice on this machine:
# the CLI in a mount namespace where a tmpfs hides the node's run dir (its API socket), and a
# node status whose api.hostID is not this host's while its socket path does answer here.
# Usage: api-tls.sh FORKLETD FORKLET  (root; 77 without openssl, etcd, jq, curl or unshare)
set -u
FORKLETD=${1:?forkletd}
FORKLET=${2:?forklet}
SRC=${FORKLET_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$SRC/tests/lib/harness.sh"
fk_require_root
fk_require_cmds openssl etcd etcdctl jq curl unshare nsenter ip

if [ "${FK_TLS_INNER:-}" != 1 ]; then
        NS=fktls$$
        ip netns add $NS || exit 1
        FK_TLS_INNER=1 nsenter --net=/run/netns/$NS "$0" "$@"
        rc=$?
        ip netns delete $NS
        exit $rc
fi

# ---- inside the test's network namespace ----------------------------------------------------
T=$(mktemp -d /tmp/fk-tls-$$.XXXX)
P=/fk-tls-$$
A=192.0.2.10 B=192.0.2.11 PORT=7443
PIDS=()
fail() {
        echo "FAIL: $*" >&2
        for f in "$T"/*.log; do
                [ -f "$f" ] && { echo "--- $f (tail)" >&2; tail -n 15 "$f" >&2; }
        done
        exit 1
}
cleanup() {
        for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
        cl_etcd_stop KILL
        for n in a b; do
                [ -f "$T/$n.yaml" ] &&
                        "$FORKLETD" --config "$T/$n.yaml" --remove-networks >/dev/null 2>&1
        done
        # "bad": the refused configs, whose forkletd made its cgroup parent before refusing
        for n in a b bad; do
                rmdir /sys/fs/cgroup/*/forklet-tls$$-$n /sys/fs/cgroup/forklet-tls$$-$n 2>/dev/null
        done
        fk_unmount_under "$T"
        rm -rf "$T"
        return 0
}
trap cleanup EXIT
ip link set lo up && ip addr add $A/32 dev lo && ip addr add $B/32 dev lo || fail "test network"

# ---- certificates: a CA, one server cert per node (IP SAN), a client cert, a rogue CA --------
cd "$T" || exit 1
gen() { openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$2" \
        -keyout "$1.key" "${@:3}" 2>>"$T/openssl.log"; }
sign() {
        printf '%s\n' "$2" >"$1.ext"
        openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 \
                -extfile "$1.ext" -out "$1.pem" 2>>"$T/openssl.log"
}
gen ca fk-test-ca -x509 -days 1 -out ca.pem && gen rogue fk-rogue-ca -x509 -days 1 -out rogue.pem &&
        gen a node-a -out a.csr && sign a "subjectAltName=IP:$A
extendedKeyUsage=serverAuth" && gen b node-b -out b.csr && sign b "subjectAltName=IP:$B
extendedKeyUsage=serverAuth" && gen client fk-client -out client.csr &&
        sign client "extendedKeyUsage=clientAuth" || fail "openssl"
chmod 600 ./*.key
head -c 48 /dev/urandom | base64 -w0 >token && chmod 600 token
head -c 48 /dev/urandom | base64 -w0 >wrong && chmod 600 wrong
# what curl pins: SHA-256 of the certificate's SubjectPublicKeyInfo, computed by openssl
PIN_A="sha256//$(openssl x509 -in a.pem -pubkey -noout | openssl pkey -pubin -outform der |
        openssl dgst -sha256 -binary | base64 -w0)"

cl_etcd_init && cl_etcd_start || fail "etcd did not start"
total=$(($(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 1024))
mkdir -p images && : >images/vmlinuz && : >images/initrd.img
# node_config NAME API_YAML: admission refuses every session (allocatable 200 MiB), so placed
# sessions stay Pending on the node and nothing boots. runDir on a tmpfs (as /run on a systemd
# host), but "bad"'s on disk: forkletd mounts its own tmpfs there and must take it back when
# it refuses to start after that.
node_config() {
        mkdir -p "$T/$1/state" "$T/$1/run" "$T/$1/manifests"
        [ "$1" = bad ] || fk_run_tmpfs "$T/$1/run" || fail "mount a tmpfs on $T/$1/run"
        cat >"$T/$1.yaml" <<EOT
apiVersion: forklet.dev/v1alpha1
kind: NodeConfig
nodeName: tls$$-$1
stateDir: $T/$1/state
runDir: $T/$1/run
accel: tcg
manifestDir: $T/$1/manifests
api: {socket: $T/$1/run/api.sock, $2}
network: {uplinkPool: 198.18.$3.0/24, uplinkInterface: ""}
cgroupParent: forklet-tls$$-$1
sizeClasses:
  - {name: small, vcpus: 1, memoryMiB: 256, cpu: 1.0, pids: 1024}
images:
  - {name: minimal, dir: $T/images}
capacity: {reserveMemoryMiB: $((total - 200)), maxSessions: 4}
controlPlane: {etcd: ["$CL_ETCD_URL"], prefix: $P, releasePendingAfterSeconds: 0}
EOT
}
start() {
        "$FORKLETD" --config "$T/$1.yaml" >>"$T/$1.log" 2>&1 &
        PIDS+=($!)
}

# ---- forkletd refuses what it must ----------------------------------------------------------
node_config bad "listen: \"$A:$PORT\", tokenFile: $T/token" 250
timeout 20 "$FORKLETD" --config "$T/bad.yaml" >"$T/refuse.out" 2>&1 && fail "non-loopback listen without TLS started"
grep -q "api.listen.*not a loopback address.*api.tlsCert and api.tlsKey" "$T/refuse.out" ||
        fail "refusal does not say what to add: $(cat "$T/refuse.out")"
cp a.key loose.key && chmod 640 loose.key
node_config bad "listen: \"$A:$PORT\", tokenFile: $T/token, tlsCert: $T/a.pem, tlsKey: $T/loose.key" 250
timeout 20 "$FORKLETD" --config "$T/bad.yaml" >"$T/refuse.out" 2>&1 && fail "group-readable key accepted"
grep -q "api.tlsKey $T/loose.key: a private key must not be readable by group or others" \
        "$T/refuse.out" || fail "key mode refusal: $(cat "$T/refuse.out")"
# refused after it set up the run dir: forkletd's own guest RAM tmpfs (bad's runDir is on disk)
# is unmounted again
if [ "$(findmnt -n -o FSTYPE -T "$T/bad/run")" != tmpfs ]; then
        grep -q "guest RAM $T/bad/run/sessions: tmpfs (memory, forklet-ram on " "$T/refuse.out" ||
                fail "refused forkletd did not mount its guest RAM tmpfs: $(cat "$T/refuse.out")"
        grep -q "guest RAM $T/bad/run/sessions: forkletd's tmpfs unmounted" "$T/refuse.out" ||
                fail "refused forkletd did not say it unmounted: $(cat "$T/refuse.out")"
        grep -q " $T/bad/" /proc/self/mountinfo && fail "refused forkletd left its tmpfs mounted"
fi
rm -f "$T/bad.yaml"
echo "ok: refused a plain non-loopback listener and a group-readable key"

# ---- node A: TLS; node B: mutual TLS --------------------------------------------------------
node_config a "listen: \"$A:$PORT\", tokenFile: $T/token, tlsCert: $T/a.pem, tlsKey: $T/a.key" 251
node_config b "listen: \"$B:$PORT\", tokenFile: $T/token, tlsCert: $T/b.pem, tlsKey: $T/b.key, tlsClientCA: $T/ca.pem" 252
start a
start b
for n in a b; do
        cl_wait 30 sh -c "etcdctl --endpoints $CL_ETCD_URL get --print-value-only $P/nodes/tls$$-$n/status | grep -q ." ||
                fail "node $n status not published"
done
st=$(cl_ctl get --print-value-only "$P/nodes/tls$$-a/status")
echo "$st" | jq -e --arg url "https://$A:$PORT" --arg pin "$PIN_A" '.api.url == $url and
        .api.pinnedPublicKey == $pin and (.api.hostID | length) == 32 and
        .api.socket != null' >/dev/null || fail "node A status api: $(echo "$st" | jq -c .api)"
echo "ok: node status publishes api.url, the openssl-computed pin and hostID"

U=https://$A:$PORT
code() { curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$@"; }
"$FORKLET" --server $U --token-file token --ca ca.pem get sessions >"$T/get.out" 2>&1 ||
        fail "get sessions over https: $(cat "$T/get.out")"
[ "$(code --cacert ca.pem -H "Authorization: Bearer $(cat token)" $U/api/v1alpha1/sessions)" = 200 ] ||
        fail "curl with the token not 200"
[ "$(code --cacert ca.pem -H "Authorization: Bearer $(cat wrong)" $U/api/v1alpha1/sessions)" = 401 ] ||
        fail "wrong token not 401"
"$FORKLET" --server $U --token-file wrong --ca ca.pem get sessions >"$T/o" 2>&1 && fail "CLI with a wrong token succeeded"
grep -q "HTTP 401" "$T/o" || fail "CLI wrong token: $(cat "$T/o")"
c=$(code "http://$A:$PORT/healthz")
[ "$c" = 000 ] || fail "plain HTTP on the TLS port answered $c"
"$FORKLET" --server $U --token-file token --ca rogue.pem get sessions >"$T/o" 2>&1 && fail "untrusted CA accepted"
grep -qi "certificate" "$T/o" || fail "untrusted CA message: $(cat "$T/o")"
echo "untrusted CA: $(cat "$T/o")"
"$FORKLET" --server $U --token-file token get sessions >/dev/null 2>&1 && fail "system CA store trusted the test CA"
"$FORKLET" --server $U --token-file token --pinned-public-key "$PIN_A" get sessions >/dev/null 2>&1 ||
        fail "the right pin was refused"
"$FORKLET" --server $U --token-file token --pinned-public-key "sha256//$(head -c 32 /dev/zero | base64)" \
        get sessions >"$T/o" 2>&1 && fail "a wrong pin was accepted"
"$FORKLET" --server "http://$A:$PORT" --token-file token get sessions >"$T/o" 2>&1 && fail "--server http:// accepted"
echo "ok: https + token works; wrong token 401; plain HTTP, untrusted CA, wrong pin fail"

# mutual TLS on node B: the token alone is not enough
UB=https://$B:$PORT
[ "$(code --cacert ca.pem -H "Authorization: Bearer $(cat token)" $UB/api/v1alpha1/sessions)" = 401 ] ||
        fail "node B without a client cert not 401"
[ "$(code --cacert ca.pem --cert client.pem --key client.key -H "Authorization: Bearer $(cat token)" \
        $UB/api/v1alpha1/sessions)" = 200 ] || fail "node B with a client cert not 200"
"$FORKLET" --server $UB --token-file token --ca ca.pem --cert client.pem --key client.key get sessions \
        >/dev/null 2>&1 || fail "CLI with a client cert on node B"
[ "$(code --cacert ca.pem --cert rogue.pem --key rogue.key -H "Authorization: Bearer $(cat token)" \
        $UB/api/v1alpha1/sessions)" = 401 ] || fail "node B accepted a client cert of another CA"
echo "ok: mutual TLS: no client cert or one of another CA is 401, the CA's client cert is served"

# ---- cluster routing ------------------------------------------------------------------------
export FORKLET_ETCD=$CL_ETCD_URL FORKLET_ETCD_PREFIX=$P
printf 'apiVersion: forklet.dev/v1alpha1\nkind: Session\nmetadata: {name: far}\n' >far.yaml
"$FORKLET" apply -f far.yaml >/dev/null || fail "cluster apply"
cl_ctl put "$P/sessions/default/far/node" "tls$$-a" >/dev/null || fail "place far on node A"
cl_wait 30 sh -c "etcdctl --endpoints $CL_ETCD_URL get --print-value-only $P/sessions/default/far/status | jq -e '.phase == \"Pending\"' >/dev/null" ||
        fail "far not Pending on node A"
# same host, socket reachable: the socket (no token needed)
"$FORKLET" describe far >"$T/o" 2>&1 || fail "describe over the local socket: $(cat "$T/o")"
grep -q "far" "$T/o" || fail "describe output: $(cat "$T/o")"
# "another host": node A's run dir (its socket) hidden by a tmpfs in a private mount namespace
far() { unshare -m sh -c 'mount -t tmpfs fk-hide "$0" && exec "$@"' "$T/a/run" "$FORKLET" "$@"; }
far describe far >"$T/o" 2>&1 && fail "routed without a token (did it use the socket?)"
grep -q "https://$A:$PORT.*bearer token" "$T/o" || fail "no-token message: $(cat "$T/o")"
echo "without a token: $(cat "$T/o")"
far --token-file token describe far >"$T/o" 2>&1 || fail "describe over https (pin): $(cat "$T/o")"
grep -q "Pending" "$T/o" || fail "describe over https output: $(cat "$T/o")"
echo "describe over https (pinned key), socket hidden:"; head -n 6 "$T/o"
far --token-file token --ca ca.pem describe far >/dev/null 2>&1 || fail "describe over https (--ca)"
far --token-file token --ca rogue.pem describe far >/dev/null 2>&1 && fail "routed with an untrusted --ca"
far --token-file token --pinned-public-key "sha256//$(head -c 32 /dev/zero | base64)" describe far \
        >/dev/null 2>&1 && fail "routed despite a wrong --pinned-public-key"
FORKLET_TOKEN_FILE=$T/token far logs far >/dev/null 2>"$T/o"
grep -q "cannot reach" "$T/o" && fail "logs over https: $(cat "$T/o")"
# a node on another host (its hostID differs) is reached over https even though a socket at
# its published path answers here: the status of node A republished as "tls$$-far" with
# another hostID, and a session placed there (no forkletd acts on it: node A does not hold it)
st=$(cl_ctl get --print-value-only "$P/nodes/tls$$-a/status" | jq -c '.api.hostID = "0123456789abcdef0123456789abcdef"')
cl_ctl put "$P/nodes/tls$$-far/status" "$st" >/dev/null || fail "fake far node"
printf 'apiVersion: forklet.dev/v1alpha1\nkind: Session\nmetadata: {name: elsewhere}\n' >else.yaml
"$FORKLET" apply -f else.yaml >/dev/null && cl_ctl put "$P/sessions/default/elsewhere/node" "tls$$-far" >/dev/null ||
        fail "place elsewhere"
"$FORKLET" describe elsewhere >"$T/o" 2>&1 && fail "another host's session routed to the local socket"
grep -q "https://$A:$PORT.*bearer token" "$T/o" || fail "another host, no token: $(cat "$T/o")"
"$FORKLET" --token-file token describe elsewhere >"$T/o" 2>&1
grep -q "not found" "$T/o" || fail "another host over https: $(cat "$T/o")"
echo "ok: a node whose api.hostID is not this host's is reached over https, not the socket"

# both nodes stop cleanly (exit 0; with -DFORKLET_SANITIZE=ON: no sanitizer report)
for p in "${PIDS[@]}"; do
        kill "$p" && wait "$p" || fail "forkletd $p did not exit 0 on SIGTERM"
done
PIDS=()
grep -l "Sanitizer" "$T"/a.log "$T"/b.log && fail "sanitizer report in a node log"
echo "PASS: TLS listener, token, mutual TLS, and cluster routing over https to a node whose socket is not reachable"

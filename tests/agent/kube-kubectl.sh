#!/bin/bash
# SPDX-License-Identifier: MIT
# The real kubectl against a real forkletd and microVM through the TLS listener (127.0.0.1, a
# throwaway CA from openssl), with the kubeconfig `forklet kubeconfig` prints: api-resources,
# apply -f (created, unchanged, configured), wait --for=condition=Ready, get (Table: NAME,
# PHASE, PID, AGE; -o wide), -o yaml|json|jsonpath, -l, get -w (bounded), patch --type=merge
# pausing through spec.state (same QEMU PID, phase Paused), wait --for=jsonpath, explain,
# invalid manifests (kubectl prints the field and the validator's message), delete, and
# --certificate-authority / --token without a kubeconfig (a rogue CA and a wrong token fail).
# Usage: kube-kubectl.sh FORKLETD FORKLET   (root; 77 without kubectl, the image, QEMU, openssl)
FORKLETD=${1:?forkletd path}
FORKLET=${2:?forklet path}
FK_TAG=kube
. "$(dirname "$0")/../lib/harness.sh"
fk_setup

command -v kubectl >/dev/null || skip "kubectl not installed"
command -v openssl >/dev/null || skip "openssl not installed"
command -v ss >/dev/null || skip "ss (iproute2) not installed"
command -v jq >/dev/null || skip "jq not installed"
WATCHER=
fk_cleanup_extra() { [ -n "$WATCHER" ] && kill "$WATCHER" 2>/dev/null; return 0; }

free_port() {
        local p
        for _ in $(seq 50); do
                p=$((20000 + RANDOM % 30000))
                ss -Htln "sport = :$p" 2>/dev/null | grep -q . || { echo "$p"; return 0; }
        done
        return 1
}

# ---- a throwaway CA (and a rogue one), a server certificate for 127.0.0.1 --------------------
gen() { openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$2" \
        -keyout "$T/$1.key" "${@:3}" 2>>"$T/openssl.log"; }
gen ca fk-kube-test-ca -x509 -days 1 -out "$T/ca.pem" &&
        gen rogue fk-kube-rogue-ca -x509 -days 1 -out "$T/rogue.pem" &&
        gen server fk-kube-node -out "$T/server.csr" &&
        printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >"$T/server.ext" &&
        openssl x509 -req -in "$T/server.csr" -CA "$T/ca.pem" -CAkey "$T/ca.key" -CAcreateserial \
                -days 1 -extfile "$T/server.ext" -out "$T/server.pem" 2>>"$T/openssl.log" ||
        fail "openssl: $(cat "$T/openssl.log")"
chmod 600 "$T"/*.key
head -c 48 /dev/urandom | base64 -w0 >"$T/token" && chmod 600 "$T/token"
PORT=$(free_port) || fail "no free loopback port"
FK_API="{socket: $T/run/api.sock, listen: \"127.0.0.1:$PORT\", tokenFile: $T/token, tlsCert: $T/server.pem, tlsKey: $T/server.key}"
fk_node_config >"$T/node.yaml"
start_daemon
echo "kubectl: $(kubectl version --client 2>/dev/null | head -n1)"

"$FORKLET" kubeconfig --config "$T/node.yaml" --ca "$T/ca.pem" >"$T/kubeconfig" ||
        fail "forklet kubeconfig"
grep -q "server: https://127.0.0.1:$PORT" "$T/kubeconfig" || fail "kubeconfig: $(cat "$T/kubeconfig")"
export KUBECONFIG=$T/kubeconfig
K() { kubectl --cache-dir "$T/kcache" --request-timeout=60s "$@"; }
out() { cat "$T/o"; }

# ---- discovery ------------------------------------------------------------------------------
K api-resources --api-group=forklet.dev >"$T/o" 2>&1 || fail "api-resources: $(out)"
grep -Eq '^sessions +sess +forklet.dev/v1alpha1 +true +Session *$' "$T/o" ||
        fail "api-resources: $(out)"
echo "ok: api-resources: $(tail -n1 "$T/o")"

# ---- the CA and the token, without the kubeconfig -------------------------------------------
KK() { kubectl --kubeconfig /dev/null --cache-dir "$T/kcache2" --request-timeout=30s \
        --server "https://127.0.0.1:$PORT" "$@"; }
KK --certificate-authority "$T/ca.pem" --token "$(cat "$T/token")" get sessions >"$T/o" 2>&1 ||
        fail "--certificate-authority: $(out)"
KK --certificate-authority "$T/rogue.pem" --token "$(cat "$T/token")" get sessions >"$T/o" 2>&1 &&
        fail "a rogue CA was accepted"
grep -q "certificate signed by unknown authority" "$T/o" || fail "rogue CA message: $(out)"
KK --certificate-authority "$T/ca.pem" --token wrong-token get sessions >"$T/o" 2>&1 &&
        fail "a wrong token was accepted"
grep -Eqi "unauthorized|must be logged in" "$T/o" || fail "wrong token message: $(out)"
echo "ok: --certificate-authority with the token; a rogue CA and a wrong token are refused"

# ---- apply: created, unchanged, configured ---------------------------------------------------
cat >"$T/k1.yaml" <<EOT
apiVersion: forklet.dev/v1alpha1
kind: Session
metadata:
  name: k1
  labels: {app: kube-demo}
spec:
  sizeClass: small
  image: minimal
  lifecycle: {afterStart: ["sh", "-c", "echo up > /tmp/up"]}
EOT
K apply -f "$T/k1.yaml" >"$T/o" 2>&1 || fail "apply: $(out)"
grep -qx "session.forklet.dev/k1 created" "$T/o" || fail "apply (create): $(out)"
K apply -f "$T/k1.yaml" >"$T/o" 2>&1 || fail "apply again: $(out)"
grep -qx "session.forklet.dev/k1 unchanged" "$T/o" || fail "apply (unchanged): $(out)"
printf '  env: {STAGE: two}\n' >>"$T/k1.yaml"
K apply -f "$T/k1.yaml" >"$T/o" 2>&1 || fail "apply changed: $(out)"
grep -qx "session.forklet.dev/k1 configured" "$T/o" || fail "apply (configured): $(out)"
[ "$(K get session k1 -o jsonpath='{.spec.env.STAGE}')" = two ] || fail "spec.env not applied"
[ "$(K get session k1 -o jsonpath='{.metadata.generation}')" = 2 ] || fail "generation not 2"
echo "ok: apply -f: created, unchanged, configured (generation 2)"

K wait --for=condition=Ready session/k1 --timeout=300s >"$T/o" 2>&1 || fail "wait Ready: $(out)"
grep -q "condition met" "$T/o" || fail "wait Ready: $(out)"
echo "ok: wait --for=condition=Ready"

# ---- get: Table, wide, yaml, json, jsonpath, labels ------------------------------------------
PID=$(field k1 pid)
[ -n "$PID" ] && kill -0 "$PID" || fail "no QEMU pid for k1"
K get sessions >"$T/o" 2>&1 || fail "get: $(out)"
head -n1 "$T/o" | grep -Eq '^NAME +PHASE +PID +AGE *$' || fail "get header: $(out)"
grep -Eq "^k1 +Running +$PID +[0-9]+[smhd] *$" "$T/o" || fail "get row: $(out)"
cat "$T/o"
K get sess -o wide >"$T/o" 2>&1 || fail "get -o wide: $(out)"
head -n1 "$T/o" | grep -Eq '^NAME +PHASE +PID +AGE +READY +STATE +IMAGE +CLASS +NETNS' ||
        fail "wide header: $(out)"
grep -Eq "^k1 +Running +$PID .* True +Running +minimal +small " "$T/o" || fail "wide row: $(out)"
K get session k1 -o yaml >"$T/o" 2>&1 || fail "-o yaml: $(out)"
for want in "^kind: Session$" "^  uid: [0-9a-f-]{36}$" '^  resourceVersion: "[0-9]+"$' \
        "kubectl.kubernetes.io/last-applied-configuration" "^  phase: Running$"; do
        grep -Eq "$want" "$T/o" || fail "-o yaml lacks $want: $(out)"
done
K get session k1 -o json | jq -e --argjson pid "$PID" '.status.vm.pid == $pid and
        .metadata.creationTimestamp != null and (.status.conditions | map(select(.type ==
        "Ready"))[0].status) == "True"' >/dev/null || fail "-o json"
[ "$(K get session k1 -o jsonpath='{.status.phase}')" = Running ] || fail "jsonpath phase"
[ "$(K get sessions -l app=kube-demo -o jsonpath='{.items[*].metadata.name}')" = k1 ] ||
        fail "-l app=kube-demo"
K get sessions -l app=other >"$T/o" 2>&1 || fail "-l app=other: $(out)"
grep -q "No resources found" "$T/o" || fail "-l app=other: $(out)"
echo "ok: get (Table, -o wide, yaml, json, jsonpath, -l)"

# ---- get -w while pausing with a merge patch -------------------------------------------------
timeout 120 kubectl --cache-dir "$T/kcache" get sessions -w >"$T/watch.out" 2>&1 &
WATCHER=$!
for _ in $(seq 40); do grep -q "^k1 " "$T/watch.out" && break; sleep 0.5; done
grep -q "^k1 " "$T/watch.out" || fail "get -w printed no row: $(cat "$T/watch.out")"
K patch session k1 --type=merge -p '{"spec":{"state":"Paused"}}' >"$T/o" 2>&1 ||
        fail "patch: $(out)"
grep -qx "session.forklet.dev/k1 patched" "$T/o" || fail "patch: $(out)"
K wait --for=jsonpath='{.status.phase}'=Paused session/k1 --timeout=120s >"$T/o" 2>&1 ||
        fail "wait --for=jsonpath Paused: $(out)"
[ "$(field k1 phase)" = Paused ] || fail "forklet says $(field k1 phase), not Paused"
[ "$(field k1 pid)" = "$PID" ] || fail "pause changed the QEMU pid"
for _ in $(seq 40); do grep -Eq "^k1 +Paused " "$T/watch.out" && break; sleep 0.5; done
grep -Eq "^k1 +Paused " "$T/watch.out" || fail "get -w did not show Paused: $(cat "$T/watch.out")"
kill "$WATCHER" 2>/dev/null
wait "$WATCHER" 2>/dev/null
WATCHER=
echo "ok: patch --type=merge paused k1 (same pid $PID), wait --for=jsonpath, get -w showed it:"
cat "$T/watch.out"
K patch session k1 --type=merge -p '{"spec":{"state":"Running"}}' >/dev/null || fail "resume"
K wait --for=jsonpath='{.status.phase}'=Running session/k1 --timeout=120s >/dev/null ||
        fail "resume: not Running"

# ---- explain (OpenAPI v3 from the field table) -----------------------------------------------
K explain sessions.spec.egress >"$T/o" 2>&1 || fail "explain: $(out)"
grep -q "FIELD: egress <\[\]string>" "$T/o" && grep -q "wildcards" "$T/o" || fail "explain: $(out)"
K explain sessions.spec.forks >"$T/o" 2>&1 || fail "explain forks: $(out)"
grep -Eq "^  count\s+<integer> -required-$" "$T/o" || fail "explain forks: $(out)"
echo "ok: explain sessions.spec.egress"

# ---- invalid manifests: the field and the validator's message --------------------------------
printf 'apiVersion: forklet.dev/v1alpha1\nkind: Session\nmetadata: {name: bad}\nspec:\n  sizeClass: huge\n  egress: ["not a host"]\n' >"$T/bad.yaml"
K apply -f "$T/bad.yaml" >"$T/o" 2>&1 && fail "invalid manifest applied"
grep -q 'is invalid' "$T/o" && grep -q 'spec.sizeClass: unknown class "huge" (known: small)' "$T/o" &&
        grep -q 'spec.egress\[0\]: invalid egress entry' "$T/o" || fail "invalid: $(out)"
echo "invalid manifest:"; cat "$T/o"
printf 'apiVersion: forklet.dev/v1alpha1\nkind: Session\nmetadata: {name: bad}\nspec: {sizeClas: small}\n' >"$T/bad2.yaml"
K apply -f "$T/bad2.yaml" >"$T/o" 2>&1 && fail "unknown field applied"
grep -q 'spec.sizeClas: unknown field "sizeClas" (did you mean "sizeClass"?)' "$T/o" ||
        fail "unknown field: $(out)"
K get session bad >"$T/o" 2>&1 && fail "an invalid session exists"
grep -q 'sessions.forklet.dev "bad" not found' "$T/o" || fail "get bad: $(out)"
echo "ok: invalid manifests refused with the field and message"

# ---- server-side apply and --dry-run=server (k2 stays Stopped: no VM) ------------------------
printf 'apiVersion: forklet.dev/v1alpha1\nkind: Session\nmetadata: {name: k2, labels: {tier: a}}\nspec: {state: Stopped}\n' >"$T/k2.yaml"
K apply --server-side -f "$T/k2.yaml" >"$T/o" 2>&1 || fail "apply --server-side: $(out)"
grep -qx "session.forklet.dev/k2 serverside-applied" "$T/o" || fail "server-side apply: $(out)"
sed -i 's/tier: a/tier: b/' "$T/k2.yaml"
K apply --server-side -f "$T/k2.yaml" >"$T/o" 2>&1 || fail "apply --server-side again: $(out)"
[ "$(K get session k2 -o jsonpath='{.metadata.labels.tier}')" = b ] || fail "server-side apply: label"
[ "$(K get session k2 -o jsonpath='{.status.phase}')" = Stopped ] || fail "k2 not Stopped"
K patch session k2 --type=merge --dry-run=server -p '{"metadata":{"labels":{"tier":"dry"}}}' \
        >"$T/o" 2>&1 || fail "patch --dry-run=server: $(out)"
[ "$(K get session k2 -o jsonpath='{.metadata.labels.tier}')" = b ] || fail "--dry-run=server changed k2"
K delete -f "$T/k2.yaml" --timeout=60s >"$T/o" 2>&1 || fail "delete -f: $(out)"
echo "ok: apply --server-side (create, update), patch --dry-run=server changed nothing, delete -f"

# ---- delete; the /api/v1alpha1 paths still answer --------------------------------------------
"$FORKLET" get session k1 -o json | jq -e '.metadata.resourceVersion == null' >/dev/null ||
        fail "/api/v1alpha1 changed: it shows resourceVersion"
K delete session k1 --timeout=120s >"$T/o" 2>&1 || fail "delete: $(out)"
grep -qx 'session.forklet.dev "k1" deleted' "$T/o" || fail "delete: $(out)"
pid_gone_within 30 "$PID" || fail "QEMU $PID still runs after delete"
K get session k1 >"$T/o" 2>&1 && fail "k1 still there"
grep -q 'NotFound' "$T/o" || fail "get after delete: $(out)"
echo "ok: delete (kubectl waited until it was gone; QEMU exited)"
echo "PASS: kubectl against forkletd over the TLS listener"

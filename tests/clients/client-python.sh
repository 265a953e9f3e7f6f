#!/bin/bash
# SPDX-License-Identifier: MIT
# The Python client (clients/python, Debian's python3, stdlib unittest) against a real forkletd
# and microVM: apply YAML (created, unchanged, an invalid manifest's line:column), wait Running,
# exec (stdout, stderr, exit code, stdin, env, timeout, a missing binary), write/read files,
# checkpoint, fork 1 (the fork answers exec and has the file), `forklet tree` lists the fork
# under its checkpoint and describe shows its place, rollback (a later checkpoint hangs under
# the one rolled back to), pause/resume, a fork of the fork in the tree, the TLS listener
# (token, CA; a wrong token is APIError 401, an untrusted CA a TransportError), APIError for an
# unknown session, delete. The TLS listener is on 127.0.0.1 with a throwaway CA (openssl).
# Usage: client-python.sh FORKLETD FORKLET   (root; 77 without the image, QEMU, python3 or openssl)
FORKLETD=${1:?forkletd path}
FORKLET=${2:?forklet path}
FK_TAG=py
. "$(dirname "$0")/../lib/harness.sh"
fk_setup

PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3) || skip "python3 not installed"
command -v openssl >/dev/null || skip "openssl not installed"
command -v ss >/dev/null || skip "ss (iproute2) not installed"

free_port() {
        local p
        for _ in $(seq 50); do
                p=$((20000 + RANDOM % 30000))
                ss -Htln "sport = :$p" 2>/dev/null | grep -q . || { echo "$p"; return 0; }
        done
        return 1
}

# ---- a throwaway CA and a server certificate for 127.0.0.1 ----------------------------------
gen() { openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$2" \
        -keyout "$T/$1.key" "${@:3}" 2>>"$T/openssl.log"; }
gen ca fk-py-test-ca -x509 -days 1 -out "$T/ca.pem" && gen server fk-py-node -out "$T/server.csr" &&
        printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >"$T/server.ext" &&
        openssl x509 -req -in "$T/server.csr" -CA "$T/ca.pem" -CAkey "$T/ca.key" -CAcreateserial \
                -days 1 -extfile "$T/server.ext" -out "$T/server.pem" 2>>"$T/openssl.log" ||
        fail "openssl: $(cat "$T/openssl.log")"
chmod 600 "$T"/*.key
head -c 48 /dev/urandom | base64 -w0 >"$T/token" && chmod 600 "$T/token"
head -c 48 /dev/urandom | base64 -w0 >"$T/wrong" && chmod 600 "$T/wrong"
PORT=$(free_port) || fail "no free loopback port"
FK_API="{socket: $T/run/api.sock, listen: \"127.0.0.1:$PORT\", tokenFile: $T/token, tlsCert: $T/server.pem, tlsKey: $T/server.key}"
fk_node_config >"$T/node.yaml"

start_daemon

unset FORKLET_SERVER FORKLET_TOKEN_FILE FORKLET_CA
export FORKLET FK_PY_SERVER=https://127.0.0.1:$PORT FK_PY_TOKEN_FILE=$T/token FK_PY_CA=$T/ca.pem
export FK_PY_WRONG_TOKEN_FILE=$T/wrong FK_PY_BOOT_TIMEOUT=${FK_PY_BOOT_TIMEOUT:-300}
echo "python: $("$PY" --version 2>&1) ($PY)"
PYTHONDONTWRITEBYTECODE=1 "$PY" -B "$SRC/clients/python/tests/test_integration.py" ||
        fail "python integration test"
echo "ok: the Python client against forkletd and a microVM"

#!/bin/bash
# SPDX-License-Identifier: MIT
# forklet mcp with the official MCP TypeScript SDK as the client (Client + StdioClientTransport
# spawning `forklet --socket SOCK mcp`), against a real forkletd and microVM (TCG): tools/list,
# exec uname -s, files, checkpoint, fork 1 (Running), pause/resume, checkpoint_delete (with the
# fork, checked with the CLI too), snapshot_create, restore (Running, with the file),
# snapshot_list, snapshot_delete, and the error cases (tests/cli/mcp-client.mjs).
# The SDK is installed from npm into BUILD/npm-mcp on the first run (kept as a cache).
# Usage: mcp-sdk.sh FORKLETD FORKLET   (root; exit 77 without node/npm, the npm registry, the
# image or QEMU)
FORKLETD=${1:?forkletd path}
FORKLET=${2:?forklet path}
FK_TAG=mcp
. "$(dirname "$0")/../lib/harness.sh"
fk_setup

command -v node >/dev/null || skip "node not installed (scripts/install-deps.sh installs nodejs)"
command -v npm >/dev/null || skip "npm not installed (scripts/install-deps.sh installs npm)"
major=$(node -p 'process.versions.node.split(".")[0]')
[ "$major" -ge 18 ] || skip "node $major is too old for @modelcontextprotocol/sdk (18 or later)"

NPM_DIR=${FORKLET_BINARY_DIR:-$SRC/build}/npm-mcp
SDK=$NPM_DIR/node_modules/@modelcontextprotocol/sdk/package.json
if [ ! -f "$SDK" ]; then
        mkdir -p "$NPM_DIR"
        echo "installing @modelcontextprotocol/sdk into $NPM_DIR"
        if ! timeout 300 npm install --prefix "$NPM_DIR" --no-audit --no-fund --loglevel=error \
                "@modelcontextprotocol/sdk@1" >"$T/npm.log" 2>&1; then
                tail -n 5 "$T/npm.log" >&2
                skip "npm could not install @modelcontextprotocol/sdk (is its registry reachable?)"
        fi
fi
echo "MCP SDK $(node -p "require('$SDK').version")"
# Node resolves the script's imports from where the script lies: next to a node_modules link.
cp "$SRC/tests/cli/mcp-client.mjs" "$T/mcp-client.mjs"
ln -s "$NPM_DIR/node_modules" "$T/node_modules"

start_daemon
session agent
"$FORKLET" wait agent --for=Running --timeout=240 || fail "agent not Running"

timeout 900 node "$T/mcp-client.mjs" "$FORKLET" "$FORKLET_SOCKET" agent ||
        fail "the MCP SDK client failed (its output above)"

# what the client did, as the CLI sees it: its checkpoint deleted with the fork (cascade); an
# exec into the fork while its VM is being ended is refused, and forkletd lives on (it used to
# dereference the deleted session's spec)
out=$("$FORKLET" exec agent-fork-0 -- true 2>&1) && fail "exec into a deleted fork: $out"
echo "$out" | grep -Eq "agent-fork-0 (is being deleted|not found)" || fail "exec into a deleted fork: $out"
"$FORKLET" wait agent-fork-0 --for=Deleted --timeout=120 || fail "agent-fork-0 not deleted"
[ "$("$FORKLET" checkpoint list agent -o json | grep -c '"id": "ck_')" = 0 ] ||
        fail "agent still has the checkpoint the client deleted"
[ "$("$FORKLET" exec agent -- uname -s)" = Linux ] || fail "exec in agent after the fork's delete"
# nothing but MCP messages on stdout, even for a request it cannot parse
out=$(printf '%s\n' 'not json' '{"jsonrpc":"2.0","id":1,"method":"ping"}' |
        "$FORKLET" --socket "$FORKLET_SOCKET" mcp)
[ "$(echo "$out" | wc -l)" = 2 ] && echo "$out" | head -n1 | grep -q '"id":null,"error":{"code":-32700' &&
        [ "$(echo "$out" | tail -n1)" = '{"jsonrpc":"2.0","id":1,"result":{}}' ] ||
        fail "forklet mcp on stdio printed: $out"
echo "PASS: mcp-sdk"

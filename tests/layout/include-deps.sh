#!/bin/sh
# SPDX-License-Identifier: MIT
# Include direction between folders: every #include "X/..." in a folder's sources must name a
# folder that one may depend on (the table below, the same graph as the CMake targets). A header
# of a lower folder never includes a higher one, and forklet (cli/) and forklet-scheduler
# (scheduler/) never include the daemon (agent/) or its kernel-facing modules.
# Usage: include-deps.sh SOURCE_DIR. Checks itself on a small broken tree first. Exit 0 or 1.
set -eu

# One line a folder, lowest first; a folder may only depend on folders on earlier lines.
TABLE='common: common
manifest: common manifest
core: common manifest core
etcd: common etcd
cgroups: common cgroups
net: common net
vmm: common vmm
agent: common manifest core etcd cgroups net vmm agent
cli: common manifest core etcd cli
scheduler: common manifest core etcd scheduler'
# The sub-libraries (manifest/SUB/, agent/SUB/, lowest first): what their sources may include besides
# their own folder; agent/ itself may include them all.
SUBTABLE='manifest/doc: common
manifest/node: common manifest/doc
core/cluster: common manifest core
vmm/console: common
vmm/agent-client: common vmm/guest
vmm/balloon: common vmm
vmm/checkpoint: common vmm
agent/obs: common core
agent/store: common manifest
agent/jail: common manifest vmm
agent/image: common manifest
agent/secrets: common manifest
agent/disk: common agent/store
agent/vm: common manifest core vmm agent/obs agent/store agent/jail agent/image agent/secrets agent/disk
agent/net: common manifest net agent/vm
agent/runfs: common manifest
agent/session: common manifest core vmm agent/obs agent/store agent/vm agent/net
agent/daemon: common manifest core cgroups net vmm agent/obs agent/store agent/jail agent/image agent/secrets agent/disk agent/vm agent/net agent/runfs agent/session
agent/api: common manifest core vmm agent/obs agent/image agent/vm agent/daemon
agent/cluster: common manifest core etcd cgroups agent/daemon agent/api'
# An entry agent/X names that sub-library alone, a top-level name every header under it; an
# X-internal.h is included only inside its own folder.
# Top-level folders that are no library (may include anything).
FREE='tests bench dist examples scripts build docs'

# The table itself must be ordered (hence acyclic).
check_table() {
        printf '%s\n' "$TABLE" | awk -F': ' '
        { seen[$1] = 1; n = split($2, d, " ")
          for (i = 1; i <= n; i++)
                  if (d[i] != $1 && !(d[i] in seen)) {
                          printf "include-deps: table: %s depends on %s, which is not below it\n", $1, d[i]
                          bad = 1
                  } }
        END { exit bad }'
}

# Prints one line per violation in tree $1; returns 1 when there is any.
check_tree() {
        root=$1
        status=0
        for top in "$root"/*/; do
                name=$(basename "$top")
                case " $FREE " in *" $name "*) continue ;; esac
                # a build tree (build-asan, build-fuzz, ...): CMake's generated C is no module
                [ -f "$top/CMakeCache.txt" ] && continue
                if ! find "$top" -name '*.[ch]' | grep -q .; then
                        continue
                fi
                if ! printf '%s\n' "$TABLE" | grep -q "^$name: "; then
                        echo "include-deps: $name/ holds C sources but is not in the table of $0"
                        status=1
                fi
        done
        printf '%s\n' "$TABLE" | while IFS= read -r line; do
                folder=${line%%:*}
                allowed=${line#*: }
                [ -d "$root/$folder" ] || continue
                find "$root/$folder" -name '*.[ch]' | sort | xargs -r awk -v skip="${#root}" \
                        -v folder="$folder" -v allowed=" $allowed " '
                /^[ \t]*#[ \t]*include[ \t]*"[A-Za-z0-9_.-]+\// {
                        s = $0
                        sub(/^[^"]*"/, "", s)
                        sub(/\/.*/, "", s)
                        if (index(allowed, " " s " ") == 0) {
                                printf "%s:%d: %s/ may not include %s/ (allowed:%s)\n",
                                       substr(FILENAME, skip + 2), FNR, folder, s, allowed
                                bad = 1
                        }
                }
                END { exit bad }' || echo FAIL
        done | {
                out=$(cat)
                out=$out$(check_sub "$root")
                if [ -n "$out" ]; then
                        printf '%s\n' "$out" | grep -v '^FAIL$'
                        exit 1
                fi
        } || status=1
        return $status
}

# Prints one line per include in a sub-library that reaches outside its allowance.
check_sub() {
        printf '%s\n' "$SUBTABLE" | while IFS= read -r line; do
                sub=${line%%:*}
                allowed=${line#*: }
                [ -d "$1/$sub" ] || continue
                find "$1/$sub" -name '*.[ch]' | sort | xargs -r awk -v skip="${#1}" -v sub_="$sub" \
                        -v allowed=" $allowed " '
                /^[ \t]*#[ \t]*include[ \t]*"[A-Za-z0-9_.-]+\// {
                        s = $0
                        sub(/^[^"]*"/, "", s)
                        sub(/".*/, "", s)
                        p = s
                        sub(/\/[^\/]*$/, "", p)
                        top = s
                        sub(/\/.*/, "", top)
                        if (p != sub_ && index(allowed, " " top " ") == 0 &&
                            index(allowed, " " p " ") == 0)
                                printf "%s:%d: %s/ may not include %s (allowed: its own folder,%s)\n",
                                       substr(FILENAME, skip + 2), FNR, sub_, s, allowed
                        else if (p != sub_ && s ~ /-internal\.h$/)
                                printf "%s:%d: %s/ may not include %s (another folder'"'"'s internal header)\n",
                                       substr(FILENAME, skip + 2), FNR, sub_, s
                }'
        done
}

# The sub-library table must be ordered too: a sub-library it names is on an earlier line (a
# folder that is no entry, such as vmm/guest, only widens what may be included).
check_subtable() {
        printf '%s\n' "$SUBTABLE" | awk -F': ' '
        { key[NR] = $1; deps[NR] = $2; entry[$1] = 1 }
        END { for (r = 1; r <= NR; r++) {
          seen[key[r]] = 1; n = split(deps[r], d, " ")
          for (i = 1; i <= n; i++)
                  if (d[i] ~ /\// && (d[i] in entry) && !(d[i] in seen)) {
                          printf "include-deps: table: %s depends on %s, which is not below it\n", key[r], d[i]
                          bad = 1
                  } }
          exit bad }'
}

self_test() {
        tmp=$(mktemp -d)
        trap 'rm -rf "$tmp"' EXIT
        mkdir -p "$tmp/cli" "$tmp/core" "$tmp/common" "$tmp/agent"
        printf '#include "common/util.h"\n#include "core/core.h"\n' >"$tmp/cli/ok.c"
        printf '#include "common/util.h"\n' >"$tmp/core/core.h"
        printf '#include "core/core.h"\n' >"$tmp/agent/a.c"
        mkdir -p "$tmp/agent/obs"
        printf '#include "agent/obs/obs.h"\n#include "common/util.h"\n' >"$tmp/agent/obs/o.c"
        printf '#pragma once\n' >"$tmp/common/util.h"
        if ! out=$(check_tree "$tmp"); then
                echo "include-deps: self-test: a clean tree was refused:"
                printf '%s\n' "$out"
                return 1
        fi
        printf '#include "agent/agent.h"\n' >>"$tmp/cli/ok.c"
        printf '#include "cli/cli.h"\n' >>"$tmp/core/core.h"
        printf '#include "cli/cli.h"\n' >>"$tmp/agent/a.c"
        printf '#include "agent/agent.h"\n' >>"$tmp/agent/obs/o.c"
        mkdir -p "$tmp/agent/api" && printf '#include "agent/daemon/daemon-internal.h"\n' >"$tmp/agent/api/a.c"
        mkdir -p "$tmp/newlib" && printf 'int x;\n' >"$tmp/newlib/x.c"
        if out=$(check_tree "$tmp"); then
                echo "include-deps: self-test: a broken tree passed"
                return 1
        fi
        for want in "cli/ok.c:3: cli/ may not include agent/" "core/core.h:2: core/ may not include cli/" \
                "agent/a.c:2: agent/ may not include cli/" "newlib/ holds C sources" \
                "agent/obs/o.c:3: agent/obs/ may not include agent/agent.h" \
                "agent/api/a.c:1: agent/api/ may not include agent/daemon/daemon-internal.h (another"; do
                if ! printf '%s\n' "$out" | grep -qF "$want"; then
                        echo "include-deps: self-test: missing \"$want\" in:"
                        printf '%s\n' "$out"
                        return 1
                fi
        done
        rm -rf "$tmp"
        trap - EXIT
}

if [ $# -ne 1 ] || [ ! -d "$1" ]; then
        echo "usage: $0 SOURCE_DIR" >&2
        exit 2
fi
check_table
check_subtable
self_test
if ! check_tree "$1"; then
        echo "include-deps: FAIL: fix the include or the dependency (see the table in $0)"
        exit 1
fi
echo "include-deps: ok"

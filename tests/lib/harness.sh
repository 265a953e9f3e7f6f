#!/bin/bash
# SPDX-License-Identifier: MIT
# The test harness: every shell test sources this file (tests/lib/harness.sh). Sourcing it only
# defines functions (and sources its parts, which only define functions too): no mount, trap,
# process, file or variable (but FK_LIB, this directory) until the test calls a function. The parts:
#   check.sh  skip/fail, fk_require_root/fk_require_cmds, ok/bad/expect counters, fk_wait
#   mount.sh  fk_run_tmpfs (a runDir on a tmpfs), fk_unmount_under (teardown)
#   inet.sh   fake_internet/fake_dns/net_cleanup: HTTP hosts and DNS on TEST-NET addresses
#   etcd.sh   cl_etcd_init/cl_etcd_start/cl_etcd_stop/cl_ctl/cl_wait: a private etcd
# and this file: a forkletd node for a test (fk_setup), forkletd start/stop, teardown of
# everything the node made even on failure (EXIT trap: QEMUs, netns, cgroups, session networks,
# jail grants, mounts, files; a grant left on /dev/net/tun or /dev/kvm fails the test), and small
# session/status helpers.
#
# fk_setup makes the node: state/run/manifest dirs under T=/tmp/fk-TAG-PID, its own cgroup
# parent FK_CGROUP=fk-test-TAG-PID, its own jail uid range (so tests running at the same time
# never share a uid), $T/node.yaml, FORKLET_SOCKET, FAILS=0, and the EXIT trap (fk_cleanup).
# The layout is a stock systemd host's: runDir on a tmpfs mounted on $T/run (guest RAM files
# live there), stateDir on the disk filesystem of /tmp. FK_LAYOUT=single keeps both on /tmp's
# filesystem (forkletd then mounts its own tmpfs for guest RAM on $T/run/sessions).
# Set FORKLETD and FORKLET first. Hooks, all optional, set before fk_setup:
#   FK_TAG          names T and the cgroup parent (default fork)
#   IMG             the image dir (default $FORKLET_IMAGE_DIR)
#   FK_IMAGE_FILES  files IMG must hold, else skip (default "vmlinuz workspace.img")
#   FK_IMAGE_HINT   how to build the image, for the skip message
#   FK_LAYOUT       tmpfs (default: runDir on a tmpfs, stateDir on disk) or single (one disk fs)
# After fk_setup: change FK_API, FK_CLASSES, FK_IMAGES, FK_JAIL and write `fk_node_config
# [LINE...] >"$T/node.yaml"` again for another node config; define fk_cleanup_extra for more
# teardown (it runs after forkletd and the node's QEMUs are gone).
# tests/integration/fork-lib.sh (the harness's old name) sources this file and calls fk_setup.

FK_LIB=$(dirname "${BASH_SOURCE[0]}")
. "$FK_LIB/check.sh"
. "$FK_LIB/mount.sh"
. "$FK_LIB/inet.sh"
. "$FK_LIB/etcd.sh"

# fk_setup: the node (above). Skips (77) without root, the image's files, QEMU or qemu-img.
fk_setup() {
        local f
        set -u
        SRC=${FORKLET_SOURCE_DIR:-$(cd "$FK_LIB/../.." && pwd)}
        IMG=${IMG:-${FORKLET_IMAGE_DIR:-}}
        FK_TAG=${FK_TAG:-fork}
        FK_LAYOUT=${FK_LAYOUT:-tmpfs}
        T=/tmp/fk-$FK_TAG-$$
        FK_CGROUP=fk-test-$FK_TAG-$$
        DPID=
        fk_checks_init
        PIDS=()
        fk_require_root
        for f in ${FK_IMAGE_FILES:-vmlinuz workspace.img}; do
                [ -n "$IMG" ] && [ -f "$IMG/$f" ] ||
                        skip "guest image missing in '$IMG' (${FK_IMAGE_HINT:-cmake --build BUILD --target guest-image})"
        done
        command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 not installed"
        command -v qemu-img >/dev/null || skip "qemu-img not installed"
        case $FK_LAYOUT in
        tmpfs | single) ;;
        *) fail "FK_LAYOUT=$FK_LAYOUT: use tmpfs (the default) or single" ;;
        esac
        # The node config's parts a test may change (then write it again with fk_node_config).
        # The jail: 64 uids of this test's own (PID-derived, disjoint from every other test
        # running now; the default range would give two nodes' sessions of the same name the
        # same uid, and one node's revoked grants would hit the other's QEMU).
        FK_UID_BASE=$((1000000 + ($$ % 4194304) * 64))
        FK_JAIL="{uidBase: $FK_UID_BASE, uidCount: 64}"
        FK_API="{socket: $T/run/api.sock}"
        FK_CLASSES=("{name: small, vcpus: 1, memoryMiB: 256, cpu: 1.0, pids: 1024}")
        FK_IMAGES=("{name: minimal, dir: $IMG}")
        trap fk_cleanup EXIT
        mkdir -p "$T/state" "$T/run" "$T/manifests"
        [ "$FK_LAYOUT" = single ] || fk_run_tmpfs "$T/run" || fail "mount a tmpfs on $T/run"
        fk_node_config >"$T/node.yaml"
        export FORKLET_SOCKET=$T/run/api.sock
}

# The netns prefix forkletd uses for this node: "fk" + 24 bits of FNV-1a of stateDir + "-".
netns_prefix() {
        local s=$T/state h=2166136261 i c
        for ((i = 0; i < ${#s}; i++)); do
                printf -v c '%d' "'${s:i:1}"
                h=$((((h ^ c) * 16777619) & 0xffffffff))
        done
        printf 'fk%06x-' $((h & 0xffffff))
}

# Thaws this node's frozen (paused) session cgroups: a frozen v1 task cannot die of SIGKILL.
fk_thaw() {
        local f
        for f in /sys/fs/cgroup/freezer/$FK_CGROUP/*/freezer.state; do
                [ -f "$f" ] && echo THAWED >"$f" 2>/dev/null
        done
        for f in /sys/fs/cgroup/$FK_CGROUP/*/cgroup.freeze; do
                [ -f "$f" ] && echo 0 >"$f" 2>/dev/null
        done
}

fk_cleanup() {
        local p n pre
        # forkletd stops within 10 s (a hung one is killed: the test already failed)
        if [ -n "$DPID" ] && kill "$DPID" 2>/dev/null; then
                for _ in $(seq 100); do kill -0 "$DPID" 2>/dev/null || break; sleep 0.1; done
                kill -9 "$DPID" 2>/dev/null
                wait "$DPID" 2>/dev/null
        fi
        fk_thaw
        for p in /proc/[0-9]*; do
                # only a QEMU of this test (its command line names our run dir)
                grep -qs "$T/run" "$p/cmdline" && kill -9 "${p#/proc/}" 2>/dev/null
        done
        declare -F fk_cleanup_extra >/dev/null && fk_cleanup_extra
        sleep 0.2
        # session networks outlive forkletd (adopted on restart): remove this node's netns
        # (the veth's host end and the nft tables inside go with it)
        pre=$(netns_prefix)
        for n in $(ip netns list 2>/dev/null | awk '{print $1}'); do
                case "$n" in "$pre"*) ip netns delete "$n" 2>/dev/null ;; esac
        done
        # session cgroups go with their sessions (or their killed QEMUs); the parent is ours
        for _ in $(seq 40); do
                for p in /sys/fs/cgroup/*/$FK_CGROUP/* /sys/fs/cgroup/*/$FK_CGROUP \
                        /sys/fs/cgroup/$FK_CGROUP/* /sys/fs/cgroup/$FK_CGROUP; do
                        [ -d "$p" ] && rmdir "$p" 2>/dev/null
                done
                ls -d /sys/fs/cgroup/*/$FK_CGROUP /sys/fs/cgroup/$FK_CGROUP >/dev/null 2>&1 || break
                sleep 0.25
        done
        # the session networks forkletd made for this node (netns, host veths, NAT tables) and
        # the jail's grants on host files (/dev/net/tun, /dev/kvm) of sessions never deleted
        # (and forkletd's own guest RAM tmpfs, in the single layout)
        [ -f "$T/node.yaml" ] && "$FORKLETD" --config "$T/node.yaml" --decommission >/dev/null 2>&1
        fk_unmount_under "$T"
        [ -n "${FORKLET_TEST_KEEP:-}" ] && echo "kept $T (not the run dir's tmpfs)" >&2 || rm -rf "$T"
        fk_check_grants || exit 1
}

# After the decommission no ACL entry of this node's jail uids is left on the host files every
# session is granted (/dev/net/tun, /dev/kvm): one left is a leak, which is removed (under the
# flock forkletd takes for its own ACL changes, as other tests' forkletds change the same file)
# and fails the test.
fk_check_grants() {
        local f u left=""
        command -v getfacl >/dev/null && command -v setfacl >/dev/null || return 0
        for f in /dev/net/tun /dev/kvm; do
                [ -e "$f" ] || continue
                for u in $(getfacl -n -p "$f" 2>/dev/null | sed -n 's/^user:\([0-9][0-9]*\):.*/\1/p'); do
                        [ "$u" -ge "$FK_UID_BASE" ] && [ "$u" -lt $((FK_UID_BASE + 64)) ] || continue
                        left="$left u:$u on $f"
                        flock "$f" setfacl -x "u:$u" "$f"
                done
                # no named entry left: the mask setfacl keeps goes too, as forkletd drops it
                [ -z "$left" ] || flock "$f" sh -c 'getfacl -n -p "$1" |
                        grep -q "^\(user\|group\):[0-9]" || setfacl -b "$1"' _ "$f"
        done
        [ -z "$left" ] && return 0
        echo "FAIL: ACL entries left after the node's decommission (removed now):$left" >&2
        return 1
}

# fk_node_config [LINE...]: prints this node's NodeConfig, then each LINE (more top-level keys)
fk_node_config() {
        cat <<EOT
apiVersion: forklet.dev/v1alpha1
kind: NodeConfig
nodeName: $FK_TAG-$$
stateDir: $T/state
runDir: $T/run
accel: ${FORKLET_TEST_ACCEL:-tcg}
cgroupParent: $FK_CGROUP
manifestDir: $T/manifests
api: $FK_API
EOT
        [ -z "$FK_JAIL" ] || printf 'jail: %s\n' "$FK_JAIL"
        printf 'sizeClasses:\n'
        printf '  - %s\n' "${FK_CLASSES[@]}"
        printf 'images:\n'
        printf '  - %s\n' "${FK_IMAGES[@]}"
        [ $# = 0 ] || printf '%s\n' "$@"
}

start_daemon() {
        "$FORKLETD" --config "$T/node.yaml" --log-level debug >>"$T/forkletd.log" 2>&1 &
        DPID=$!
        # forkletd adopts running VMs before it serves the API: one still booting is waited for
        # until its agent answers (up to 25 s each), longer on a loaded host
        for _ in $(seq 900); do
                "$FORKLET" get sessions >/dev/null 2>&1 && { fk_check_start_log; return 0; }
                kill -0 "$DPID" 2>/dev/null || fail "forkletd exited at start"
                sleep 0.1
        done
        fail "forkletd did not answer on $FORKLET_SOCKET within 90 s"
}

# The last start's log names the filesystems of runDir, stateDir and guest RAM, and guest RAM is
# on a tmpfs: the harness's (runDir) or, with runDir on disk, forkletd's own on $T/run/sessions.
fk_check_start_log() {
        local log disk ram
        log=$(awk '/: node .*: accel /{b=""} {b=b $0 "\n"} END{printf "%s", b}' "$T/forkletd.log")
        disk=$(findmnt -n -o FSTYPE -T "$T/state") || fail "findmnt $T/state"
        echo "$log" | grep -q ": stateDir $T/state: $disk (" ||
                fail "start log does not name stateDir's filesystem ($disk)"
        if [ "$FK_LAYOUT" = single ] && [ "$disk" != tmpfs ]; then
                echo "$log" | grep -q ": runDir $T/run: $disk (disk, " ||
                        fail "start log does not name runDir's filesystem ($disk, disk)"
                ram="forklet-ram on $T/run/sessions, "
        else
                echo "$log" | grep -q ": runDir $T/run: tmpfs (memory, " ||
                        fail "start log does not name runDir's filesystem (tmpfs, memory)"
                ram="[^ ]* on $T/run, "
                [ "$FK_LAYOUT" = single ] && ram="[^ ]* on " # /tmp itself is a tmpfs here
        fi
        echo "$log" | grep -q ": guest RAM $T/run/sessions: tmpfs (memory, $ram" ||
                fail "start log: guest RAM not on the expected tmpfs ($ram)"
}

# fk_check_ram NAME: the RAM file of the running session NAME (vm.memPath in its state.json, a
# booted VM) is on a tmpfs under $T/run; a rolled back VM maps its checkpoint's RAM copy-on-write,
# as a fork does: memPrivate, through the session's origin/ links
fk_check_ram() {
        local vm=$T/state/sessions/default.$1/state.json mem
        mem=$(jq -r '.vm.memPath // empty' "$vm" 2>/dev/null)
        [ -n "$mem" ] || fail "$1: no memPath in $vm"
        if [ "$mem" = "$T/state/sessions/default.$1/origin/ram" ]; then
                [ "$(jq -r '.vm.memPrivate' "$vm")" = true ] || fail "$1: maps $mem shared"
                return 0
        fi
        case $mem in "$T/run/sessions/default.$1/"*) ;; *) fail "$1: RAM file $mem not in its run dir" ;; esac
        [ "$(stat -f -c %T "$mem")" = tmpfs ] || fail "$1: RAM file $mem on $(stat -f -c %T "$mem")"
}

stop_daemon() {
        kill "$DPID" && wait "$DPID"
        DPID=
}

# field NAME KEY: first scalar value of "KEY" in `get session NAME -o json`
field() {
        "$FORKLET" get session "$1" -o json | sed -n "s/^ *\"$2\": *\"\{0,1\}\([^\",]*\)\"\{0,1\},\{0,1\}$/\1/p" | head -n1
}

# session NAME [YAML lines for spec...]: writes $T/NAME.yaml and applies it; the size class and
# image are FK_SESSION_CLASS and FK_SESSION_IMAGE (default small, minimal)
session() {
        local name=$1
        shift
        {
                printf 'apiVersion: forklet.dev/v1alpha1\nkind: Session\nmetadata: {name: %s}\n' "$name"
                printf 'spec:\n  sizeClass: %s\n  image: %s\n' "${FK_SESSION_CLASS:-small}" \
                        "${FK_SESSION_IMAGE:-minimal}"
                for l in "$@"; do printf '  %s\n' "$l"; done
        } >"$T/$name.yaml"
        "$FORKLET" apply -f "$T/$name.yaml" >/dev/null || fail "apply $name $*"
}

# sh NAME SCRIPT: runs sh -c SCRIPT in the guest, prints stdout
gsh() {
        "$FORKLET" exec "$1" -- sh -c "$2"
}

# exists_within SECONDS NAME: the session NAME exists (forklet wait fails at once on a session
# that is not there yet, e.g. a fork spec.forks is about to make)
exists_within() {
        local i
        for i in $(seq $(($1 * 5))); do
                "$FORKLET" get session "$2" >/dev/null 2>&1 && return 0
                sleep 0.2
        done
        return 1
}

# unlisted_within SECONDS NAME: the session NAME is no longer listed (forkletd removes the
# files of a deleted session, then its entry)
unlisted_within() {
        local i
        for i in $(seq $(($1 * 5))); do
                "$FORKLET" get session "$2" >/dev/null 2>&1 || return 0
                sleep 0.2
        done
        return 1
}

# gone_within SECONDS PATH...: the paths disappear
gone_within() {
        local s=$1 i p left
        shift
        for i in $(seq $((s * 4))); do
                left=0
                for p in "$@"; do [ -e "$p" ] && left=1; done
                [ $left = 0 ] && return 0
                sleep 0.25
        done
        return 1
}

# pid_gone_within SECONDS PID: the process exits
pid_gone_within() {
        local i
        for i in $(seq $(($1 * 4))); do
                kill -0 "$2" 2>/dev/null || return 0
                sleep 0.25
        done
        return 1
}

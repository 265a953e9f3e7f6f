#!/bin/bash
# SPDX-License-Identifier: MIT
# OCI images by reference against a real registry: Debian's docker-registry on 127.0.0.1 (a
# free port, its own config and storage in the test dir); an image made with umoci from the
# minimal image's initrd tree (without the agent: forkletd injects it) plus a file, a hard link,
# Env, WorkingDir and a command; pushed with skopeo. A session boots from its reference and
# sees the files and the Env (spec.env wins), runs the image command (runImageCommand),
# checkpoints and forks on the same rootfs (one pull, one copy per digest); a missing tag is
# PullFailed with the registry's message; an unlisted registry is refused at apply; forklet
# image list/pull/inspect/rm, rm refused while in use, the copy removed when nothing uses it.
# Usage: image-oci.sh FORKLETD FORKLET   (root; exit 77 without the image or the tools)
FORKLETD=${1:?forkletd path}
FORKLET=${2:?forklet path}
FK_TAG=oci
. "$(dirname "$0")/../lib/harness.sh"
fk_setup

for t in skopeo umoci docker-registry mkfs.ext4 cpio curl jq python3; do
        command -v "$t" >/dev/null || skip "$t not installed (scripts/install-deps.sh)"
done
RPID=
fk_cleanup_extra() {
        [ -n "$RPID" ] && kill "$RPID" 2>/dev/null && wait "$RPID" 2>/dev/null
}

# ---- a registry of our own on a free loopback port --------------------------------------------
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
REG=127.0.0.1:$PORT
mkdir -p "$T/registry/data"
cat >"$T/registry/config.yml" <<EOF
version: 0.1
log: {level: warn}
storage:
  filesystem: {rootdirectory: $T/registry/data}
  delete: {enabled: true}
http: {addr: "$REG"}
EOF
docker-registry serve "$T/registry/config.yml" >"$T/registry.log" 2>&1 &
RPID=$!
for _ in $(seq 100); do
        curl -fsS "http://$REG/v2/" >/dev/null 2>&1 && break
        kill -0 "$RPID" 2>/dev/null || fail "docker-registry exited: $(tail -n 5 "$T/registry.log")"
        sleep 0.1
done
curl -fsS "http://$REG/v2/" >/dev/null || fail "registry not answering on $REG"

# ---- an image: the minimal initrd's tree without the agent, plus our files --------------------
B=$T/build
mkdir -p "$B/tree"
(cd "$B/tree" && gzip -dc "$IMG/initrd.img" | cpio -id --quiet) || fail "unpack the initrd"
rm -f "$B/tree/sbin/forklet-agent" "$B/tree/init"
mkdir -p "$B/tree/srv/app"
echo hello-from-oci >"$B/tree/etc/oci-note"
ln "$B/tree/etc/oci-note" "$B/tree/srv/app/note-link"
echo 'app:x:1000:1000::/srv/app:/bin/sh' >>"$B/tree/etc/passwd"
echo 'app:x:1000:' >>"$B/tree/etc/group"
chown 1000:1000 "$B/tree/srv/app"
umoci init --layout "$B/oci" || fail "umoci init"
umoci new --image "$B/oci:1" || fail "umoci new"
umoci unpack --image "$B/oci:1" "$B/bundle" >/dev/null || fail "umoci unpack"
cp -a "$B/tree/." "$B/bundle/rootfs/"
umoci repack --image "$B/oci:1" "$B/bundle" || fail "umoci repack"
umoci config --image "$B/oci:1" --config.env FOO=image --config.env ONLY_IMAGE=yes \
        --config.workingdir /srv/app --config.user app --config.entrypoint /bin/sh \
        --config.entrypoint -c --config.cmd 'echo started >/srv/app/image-cmd; exec sleep 100000' ||
        fail "umoci config"
REF=$REG/forklet/oci-test:1
skopeo copy --quiet --dest-tls-verify=false "oci:$B/oci:1" "docker://$REF" || fail "skopeo push"
curl -fsS "http://$REG/v2/forklet/oci-test/tags/list" | grep -q '"1"' || fail "tag not in the registry"

fk_node_config "registries:" "  - {host: \"$REG\", insecure: true}" >"$T/node.yaml"
start_daemon

# ---- an unlisted registry is refused at apply ------------------------------------------------
FK_SESSION_IMAGE=127.0.0.2:5000/other:1
printf 'apiVersion: forklet.dev/v1alpha1\nkind: Session\nmetadata: {name: nope}\nspec:\n  image: %s\n' \
        "$FK_SESSION_IMAGE" >"$T/nope.yaml"
out=$("$FORKLET" apply -f "$T/nope.yaml" 2>&1) && fail "apply of an unlisted registry succeeded"
echo "$out" | grep -q "registry 127.0.0.2:5000 is not allowed on node oci-$$ (allowed: $REG)" ||
        fail "unlisted registry: unexpected message: $out"

# ---- boot from the reference ----------------------------------------------------------------
FK_SESSION_IMAGE=$REF
session oa "env: {FOO: spec}" "lifecycle: {runImageCommand: true}"
seen_pulling=0
for _ in $(seq 600); do
        st=$("$FORKLET" get session oa -o json)
        echo "$st" | jq -e '.status.conditions[] | select(.type=="ImageReady" and .reason=="Pulling")' \
                >/dev/null 2>&1 && seen_pulling=1
        [ "$(echo "$st" | jq -r .status.phase)" = Running ] && break
        sleep 0.5
done
"$FORKLET" wait oa --for=Running --timeout=300 || fail "oa not Running"
"$FORKLET" get session oa -o json |
        jq -e '.status.conditions[] | select(.type=="ImageReady" and .status=="True" and .reason=="Pulled")' \
                >/dev/null || fail "ImageReady is not True/Pulled"
echo "saw ImageReady=Pulling while pulling: $seen_pulling"
[ "$(gsh oa 'cat /etc/oci-note')" = hello-from-oci ] || fail "image file missing in the guest"
[ "$(gsh oa 'stat -c %i /etc/oci-note')" = "$(gsh oa 'stat -c %i /srv/app/note-link')" ] ||
        fail "hard link not kept"
[ "$(gsh oa 'echo $FOO')" = spec ] || fail "spec.env does not win over the image's Env"
[ "$(gsh oa 'echo $ONLY_IMAGE')" = yes ] || fail "image Env not applied to exec"
[ "$(gsh oa 'pwd')" = /srv/app ] || fail "image WorkingDir not applied to exec"
[ "$(gsh oa 'id -u; id -g')" = "$(printf '1000\n1000')" ] || fail "image User not applied to exec"
[ "$(gsh oa 'cat /srv/app/image-cmd')" = started ] || fail "runImageCommand did not run the image's command"
[ "$(gsh oa 'stat -c %u /srv/app/image-cmd')" = 1000 ] || fail "the image command did not run as its User"
gsh oa 'grep -q " / overlay" /proc/mounts && grep -q " /workspace ext4" /proc/mounts' ||
        fail "root not the overlay on the image / no workspace"
gsh oa 'echo scratch >/srv/app/scratch' || fail "root not writable (overlay)"
digest=$(cat "$T/state/sessions/default.oa/image-digest") || fail "no image-digest recorded"
[ -f "$T/state/oci/images/${digest#sha256:}/rootfs.img" ] || fail "rootfs not in the store"

# ---- checkpoint and fork: the same rootfs, no second pull ---------------------------------------
gsh oa 'echo before-checkpoint >/srv/app/mark' || fail "write /srv/app/mark"
id=$("$FORKLET" checkpoint create oa) || fail "checkpoint"
forks=$("$FORKLET" fork oa --from "$id" --count 1) || fail "fork"
f=$(echo "$forks" | head -n 1)
"$FORKLET" wait "$f" --for=Running --timeout=300 || fail "fork $f not Running"
[ "$(gsh "$f" 'cat /etc/oci-note; cat /srv/app/mark; echo $ONLY_IMAGE; id -u')" = \
        "$(printf 'hello-from-oci\nbefore-checkpoint\nyes\n1000')" ] || fail "fork: files, Env or User differ"
[ "$(cat "$T/state/sessions/default.$f/image-digest")" = "$digest" ] || fail "fork on another digest"
# a second session of the same reference: no second pull, no second rootfs
session ob
"$FORKLET" wait ob --for=Running --timeout=300 || fail "ob not Running"
[ "$(cat "$T/state/sessions/default.ob/image-digest")" = "$digest" ] || fail "ob on another digest"
[ "$(gsh ob 'cat /etc/oci-note; echo $FOO')" = "$(printf 'hello-from-oci\nimage')" ] ||
        fail "ob: image file or Env missing"
[ "$(ls "$T/state/oci/images" | wc -l)" = 1 ] || fail "more than one image copy"
# a restarted forkletd adopts the VMs and still applies the image config to exec
stop_daemon
start_daemon
[ "$(gsh ob 'echo $ONLY_IMAGE; pwd; id -u')" = "$(printf 'yes\n/srv/app\n1000')" ] ||
        fail "image config not applied after a forkletd restart"
[ "$(grep -c "image $REF: pulling" "$T/forkletd.log")" = 1 ] || fail "pulled more than once"

# ---- a missing tag: PullFailed with the registry's message ------------------------------------
FK_SESSION_IMAGE=$REG/forklet/oci-test:missing
session om
for _ in $(seq 120); do
        msg=$("$FORKLET" get session om -o json |
                jq -r '.status.conditions[] | select(.type=="ImageReady" and .reason=="PullFailed") | .message')
        [ -n "$msg" ] && break
        sleep 0.5
done
[ -n "$msg" ] || fail "no ImageReady=PullFailed for a missing tag"
echo "$msg" | grep -qi "manifest unknown" || fail "PullFailed without the registry's message: $msg"
[ "$(field om phase)" = Pending ] || fail "om not Pending after a failed pull"
# tried again after its back-off (5 s first)
for _ in $(seq 60); do
        [ "$(grep -c "image $REG/forklet/oci-test:missing: pulling" "$T/forkletd.log")" -ge 2 ] && break
        sleep 0.5
done
[ "$(grep -c "image $REG/forklet/oci-test:missing: pulling" "$T/forkletd.log")" -ge 2 ] ||
        fail "a failed pull is not tried again"
"$FORKLET" delete om >/dev/null || fail "delete om"

# ---- the CLI ----------------------------------------------------------------------------------
"$FORKLET" image list | grep -q "$REF" || fail "image list does not name $REF"
"$FORKLET" image inspect "$REF" | jq -e '.config.Env | index("ONLY_IMAGE=yes")' >/dev/null ||
        fail "image inspect: no Env"
out=$("$FORKLET" image rm "$REF" 2>&1) && fail "image rm succeeded while in use"
echo "$out" | grep -q "session default/oa (1 checkpoints)" || fail "image rm: users not named: $out"
"$FORKLET" delete "$f" >/dev/null && "$FORKLET" delete oa >/dev/null &&
        "$FORKLET" delete ob >/dev/null || fail "delete sessions"
"$FORKLET" wait ob --for=Deleted --timeout=120 || fail "ob not deleted"
"$FORKLET" wait oa --for=Deleted --timeout=120 || fail "oa not deleted"
"$FORKLET" wait "$f" --for=Deleted --timeout=120 || fail "$f not deleted"
gone_within 30 "$T/state/oci/images/${digest#sha256:}" || fail "unused image copy kept"
"$FORKLET" image pull "$REF" | grep -q "$digest" || fail "image pull"
[ -f "$T/state/oci/images/${digest#sha256:}/rootfs.img" ] || fail "pulled image not in the store"
curl -fsS --unix-socket "$FORKLET_SOCKET" -X POST -d "{\"reference\": \"$REF\", \"poll\": true}" \
        http://x/api/v1alpha1/images |
        jq -e '.state == "Ready" and .bytesTotal > 0 and .bytesDone == .bytesTotal' >/dev/null ||
        fail "pull status: not Ready with its bytes counted"
"$FORKLET" image rm "$REF" >/dev/null || fail "image rm of an unused image"
[ -e "$T/state/oci/images/${digest#sha256:}" ] && fail "image rm left the copy"
"$FORKLET" image list | grep -q "$REF" && fail "image list still names $REF"
echo PASS

#!/bin/sh
# SPDX-License-Identifier: MIT
# forklet and forklet-scheduler link no part of forkletd: neither they nor any library they load
# (ldd) is libmicrohttpd, libnl, libnftnl or libmnl, and none of those nor GnuTLS is a library
# they were linked against (ELF NEEDED). GnuTLS alone may show up in ldd, and only when the
# system libcurl itself loads it (Debian's libcurl4 reaches it through librtmp and libldap);
# the script says so when it does. forkletd, which does link them, must be flagged (control).
# The binaries after --lazy-curl also must not need libcurl: they load it on first use
# (common/curl-lazy.c), so that starting them loads none of it; forkletd, which links it, is
# the control of that check too.
# Usage: link-deps.sh FORKLETD BIN... [--lazy-curl BIN...]
# Exit 0, 1 (a forbidden library), 77 (no ldd/readelf).
set -eu

FORBIDDEN='libmicrohttpd|libgnutls|libnl-|libnftnl|libmnl'
[ $# -ge 2 ] || {
        echo "usage: $0 FORKLETD BIN..." >&2
        exit 2
}
for tool in ldd readelf; do
        command -v $tool >/dev/null || {
                echo "link-deps: $tool not installed: skipped"
                exit 77
        }
done

# Libraries named in the ELF NEEDED entries of $1 that match FORBIDDEN.
needed_forbidden() {
        readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | grep -E "^($FORBIDDEN)" || true
}

# Library names (sonames) that ldd of $1 lists.
loaded() {
        ldd "$1" | awk '{print $1}'
}

# 0 when $1 passes; prints why not otherwise.
check() {
        bin=$1
        bad=0
        [ -x "$bin" ] || {
                echo "link-deps: $bin: not an executable"
                return 1
        }
        for lib in $(needed_forbidden "$bin"); do
                echo "link-deps: $bin: linked against $lib (ELF NEEDED)"
                bad=1
        done
        curl=$(ldd "$bin" | awk '$1 ~ /^libcurl\.so/ {print $3}')
        for lib in $(loaded "$bin" | grep -E "^($FORBIDDEN)" || true); do
                if needed_forbidden "$bin" | grep -qxF "$lib"; then
                        continue # said above
                fi
                case $lib in
                libgnutls*)
                        if [ -n "$curl" ] && loaded "$curl" | grep -qxF "$lib"; then
                                echo "link-deps: $bin: $lib is loaded only by the system libcurl ($curl)"
                                continue
                        fi ;;
                esac
                echo "link-deps: $bin: loads $lib"
                bad=1
        done
        return $bad
}

# 0 when $1 neither needs libcurl (ELF NEEDED) nor loads it at start (ldd).
no_curl() {
        bad=0
        if readelf -d "$1" | grep -q '(NEEDED).*\[libcurl\.so'; then
                echo "link-deps: $1: linked against libcurl (ELF NEEDED); it should load it lazily"
                bad=1
        elif loaded "$1" | grep -q '^libcurl\.so'; then
                echo "link-deps: $1: loads libcurl at start"
                bad=1
        fi
        return $bad
}

daemon=$1
shift
if check "$daemon" >/dev/null; then
        echo "link-deps: control: $daemon was not flagged, so the check sees nothing"
        exit 1
fi
status=0
lazy=false
note=
for bin in "$@"; do
        if [ "$bin" = --lazy-curl ]; then
                lazy=true
                note=" (libcurl loaded on first use)"
                if no_curl "$daemon" >/dev/null; then
                        echo "link-deps: control: $daemon needs no libcurl, so the check sees nothing"
                        exit 1
                fi
                continue
        fi
        if check "$bin" && { ! $lazy || no_curl "$bin"; }; then
                echo "link-deps: $bin: ok$note"
        else
                status=1
        fi
done
exit $status

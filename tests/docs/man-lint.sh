#!/bin/sh
# SPDX-License-Identifier: MIT
# Usage: tests/docs/man-lint.sh MAN_PAGE...
# Formats each roff man page with groff's man macros and every warning enabled (-ww) and fails
# on any diagnostic; with mandoc installed also on its lint output. Skips (77) without groff.
set -u
command -v groff >/dev/null 2>&1 || { echo "SKIP: groff not installed (apt-get install groff-base)" >&2; exit 77; }
[ $# -gt 0 ] || { echo "usage: man-lint.sh MAN_PAGE..." >&2; exit 2; }
fails=0
for page in "$@"; do
        if [ ! -f "$page" ]; then
                echo "FAIL: $page: no such file" >&2
                fails=$((fails + 1))
                continue
        fi
        out=$(LC_ALL=C.UTF-8 groff -man -ww -z "$page" 2>&1)
        rc=$?
        if [ $rc -ne 0 ] || [ -n "$out" ]; then
                echo "FAIL: $page: groff -man -ww -z (exit $rc):" >&2
                printf '%s\n' "$out" >&2
                fails=$((fails + 1))
                continue
        fi
        # The page must render to something with its NAME section (a truncated file would not).
        if ! LC_ALL=C.UTF-8 groff -man -Tutf8 -P-cbou "$page" 2>/dev/null | grep -q '^NAME'; then
                echo "FAIL: $page: no NAME section in the rendered page" >&2
                fails=$((fails + 1))
                continue
        fi
        if command -v mandoc >/dev/null 2>&1; then
                out=$(mandoc -Tlint -Wwarning "$page" 2>&1)
                if [ -n "$out" ]; then
                        echo "FAIL: $page: mandoc -Tlint:" >&2
                        printf '%s\n' "$out" >&2
                        fails=$((fails + 1))
                        continue
                fi
        fi
        echo "ok: $page"
done
[ $fails -eq 0 ] || { echo "$fails man page(s) with problems" >&2; exit 1; }

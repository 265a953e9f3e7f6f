#!/bin/sh
# SPDX-License-Identifier: MIT
# Usage: tests/docs/check-docs.sh SOURCE_DIR PROJECT_VERSION
# Checks the documentation's shape: README.md starts with the two commands CI and users rely on
# and stays within 150 lines; every docs page exists and the index links it; every relative
# link (and #anchor) in README.md and docs/*.md resolves; the man pages carry the project
# version; nothing points at the design document outside the repository any more.
set -u
src=${1:?usage: check-docs.sh SOURCE_DIR PROJECT_VERSION}
version=${2:?usage: check-docs.sh SOURCE_DIR PROJECT_VERSION}
cd "$src" || exit 1
fails=0
bad() {
        echo "FAIL: $*" >&2
        fails=$((fails + 1))
}

# README: title, intro line, then the two commands first.
n=$(wc -l <README.md)
[ "$n" -le 150 ] || bad "README.md has $n lines (at most 150: reference text goes to docs/)"
[ "$(sed -n 1p README.md)" = "# forklet" ] || bad "README.md:1: expected the title \"# forklet\""
[ "$(sed -n 5p README.md)" = '```sh' ] || bad "README.md:5: expected the \`\`\`sh block of the two commands"
case $(sed -n 6p README.md) in
"./scripts/demo.sh    # "?*) ;;
*) bad "README.md:6: expected \"./scripts/demo.sh    # ...\" (the first command after the intro)" ;;
esac
case $(sed -n 7p README.md) in
"./scripts/test.sh    # "?*) ;;
*) bad "README.md:7: expected \"./scripts/test.sh    # ...\" (the second command)" ;;
esac
[ "$(sed -n 8p README.md)" = '```' ] || bad "README.md:8: expected the end of the command block"

# Every topic page exists and the index links it.
for p in concepts manifest node-config cli operations networking fork-engine images security \
        cluster clients kubernetes testing benchmarks design; do
        [ -s "docs/$p.md" ] || bad "docs/$p.md is missing or empty"
        grep -q "](${p}.md)" docs/README.md || bad "docs/README.md does not link ${p}.md"
done
for m in forklet.1 forkletd.8 forklet-session.5; do
        [ -s "docs/man/$m" ] || { bad "docs/man/$m is missing"; continue; }
        grep -q "^\.TH .* \"forklet $version\"" "docs/man/$m" ||
                bad "docs/man/$m: .TH does not name \"forklet $version\" (the project version)"
done

# Markdown outside code fences: "[text](target)" targets, and heading anchors (GitHub's rule:
# lowercase, drop everything but letters, digits, spaces, '-' and '_', spaces to '-').
links() {
        awk '/^[ \t]*```/ { fence = !fence; next }
             !fence { s = $0
                      while (match(s, /\]\([^) ]+\)/)) {
                              print substr(s, RSTART + 2, RLENGTH - 3)
                              s = substr(s, RSTART + RLENGTH)
                      } }' "$1"
}
anchors() {
        awk '/^[ \t]*```/ { fence = !fence; next }
             !fence && /^#+ / { h = $0; sub(/^#+ +/, "", h); h = tolower(h)
                                gsub(/[^a-z0-9 _-]/, "", h); gsub(/ /, "-", h); print h }' "$1"
}
for f in README.md docs/*.md; do
        dir=$(dirname "$f")
        for t in $(links "$f"); do
                case $t in
                *://* | mailto:*) continue ;;
                esac
                path=${t%%#*}
                anchor=
                case $t in *"#"*) anchor=${t#*#} ;; esac
                target=$f
                [ -n "$path" ] && target=$dir/$path
                if [ ! -e "$target" ]; then
                        bad "$f: link ($t): $target does not exist"
                        continue
                fi
                case $target in *.md) ;; *) continue ;; esac
                if [ -n "$anchor" ] && ! anchors "$target" | grep -qx -- "$anchor"; then
                        bad "$f: link ($t): no heading for #$anchor in $target"
                fi
        done
done

# Tables: every row has as many cells as its header (a stray '|' in a code span breaks one).
for f in README.md docs/*.md; do
        out=$(awk -v F="$f" '/^[ \t]*```/ { fence = !fence; next }
                fence { next }
                /^\|/ { l = $0; gsub(/\\\|/, "", l); n = gsub(/\|/, "|", l)
                        if (!t) { t = 1; want = n; start = FNR }
                        else if (n != want) print F ":" FNR ": " n - 1 " cells, the header (line " start ") has " want - 1
                        next }
                { t = 0 }' "$f")
        [ -z "$out" ] || bad "table rows that do not match their header:
$out"
done

# The design lives in docs/design.md; nothing refers to the old copy beside the repository.
old="shared/DESIGN"".md"
hits=$(grep -rIl --exclude-dir='build*' --exclude-dir=.git -e "$old" \
        README.md docs common manifest vmm net cgroups agent tests bench dist scripts examples \
        CMakeLists.txt 2>/dev/null)
[ -z "$hits" ] || bad "files still refer to $old (use docs/design.md): $hits"

[ $fails -eq 0 ] || { echo "$fails documentation problem(s)" >&2; exit 1; }
echo "ok: README.md, docs/ (links, anchors, tables), man page versions"

#!/bin/sh
# The documentation's own check, with sh and awk alone: in README.md, CHANGELOG.md and docs/*.md
#   1. every relative link resolves: its file exists and, with #anchor, the file has a heading
#      of that anchor (GitHub's rule: lower case, punctuation dropped, spaces to -);
#   2. every ```c block compiles (cc -fsyntax-only, C99): a whole program as it is; a fragment
#      as the body of a function after mha.h and tests/docs/prelude.h (the names fragments use),
#      its leading preprocessor lines first.
# Usage: tests/docs_check.sh [BUILD_DIR]   Ends with "N passed, M failed".
B=${1:-build}/docs
mkdir -p "$B"
CC=${DOCS_CC:-cc} # (not $CC: make test CC=tcc would pass tcc, which has no -fsyntax-only)
passed=0
failed=0
files="README.md CHANGELOG.md $(ls docs/*.md)"
anchors() { # the anchors of a markdown file's headings, one a line
    awk '/^```/ {f = !f} !f && /^#+ / {h = $0; sub(/^#+ /, "", h); h = tolower(h);
         gsub(/[^a-z0-9 _-]/, "", h); gsub(/ /, "-", h); print h}' "$1"
}
bad=0
for f in $files; do
    dir=$(dirname "$f")
    links=$(awk '/^```/ {f = !f; next} !f {
        s = $0
        while (match(s, /\]\([^) ]+\)/)) { print substr(s, RSTART + 2, RLENGTH - 3); s = substr(s, RSTART + RLENGTH) }
    }' "$f")
    for l in $links; do
        case $l in http://*|https://*|mailto:*) continue ;; esac
        path=${l%%#*}
        anchor=
        case $l in *#*) anchor=${l#*#} ;; esac
        target=$f
        [ -n "$path" ] && target=$dir/$path
        if [ ! -e "$target" ]; then
            echo "docs: $f links to $l: no such file"; bad=$((bad + 1)); continue
        fi
        if [ -n "$anchor" ] && ! anchors "$target" | grep -qx -- "$anchor"; then
            echo "docs: $f links to $l: no such heading"; bad=$((bad + 1))
        fi
    done
done
if [ "$bad" -eq 0 ]; then
    echo "docs: every relative link of $(echo $files | wc -w) files resolves"; passed=$((passed + 1))
else
    failed=$((failed + 1))
fi
i=0
n=0
for f in $files; do # each ```c block into $B/block_N.c, and where it is into $B/block_N.where
    n=$(awk -v dir="$B" -v src="$f" -v n="$n" '/^```c$/ {on = 1; n++; print src ":" NR > (dir "/block_" n ".where");
            close(dir "/block_" n ".where"); next}
        on && /^```$/ {on = 0; close(dir "/block_" n ".c"); next} on {print > (dir "/block_" n ".c")}
        END {print n}' "$f")
done
for c in "$B"/block_*.c; do
    [ -e "$c" ] || continue
    i=$((i + 1))
    where=$(cat "${c%.c}.where")
    if grep -q 'int main' "$c"; then
        cp "$c" "$B/unit.c"
    else
        { awk 'body == 0 && /^(#|[ \t]*$|\/\*.*\*\/[ \t]*$)/ {print; next} {body = 1}' "$c"
          echo '#include "mha.h"'
          echo '#include "prelude.h"'
          echo 'void docs_fragment(void);'
          echo 'void docs_fragment(void) {'
          awk 'body == 0 && /^(#|[ \t]*$|\/\*.*\*\/[ \t]*$)/ {next} {body = 1; print}' "$c"
          echo '}'; } > "$B/unit.c"
    fi
    if $CC -std=c99 -fsyntax-only -I. -Itests/docs -Werror=implicit-function-declaration \
        -Werror=incompatible-pointer-types -Werror=int-conversion "$B/unit.c" 2> "$B/unit.log"; then
        passed=$((passed + 1))
    else
        echo "docs: the C block at $where does not compile:"; cat "$B/unit.log"; failed=$((failed + 1))
    fi
done
rm -f "$B"/block_*
echo "docs: $i C blocks compiled"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

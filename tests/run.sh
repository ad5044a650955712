#!/bin/sh
# Runs each test program given, shows its output, and adds up the
# "N passed, M failed" lines. Exits non-zero if any program fails or
# prints no such line. Usage: tests/run.sh PROGRAM [PROGRAM...]
# RUN_JOBS=N runs N programs at a time (make test: one per core); their
# outputs are shown whole, in the order given.
passed=0
failed=0
jobs=${RUN_JOBS:-1}
tally() { # tally PROGRAM OUTPUT CODE
    printf '%s\n' "$2"
    line=$(printf '%s\n' "$2" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -n 1)
    if [ -z "$line" ]; then
        echo "$1: no summary line (exit $3)"
        failed=$((failed + 1))
        return
    fi
    p=${line%% passed*}
    f=${line#*passed, }
    f=${f%% failed*}
    passed=$((passed + p))
    failed=$((failed + f))
    if [ "$3" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "$1: exit $3"
        failed=$((failed + 1))
    fi
}
if [ "$jobs" -le 1 ]; then
    for prog in "$@"; do
        echo "== $prog"
        out=$($prog 2>&1)
        tally "$prog" "$out" $?
    done
else
    tmp=$(mktemp -d)
    i=0
    for prog in "$@"; do
        i=$((i + 1))
        printf '%s\n' "$prog" > "$tmp/cmd.$i"
    done
    # a pool: each program starts as soon as one of the jobs before it ends (its words
    # split as the one-at-a-time loop splits them)
    seq 1 "$i" | xargs -P "$jobs" -I{} sh -c 'p=$(cat "$1/cmd.$2"); $p > "$1/out.$2" 2>&1; echo $? > "$1/rc.$2"' \
        sh "$tmp" {}
    i=0
    for prog in "$@"; do
        i=$((i + 1))
        echo "== $prog"
        tally "$prog" "$(cat "$tmp/out.$i")" "$(cat "$tmp/rc.$i" 2>/dev/null || echo 1)"
    done
    rm -rf "$tmp"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

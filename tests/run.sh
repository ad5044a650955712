#!/bin/sh
# Runs each test program given, shows its output, and adds up the
# "N passed, M failed" lines. Exits non-zero if any program fails or
# prints no such line. Usage: tests/run.sh PROGRAM [PROGRAM...]
passed=0
failed=0
for prog in "$@"; do
    echo "== $prog"
    out=$($prog 2>&1)
    code=$?
    printf '%s\n' "$out"
    line=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -n 1)
    if [ -z "$line" ]; then
        echo "$prog: no summary line (exit $code)"
        failed=$((failed + 1))
        continue
    fi
    p=${line%% passed*}
    f=${line#*passed, }
    f=${f%% failed*}
    passed=$((passed + p))
    failed=$((failed + f))
    if [ "$code" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "$prog: exit $code"
        failed=$((failed + 1))
    fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

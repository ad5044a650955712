#!/bin/sh
# Runs each example program; each must exit 0. Usage: tests/run_examples.sh PROGRAM...
passed=0
failed=0
for prog in "$@"; do
    if "$prog" > /dev/null 2>&1; then
        echo "example $prog: ok"; passed=$((passed + 1))
    else
        echo "example $prog: FAILED"; failed=$((failed + 1))
    fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

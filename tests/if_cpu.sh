#!/bin/sh
# Runs PROGRAM only when this CPU has every flag of FLAGS (comma-separated,
# as /proc/cpuinfo names them); otherwise says so and counts nothing.
# Usage: tests/if_cpu.sh FLAGS PROGRAM [ARGS...]
flags=$1; shift
for f in $(echo "$flags" | tr ',' ' '); do
    if ! grep -qw "$f" /proc/cpuinfo 2>/dev/null; then
        echo "skipped $1: this CPU has no $f"
        echo "0 passed, 0 failed"
        exit 0
    fi
done
exec "$@"

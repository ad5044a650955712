#!/bin/sh
# CI's check that the benchmark and the peer comparison run from a clean
# clone and print a row for every shape (timings this short mean nothing).
B=${BUILD:-build}
passed=0
failed=0
check() { # check NAME EXPECTED_ROWS OUTPUT
    rows=$(printf '%s\n' "$3" | grep -cE '^\| ([TMBGQALN]|D[1234]|P) \|')
    if [ "$rows" -eq "$2" ]; then
        echo "smoke $1: $rows rows"; passed=$((passed + 1))
    else
        printf '%s\n' "$3"; echo "smoke $1: $rows rows, expected $2"; failed=$((failed + 1))
    fi
}
make -s "$B/bench" "$B/bench_decode" "$B/blas_mha" "$B/dnnl_mha" "$B/peer_data" || { echo "0 passed, 1 failed"; exit 1; }
check "make bench (0.05 s a shape): 8 shapes, then M, B, L with bf16 weights and backward" 14 "$("$B/bench" 0.05 all 2>/dev/null)"
check "bench unpacked weights" 1 "$("$B/bench" 0.05 M unpacked 2>/dev/null)"
check "decoding steps (bench_decode, 0.05 s a shape): float, then 16-bit, then block caches (one thread and two), then cold caches" 21 "$("$B/bench_decode" 0.05 2>/dev/null)"
check "make peers (1 round): 8 shapes on one thread and on two, the speed-ups, then M, B, L backward" 27 "$(${PYTHON:-/usr/bin/python3} bench/peers.py 1 0.05 2>/dev/null)"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

#!/bin/sh
# Instruction counts of one mha_forward call (fast path, packed weights) on
# the shapes T and M, for the AVX2+FMA build and the portable build
# (MHA_NO_SIMD=1) at -O2 and -O3 (where gcc's autovectoriser once made the
# portable code many times slower), under valgrind --tool=callgrind (which
# cannot run AVX-512 code). Counts only what runs inside the library's call
# (mha__enter, its checks, and mha__compute, the stages).
#   bench/callgrind.sh            prints the table of docs/performance.md, "Benchmark"
#   bench/callgrind.sh --check    also compares each count with docs/performance.md's
#                                 (within 3 %) and prints "N passed, M failed"
B=${BUILD:-build}
CC=${CC:-cc}
mkdir -p "$B"
$CC -O2 -std=c99 -mavx2 -mfma bench/bench.c -o "$B/bench_avx2" -lm -pthread || exit 1
$CC -O2 -std=c99 -DMHA_NO_SIMD=1 bench/bench.c -o "$B/bench_portable" -lm -pthread || exit 1
$CC -O3 -std=c99 -DMHA_NO_SIMD=1 bench/bench.c -o "$B/bench_portable-O3" -lm -pthread || exit 1
passed=0
failed=0
echo "| build | shape | instructions |"
echo "|---|---|---|"
for build in avx2 portable portable-O3; do
    for shape in T M; do
        out=$(valgrind --tool=callgrind --toggle-collect=mha__enter --toggle-collect=mha__compute --callgrind-out-file="$B/callgrind.$build.$shape" \
            "$B/bench_$build" 0 "$shape" once 2>&1)
        ir=$(printf '%s\n' "$out" | sed -n 's/.*Collected : *\([0-9]*\).*/\1/p' | tail -n 1)
        [ -n "$ir" ] || ir=$(printf '%s\n' "$out" | sed -n 's/.*I *refs: *\([0-9,]*\).*/\1/p' | tr -d ,)
        echo "| $build | $shape | $ir |"
        if [ "${1:-}" = --check ]; then
            want=$(sed -n "s/^| $build | $shape | \([0-9]*\) |\$/\1/p" docs/performance.md | head -n 1)
            if [ -n "$want" ] && [ -n "$ir" ] &&
                awk -v a="$ir" -v b="$want" 'BEGIN{d=a-b; if (d<0) d=-d; exit !(d <= 0.03*b)}'; then
                passed=$((passed + 1))
            else
                echo "callgrind $build $shape: $ir instructions, docs/performance.md records ${want:-nothing}"
                failed=$((failed + 1))
            fi
        fi
    done
done
if [ "${1:-}" = --check ]; then
    echo "$passed passed, $failed failed"
    [ "$failed" -eq 0 ]
fi

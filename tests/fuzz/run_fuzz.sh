#!/bin/sh
# Runs the libFuzzer binary for a bounded time, shows its progress lines, and
# ends with the execution count and "N passed, M failed".
# Usage: tests/fuzz/run_fuzz.sh BINARY CORPUS_DIR SECONDS
bin=$1; corpus=$2; secs=$3
log=$corpus.log
echo "fuzzing for $secs s (progress every few seconds; crashes are written to $corpus.crash-*)"
"$bin" -max_total_time="$secs" -print_final_stats=1 -timeout=20 -rss_limit_mb=2048 \
    -artifact_prefix="$corpus.crash-" "$corpus" > "$log" 2>&1 &
pid=$!
while kill -0 $pid 2>/dev/null; do
    sleep 10
    grep -E '^#[0-9]+' "$log" | tail -n 1
done
wait $pid
code=$?
runs=$(grep -E '^stat::number_of_executed_units' "$log" | tail -n 1 | awk '{print $2}')
grep -E 'Done [0-9]+ runs|ERROR|runtime error|fuzz check failed' "$log" | head -n 20
echo "fuzz executions: ${runs:-unknown}"
if [ "$code" -eq 0 ]; then echo "1 passed, 0 failed"; else echo "0 passed, 1 failed"; fi
exit $code

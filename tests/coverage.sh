#!/bin/sh
# Line and branch coverage of mha.h's implementation by the test programs
# (gcc --coverage, gcov). Usage: tests/coverage.sh BUILD_DIR
# Targets: >= 95 % of lines and >= 90 % of branches (taken at least once).
set -e
d=$1
rm -rf "$d" && mkdir -p "$d"
F="-O0 -g --coverage -std=c99 -Itests"
gcc $F -c tests/test_impl.c -o "$d/test_impl.o"
gcc $F tests/test_mha.c "$d/test_impl.o" -o "$d/test_mha" -lm
gcc $F tests/test_hostile.c "$d/test_impl.o" -o "$d/test_hostile" -lm
gcc $F tests/fuzz/fuzz_mha.c tests/fuzz/replay.c "$d/test_impl.o" -o "$d/replay" -lm
gcc $F tests/test_decode.c "$d/test_impl.o" -o "$d/test_decode" -lm
gcc $F tests/test_backward.c "$d/test_impl.o" -o "$d/test_backward" -lm
gcc $F tests/test_q8.c "$d/test_impl.o" -o "$d/test_q8" -lm
gcc $F tests/test_q16.c "$d/test_impl.o" -o "$d/test_q16" -lm
${PYTHON:-/usr/bin/python3} tests/q8_ref.py "$d/q8_cases.bin" --cases 300 > /dev/null
${PYTHON:-/usr/bin/python3} tests/q16_ref.py "$d/q16_cases.bin" --cases 1000 > /dev/null
"$d/test_mha" > /dev/null
"$d/test_decode" > /dev/null
"$d/test_backward" > /dev/null
"$d/test_hostile" > /dev/null
"$d/test_q8" "$d/q8_cases.bin" > /dev/null
"$d/test_q16" "$d/q16_cases.bin" > /dev/null
"$d/replay" tests/fuzz/corpus/* > /dev/null
# gcov reports every file of the object; keep mha.h
gcov -b -c -o "$d" "$d/test_impl.o" > "$d/gcov.txt" 2>&1 || true
mv ./*.gcov "$d/" 2>/dev/null || true
awk '/^File .*mha\.h/{f=1} f&&/^Lines executed/{print; } f&&/^Branches executed/{print} f&&/^Taken at least once/{print; exit}' "$d/gcov.txt"
lines=$(awk '/^File .*mha\.h/{f=1} f&&/^Lines executed/{sub(/Lines executed:/,""); sub(/%.*/,""); print; exit}' "$d/gcov.txt")
branches=$(awk '/^File .*mha\.h/{f=1} f&&/^Taken at least once/{sub(/Taken at least once:/,""); sub(/%.*/,""); print; exit}' "$d/gcov.txt")
echo "mha.h coverage: lines $lines %, branches taken $branches %"
echo "lines never run:"
grep -n '#####' "$d/mha.h.gcov" | sed 's/^/  /' | head -n 40 || true
echo "branches never taken (gcov line: count):"
awk '/^ +[-#0-9]+:/{line=$0} /taken 0( |$)|never executed/{print "  " substr(line, 1, 110)}' "$d/mha.h.gcov" | uniq | head -n 40
ok=$(awk -v l="$lines" -v b="$branches" 'BEGIN{print (l >= 95 && b >= 90) ? 1 : 0}')
if [ "$ok" = 1 ]; then echo "1 passed, 0 failed"; else echo "0 passed, 1 failed"; exit 1; fi

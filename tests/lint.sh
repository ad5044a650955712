#!/bin/sh
# Static analysis of mha.h: cppcheck (warning, portability, performance) and
# clang-tidy with the checks in .clang-tidy. Any finding fails.
passed=0
failed=0
run() {
    name=$1; shift
    if out=$("$@" 2>&1) && ! printf '%s\n' "$out" | grep -qE 'warning:|error:'; then
        echo "lint $name: clean"; passed=$((passed + 1))
    else
        printf '%s\n' "$out"; echo "lint $name: FINDINGS"; failed=$((failed + 1))
    fi
}
run "cppcheck" cppcheck --enable=warning,portability,performance --std=c99 --error-exitcode=1 -q \
    -D MHA_IMPLEMENTATION tests/test_impl.c
run "cppcheck MHA_STATIC" cppcheck --enable=warning,portability,performance --std=c99 --error-exitcode=1 -q \
    -D MHA_IMPLEMENTATION -D MHA_STATIC=1 tests/static_a.c
run "cppcheck MHA_FAST" cppcheck --enable=warning,portability,performance --std=c99 --error-exitcode=1 -q \
    -D MHA_IMPLEMENTATION -D MHA_FAST=1 -D MHA_NO_SIMD=1 tests/test_impl.c
run "clang-tidy" clang-tidy -quiet tests/test_impl.c -- -std=c99
run "clang-tidy MHA_FAST portable" clang-tidy -quiet tests/test_impl.c -- -std=c99 -DMHA_FAST=1 -DMHA_NO_SIMD=1
run "clang-tidy MHA_FAST AVX2" clang-tidy -quiet tests/test_impl.c -- -std=c99 -DMHA_FAST=1 -mavx2 -mfma
run "clang-tidy C++" clang-tidy -quiet tests/cpp_tu.cpp -- -std=c++11
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

#!/bin/sh
# The compiler matrix: every build is warning-free under -Werror and every
# program it builds (examples, contract tests, the suite and the hostile-input
# tests) runs and passes. One line per build, then a total.
# The builds run JOBS at a time (default: one per core), each in its own
# folder; their lines and logs are shown in the order below.
# Usage: tests/matrix.sh [--one K]   (--one: build K alone, as the pool does)
B=${BUILD:-build}/matrix
one=""
if [ "${1:-}" = --one ]; then one=$2; B="$B/$one"; fi
mkdir -p "$B"
STRICT="-std=c99 -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wdouble-promotion -Wvla -Werror"
SUITE="tests/test_mha.c tests/test_impl.c"
HOSTILE="tests/test_hostile.c tests/test_impl.c"
log="$B/log.txt"
[ -n "$one" ] && : > "$log"
RUN32=""
[ -n "$one" ] && RUN32=$(sh tests/runner32.sh "$B") # how -m32 programs run here: natively or under qemu-i386
count=0

stage() { # stage NAME COMMAND...: one build (and run) of the matrix, when it is build $one
    count=$((count + 1))
    [ "$count" = "$one" ] || return 0
    name=$1; shift
    t0=$(date +%s)
    if ( "$@" ) >> "$log" 2>&1; then
        echo "matrix $name: ok ($(($(date +%s) - t0)) s)"
    else
        echo "matrix $name: FAILED ($(($(date +%s) - t0)) s)"
        tail -n 20 "$log"
    fi
}
run_as() { # run_as FLAGS...: the runner of a program built with FLAGS (qemu-i386 for -m32 where needed)
    case " $* " in *" -m32 "*) echo "$RUN32" ;; esac
}
# the examples compiled whole, the implementation in each (make test links most of them against
# the implementation built once): all eight under gcc -O2, gcc -O0 and clang ("all"); in the other
# strict builds ("some": another word size or option) firmware_static whole (it sets options of its
# own) and the rest linked against that build's strict implementation object, whose warnings are
# those of every whole compile of the same options
EXAMPLES="encoder_block parallel_packed seed_questions self_attention cross_attention decode speculative"
strict_cc() { # strict_cc all|some CC EXTRA: implementation, examples and the suite under one compiler
    link=""
    [ "$1" = some ] && link="-DMHA_IMPLEMENTATION_INCLUDED"
    shift
    cc=$1; shift
    x=$(run_as "$@")
    $cc $STRICT -O2 "$@" -c tests/test_impl.c -o "$B/impl.o" &&
    $cc $STRICT -O2 "$@" -I. examples/firmware_static.c -o "$B/firmware_static" -lm &&
    $x "$B/firmware_static" > /dev/null &&
    for e in $EXAMPLES; do
        $cc $STRICT -O2 "$@" $link -I. examples/$e.c ${link:+"$B/impl.o"} -o "$B/$e" -lm -pthread &&
            $x "$B/$e" > /dev/null || return 1
    done &&
    $cc $STRICT -O2 "$@" tests/static_a.c tests/static_b.c tests/static_main.c -o "$B/static" -lm && $x "$B/static" &&
    $cc $STRICT -O2 "$@" tests/include_twice.c -o "$B/twice" -lm && $x "$B/twice" &&
    $cc -O2 -std=c99 -Wall -Wextra -Werror "$@" -Itests tests/test_mha.c "$B/impl.o" -o "$B/suite" -lm &&
    $x "$B/suite" > /dev/null &&
    $cc -O2 -std=c99 -Wall -Wextra -Werror "$@" -Itests tests/test_hostile.c "$B/impl.o" -o "$B/hostile" -lm &&
    $x "$B/hostile" > /dev/null
}
stage "gcc -std=c99 strict -O2" strict_cc all gcc
stage "gcc -std=c99 strict -O0" strict_cc all gcc -O0
stage "clang -std=c99 strict -O2" strict_cc all clang
stage "gcc -m32 strict" strict_cc some gcc -m32
stage "gcc MHA_NO_STATUS_STRINGS=1" strict_cc some gcc -DMHA_NO_STATUS_STRINGS=1
stage "gcc MHA_NO_LIBM=1" strict_cc some gcc -DMHA_NO_LIBM=1
stage "clang MHA_NO_LIBM=1 -m32" strict_cc some clang -DMHA_NO_LIBM=1 -m32
stage "gcc MHA_NO_ADDITIVE=1 (suite: additive refused)" sh -c \
    "gcc $STRICT -O2 -DMHA_NO_ADDITIVE=1 -c tests/test_impl.c -o $B/noadd.o &&
     gcc -O2 -std=c99 -DMHA_NO_ADDITIVE=1 -Itests tests/test_mha.c $B/noadd.o -o $B/suite_noadd -lm &&
     $B/suite_noadd > /dev/null"
stage "gcc MHA_NO_EXTRAS=1 (suite and hostile: RoPE, ALiBi, soft-cap, sinks refused)" sh -c \
    "gcc $STRICT -O2 -DMHA_NO_EXTRAS=1 -c tests/test_impl.c -o $B/noext.o &&
     gcc -O2 -std=c99 -DMHA_NO_EXTRAS=1 -Itests tests/test_mha.c $B/noext.o -o $B/suite_noext -lm &&
     $B/suite_noext > /dev/null &&
     gcc $STRICT -O2 -DMHA_NO_EXTRAS=1 -DMHA_FAST=1 -c tests/test_impl.c -o $B/fnoext.o &&
     gcc -O2 -std=c99 -DMHA_NO_EXTRAS=1 -DMHA_FAST=1 -Itests tests/test_mha.c $B/fnoext.o -o $B/fsuite_noext -lm &&
     $B/fsuite_noext > /dev/null &&
     gcc -O2 -std=c99 -DMHA_NO_EXTRAS=1 -Itests tests/test_hostile.c $B/noext.o -o $B/hostile_noext -lm &&
     $B/hostile_noext > /dev/null"
stage "freestanding, no libm: no undefined symbol but memcpy/memset" sh -c \
    "gcc $STRICT -O2 -ffreestanding -DMHA_NO_LIBM=1 -c tests/test_impl.c -o $B/free.o &&
     ! nm -u $B/free.o | grep -vE ' (memcpy|memset)\$'"
stage "g++ -std=c++11 (implementation as C++)" sh -c \
    "g++ -std=c++11 -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Werror -O2 tests/cpp_tu.cpp -o $B/cpp && $B/cpp &&
     g++ -std=c++11 -Wall -Wextra -Werror -x c++ -c tests/test_impl.c -o $B/impl_cpp.o"
stage "clang++ -std=c++11" sh -c \
    "clang++ -std=c++11 -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Werror -O2 tests/cpp_tu.cpp -o $B/cpp2 && $B/cpp2"
stage "tcc" sh -c "tcc -Itests $SUITE -o $B/suite_tcc -lm && $B/suite_tcc > /dev/null &&
    tcc -Itests $HOSTILE -o $B/hostile_tcc -lm && $B/hostile_tcc > /dev/null"
# The fast path (MHA_FAST 1) under the same strict flags, for each vector unit
# and compiler; test_fast checks it against the reference path.
fast_cc() { # fast_cc CC FLAGS...: strict implementation, the suite on the fast path and test_fast
    # (under qemu-i386, test_fast small, with 4 random problems and every 3301st float: the cross
    # i386 target runs the same code with more)
    cc=$1; shift
    x=$(run_as "$@")
    $cc $STRICT -DMHA_FAST=1 "$@" -O2 -c tests/test_impl.c -o "$B/fimpl.o" &&
    $cc -O2 -std=c99 -Wall -Wextra -Werror -DMHA_FAST=1 "$@" -Itests tests/test_mha.c "$B/fimpl.o" -o "$B/fsuite" -lm &&
    $x "$B/fsuite" > /dev/null &&
    $cc -O2 -std=c99 -Wall -Wextra -Werror -DMHA_FAST=1 "$@" -Itests tests/test_hostile.c "$B/fimpl.o" -o "$B/fhostile" \
        -lm && $x "$B/fhostile" > /dev/null &&
    $cc -O2 -std=c99 -Wall -Wextra -Werror "$@" ${x:+-DTEST_FAST_SMALL=1} -Itests tests/test_fast.c "$B/fimpl.o" \
        -o "$B/ffast" -lm &&
    $x "$B/ffast" ${x:+4 3301} > /dev/null &&
    $cc -O2 -std=c99 -Wall -Wextra -Werror -DMHA_FAST=1 "$@" tests/fuzz/fuzz_mha.c tests/fuzz/replay.c \
        "$B/fimpl.o" -o "$B/freplay" -lm && $x "$B/freplay" tests/fuzz/corpus/* > /dev/null
}
has() { grep -qw "$1" /proc/cpuinfo 2>/dev/null; }
stage "gcc MHA_FAST=1 portable (MHA_NO_SIMD=1)" fast_cc gcc -DMHA_NO_SIMD=1
stage "clang MHA_FAST=1 portable -O2 (MHA_NO_SIMD=1)" fast_cc clang -DMHA_NO_SIMD=1
stage "gcc MHA_FAST=1 portable -m32" fast_cc gcc -DMHA_NO_SIMD=1 -m32
if has avx2 && has fma; then
    stage "gcc MHA_FAST=1 AVX2+FMA" fast_cc gcc -mavx2 -mfma
    stage "clang MHA_FAST=1 AVX2+FMA" fast_cc clang -mavx2 -mfma
fi
if has avx512f; then
    stage "gcc MHA_FAST=1 AVX-512F" fast_cc gcc -mavx512f -mfma
    stage "clang MHA_FAST=1 AVX-512F" fast_cc clang -mavx512f -mfma
fi
# bf16 products (MHA_BF16_DOT=1): the implementation strict under each compiler
# (also as C++), test_bf16dot where the CPU has AVX512-BF16
bf16dot() { # bf16dot CC: strict implementation and test_bf16dot
    cc=$1
    $cc $STRICT -DMHA_FAST=1 -DMHA_BF16_DOT=1 -mavx512f -mfma -mavx512bf16 -O2 -c tests/test_impl.c -o "$B/bfimpl.o" &&
    $cc -O2 -std=c99 -Wall -Wextra -Werror -mavx512f -mfma -mavx512bf16 -Itests tests/test_bf16dot.c -o "$B/bf16dot" \
        -lm -pthread &&
    if has avx512_bf16; then "$B/bf16dot" > /dev/null; fi
}
stage "gcc MHA_BF16_DOT=1 AVX512-BF16" bf16dot gcc
stage "clang MHA_BF16_DOT=1 AVX512-BF16" bf16dot clang
stage "g++ MHA_BF16_DOT=1 (implementation as C++)" sh -c \
    "g++ -std=c++11 -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Werror -O2 -DMHA_FAST=1 -DMHA_BF16_DOT=1 \
         -mavx512f -mfma -mavx512bf16 -x c++ -c tests/test_impl.c -o $B/bfcpp.o"
stage "g++ MHA_FAST=1 (implementation as C++: AVX-512F, AVX2 and portable)" sh -c \
    "g++ -std=c++11 -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Werror -O2 -DMHA_FAST=1 -mavx512f -mfma \
         -x c++ -c tests/test_impl.c -o $B/fcpp512.o &&
     g++ -std=c++11 -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Werror -O2 -DMHA_FAST=1 -mavx2 -mfma \
         -x c++ -c tests/test_impl.c -o $B/fcpp.o &&
     g++ -std=c++11 -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Werror -O2 -DMHA_FAST=1 -DMHA_NO_SIMD=1 \
         -x c++ -c tests/test_impl.c -o $B/fcpp2.o"
stage "tcc MHA_FAST=1 (portable)" sh -c "tcc -DMHA_FAST=1 -Itests tests/test_fast.c tests/test_impl.c -o $B/fast_tcc -lm &&
    $B/fast_tcc > /dev/null"
stage "freestanding MHA_FAST=1, no libm: no undefined symbol but memcpy/memset" sh -c \
    "gcc $STRICT -O2 -ffreestanding -DMHA_FAST=1 -DMHA_NO_LIBM=1 -mavx2 -mfma -c tests/test_impl.c -o $B/ffree.o &&
     ! nm -u $B/ffree.o | grep -vE ' (memcpy|memset)\$'"
stage "MHA_STATIC=2 is rejected" sh -c "! gcc -DMHA_STATIC=2 -c tests/test_impl.c -o $B/bad.o"
stage "MHA_FAST=2 is rejected" sh -c "! gcc -DMHA_FAST=2 -c tests/test_impl.c -o $B/bad2.o"
stage "MHA_BF16_DOT=2 is rejected" sh -c "! gcc -DMHA_BF16_DOT=2 -c tests/test_impl.c -o $B/bad3.o"
stage "declarations include only stddef.h and stdint.h" sh tests/check_includes.sh
# the README's quick start as C99 and C++11 under gcc, clang, g++ and clang++ (make test compares
# it with examples/quickstart.c and runs that)
stage "the README's quick start under gcc, clang, g++, clang++" sh -c \
    "sh tests/readme_snippet.sh $B/snippet all | grep -q '^[1-9][0-9]* passed, 0 failed\$'"
[ -n "$one" ] && exit 0
# the pool: every build once, JOBS at a time, then the lines in order and the total
jobs=${JOBS:-$(nproc 2>/dev/null || echo 1)}
rm -rf "$B"/[0-9]*
seq 1 "$count" | xargs -P "$jobs" -I{} sh -c 'sh tests/matrix.sh --one "$1" > "$2/out.$1" 2>&1' sh {} "$B"
passed=0
failed=0
k=0
while [ "$k" -lt "$count" ]; do
    k=$((k + 1))
    cat "$B/out.$k"
    if grep -q ': ok ([0-9]* s)$' "$B/out.$k"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

#!/bin/sh
# make cross-test: the tests on the machines firmware ships on, under
# emulators from Debian packages. Each target prints its own
# "N passed, M failed"; the last line is the total over all targets.
#   Cortex-M4F (mps2-an386), Cortex-M3 soft float (mps2-an385), Cortex-M33
#   (mps2-an505), Cortex-M7 (mps2-an500) and Cortex-M55 with Helium
#   (mps3-an547) under qemu-system-arm with semihosting: the PyTorch vector
#   suite (also with MHA_NO_LIBM=1), the hostile-input tests, decoding
#   against the forward pass (tests/test_decode.c with TEST_DECODE_SMALL: no
#   long caches), the backward pass (tests/test_backward.c), the math ulp test, and examples/firmware (built without a
#   C library, checked with nm for a heap); on the M55 also the fast path
#   with its Helium kernels (tests/test_fast.c with TEST_FAST_SMALL, the
#   vectors and the decoding tests with MHA_FAST 1); on the M4F also
#   the trained digit classifier (examples/digits: every image against
#   PyTorch) and its instructions per image (tests/cross/count_insns.py), and
#   the training example (examples/train: its loss curve against PyTorch's);
#   AVR ATmega2560 under simavr: a reduced vector set (tests/ref_vectors_small.h)
#   and each of its cases decoded token by token; the int8 path on four tiny
#   cases (tests/ref_q8_tiny.h);
#   the int8 path (tests/test_q8.c) bit for bit against tests/q8_ref.py (numpy):
#   on the Cortex-M cores its 12 cases of tests/ref_q8_small.h (with the DSP
#   extension's SMLAD products on the M4F, M7 and M33, Helium's VMLADAVA on
#   the M55, and with the plain C ones), and tests/q8_paths.c: each core's
#   int8 kernels against its plain C on 150 random problems of larger sizes
#   (and a decoding step each), bit for bit;
#   on the Linux targets also 1000 written here; there too the 16x8 path
#   (tests/test_q16.c) on the 1000 cases of tests/q16_ref.py, bit for bit, and
#   on the Cortex-M cores on the 12 of tests/ref_q16_small.h (with the core's
#   DSP/Helium products and with the plain C ones), on the ATmega2560
#   on the 3 of tests/ref_q16_tiny.h;
#   s390x (big-endian) and aarch64 under qemu-user, and i386 (-m32): every test
#   program, the fuzz corpus replay and the threads test included, and the
#   fast path (MHA_FAST 1: NEON on aarch64, portable elsewhere) against the
#   reference, plus the suite and the decoding tests on it (lighter where
#   emulation is slowest: see linux() below);
#   Cortex-M0+ and RISC-V rv32imac: compile only, with -Werror;
#   a bare Cortex-M4F image around mha.h, checked with nm for heap and
#   double-precision helpers; instructions per inference of a keyword-spotting
#   sized layer on the Cortex-M3, M4F, M7, M33 and M55 (tests/cross/insn_report.py).
#   The targets run JOBS at a time (default: one per core); their outputs are
#   shown in the order below. Usage: cross_test.sh [--one K] (K: target K alone).
B=${BUILD:-build}/cross
one=""
[ "${1:-}" = --one ] && one=$2
mkdir -p "$B"
STRICT="-std=c99 -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wdouble-promotion -Wvla -Werror"
SUITE="tests/test_mha.c tests/test_impl.c"
CORPUS=$(ls tests/fuzz/corpus/* | tr '\n' ' ')
total_p=0; total_f=0
count=0
target() { # target: true when the next target is the one to run (--one K)
    count=$((count + 1))
    [ "$count" = "$one" ]
}

add() { # add LABEL OUTPUT: adds the last "N passed, M failed" of OUTPUT
    line=$(printf '%s\n' "$2" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -n 1)
    if [ -z "$line" ]; then p=0; f=1; else p=${line%% passed*}; f=${line#*passed, }; f=${f%% failed*}; fi
    total_p=$((total_p + p)); total_f=$((total_f + f))
    echo "cross $1: $p passed, $f failed"
}
build() { # build OUT COMPILER ARGS...: a failed build is one failure
    out=$1; shift
    if ! "$@" -o "$out" > "$out.log" 2>&1; then cat "$out.log"; return 1; fi
}

# ---- Cortex-M under qemu-system-arm --------------------------------------
cortexm() { # cortexm NAME MACHINE MEMDIR CFLAGS...
    name=$1; machine=$2; mem=$3; shift 3
    cc="arm-none-eabi-gcc $* -mthumb -O2 -std=c99 -Itests --specs=rdimon.specs -Ltests/cross/$mem -T tests/cross/cortexm.ld tests/cross/cortexm_startup.c"
    # examples/firmware: no C library at all (its own output through semihosting), so no heap either
    fwcc="arm-none-eabi-gcc $* -mthumb -O2 -std=c99 -nostartfiles -DCORTEXM_NO_LIBC=1 -ffunction-sections \
        -fdata-sections -Wl,--gc-sections -Ltests/cross/$mem -T tests/cross/cortexm.ld tests/cross/cortexm_startup.c"
    run="qemu-system-arm -M $machine -nographic -semihosting -kernel"
    ok=1
    # the implementation once, linked into the programs that use only its public functions
    build "$B/$name-impl.o" arm-none-eabi-gcc $* -mthumb -O2 -std=c99 -c tests/test_impl.c || ok=0
    build "$B/$name-mha.elf" $cc tests/test_mha.c "$B/$name-impl.o" -lm || ok=0
    build "$B/$name-mha-nolibm.elf" $cc -DMHA_NO_LIBM=1 $SUITE -lm || ok=0 # -lm: for the tests' own use
    build "$B/$name-hostile.elf" $cc tests/test_hostile.c "$B/$name-impl.o" -lm || ok=0
    build "$B/$name-decode.elf" $cc -DTEST_DECODE_SMALL=1 tests/test_decode.c "$B/$name-impl.o" -lm || ok=0
    build "$B/$name-backward.elf" $cc tests/test_backward.c "$B/$name-impl.o" -lm || ok=0
    build "$B/$name-mathf.elf" $cc -DMATHF_STRIDE=40009u tests/test_mathf.c -lm || ok=0
    build "$B/$name-q8.elf" $cc -DQ8_EXP_STRIDE=97 tests/test_q8.c "$B/$name-impl.o" -lm || ok=0 # SMLAD where the core has DSP
    # and without the core's DSP/Helium products (MHA_Q8_NO_DSP): the int8 and 16x8 paths in plain C
    build "$B/$name-pimpl.o" arm-none-eabi-gcc $* -mthumb -O2 -std=c99 -DMHA_Q8_NO_DSP=1 -c tests/test_impl.c || ok=0
    build "$B/$name-q8-plain.elf" $cc -DQ8_EXP_STRIDE=97 tests/test_q8.c "$B/$name-pimpl.o" -lm || ok=0
    build "$B/$name-q8paths.elf" $cc tests/q8_paths.c tests/q8_paths_plain.c -lm || ok=0 # this core's kernels vs plain C
    build "$B/$name-q16.elf" $cc tests/test_q16.c "$B/$name-impl.o" -lm || ok=0
    build "$B/$name-q16-plain.elf" $cc tests/test_q16.c "$B/$name-pimpl.o" -lm || ok=0
    build "$B/$name-firmware.elf" $fwcc -Iexamples/firmware examples/firmware/main.c || ok=0
    helium=""
    if [ "$name" = cortex-m55 ]; then # the fast path's Helium kernels (MHA_FAST 1) against the reference
        build "$B/$name-fimpl.o" arm-none-eabi-gcc $* -mthumb -O2 -std=c99 -DMHA_FAST=1 -c tests/test_impl.c || ok=0
        build "$B/$name-fast.elf" $cc -DTEST_FAST_SMALL=1 tests/test_fast.c "$B/$name-fimpl.o" -lm || ok=0
        build "$B/$name-mha-fast.elf" $cc -DMHA_FAST=1 tests/test_mha.c "$B/$name-fimpl.o" -lm || ok=0
        build "$B/$name-decode-fast.elf" $cc -DMHA_FAST=1 -DTEST_DECODE_SMALL=1 tests/test_decode.c "$B/$name-fimpl.o" \
            -lm || ok=0
        # the int8 Helium kernels at -Os too (the exact rescale alone, the vector helpers called), and the 16x8
        # path's -Os form (one row at a time in plain C)
        build "$B/$name-osimpl.o" arm-none-eabi-gcc $* -mthumb -Os -std=c99 -c tests/test_impl.c || ok=0
        build "$B/$name-q8-os.elf" $cc -Os -DQ8_EXP_STRIDE=97 tests/test_q8.c "$B/$name-osimpl.o" -lm || ok=0
        build "$B/$name-q16-os.elf" $cc -Os tests/test_q16.c "$B/$name-osimpl.o" -lm || ok=0
        build "$B/$name-q8paths-os.elf" $cc -Os tests/q8_paths.c tests/q8_paths_plain.c -lm || ok=0
        helium="timeout 300 $run $B/$name-fast.elf|timeout 300 $run $B/$name-mha-fast.elf|timeout 300 $run $B/$name-decode-fast.elf"
        helium="$helium|timeout 300 $run $B/$name-q8-os.elf|timeout 300 $run $B/$name-q8paths-os.elf"
        helium="$helium|timeout 300 $run $B/$name-q16-os.elf"
    fi
    if [ $ok = 0 ]; then add "$name build" ""; return; fi
    out=$(RUN_JOBS=${JOBS:-$(nproc 2>/dev/null || echo 1)} sh tests/run.sh "timeout 300 $run $B/$name-mha.elf" "timeout 300 $run $B/$name-mha-nolibm.elf" \
        "timeout 300 $run $B/$name-hostile.elf" "timeout 300 $run $B/$name-decode.elf" \
        "timeout 300 $run $B/$name-backward.elf" "timeout 300 $run $B/$name-mathf.elf" \
        "timeout 300 $run $B/$name-q8.elf" "timeout 300 $run $B/$name-q8-plain.elf" "timeout 300 $run $B/$name-q8paths.elf" \
        "timeout 300 $run $B/$name-q16.elf" "timeout 300 $run $B/$name-q16-plain.elf" "timeout 60 $run $B/$name-firmware.elf" "sh tests/cross/no_heap.sh $B/$name-firmware.elf" 2>&1)
    if [ -n "$helium" ]; then
        out2=$(IFS='|'; sh tests/run.sh $helium 2>&1)
        printf '%s\n' "$out2" | grep -E '^== |passed,|ulp|random problems|FAIL|fault|^q16: [0-9]'
        add "$name Helium fast path" "$out2"
    fi
    printf '%s\n' "$out" | grep -E '^== |passed,|ulp|FAIL|firmware|fault|^q8: [0-9]|^q8 paths|^q16 paths|^q16: [0-9]'
    add "$name" "$out"
}
target && cortexm cortex-m4f mps2-an386 mps2 -mcpu=cortex-m4 -mfloat-abi=hard -mfpu=fpv4-sp-d16
target && cortexm cortex-m3 mps2-an385 mps2 -mcpu=cortex-m3 -mfloat-abi=soft
target && cortexm cortex-m33 mps2-an505 an505 -mcpu=cortex-m33 -mfloat-abi=hard -mfpu=fpv5-sp-d16
target && cortexm cortex-m7 mps2-an500 mps2 -mcpu=cortex-m7 -mfloat-abi=hard -mfpu=fpv5-sp-d16
target && cortexm cortex-m55 mps3-an547 an547 -mcpu=cortex-m55 -mfloat-abi=hard
# ---- trained models on the Cortex-M4F: the digit classifier, every image, and its instruction count
m4f="arm-none-eabi-gcc -mcpu=cortex-m4 -mfloat-abi=hard -mfpu=fpv4-sp-d16 -mthumb -O2 -std=c99 -Itests -I. \
    -Iexamples --specs=rdimon.specs -Ltests/cross/mps2 -T tests/cross/cortexm.ld tests/cross/cortexm_startup.c"
# (and with both attention layers in int8: examples/digits/quantize.py's calibration, mha_forward_q8)
if ! target; then :
elif build "$B/digits.elf" $m4f examples/digits/digits.c -lm &&
   build "$B/digits-count.elf" $m4f -DDG_COUNT=3 examples/digits/digits.c -lm &&
   ${PYTHON:-/usr/bin/python3} examples/digits/quantize.py examples/digits/digits_model.h "$B/digits_q8.h" &&
   build "$B/digits-q8.elf" $m4f -DDG_Q8 -I"$B" examples/digits/digits.c -lm &&
   build "$B/digits-q8-count.elf" $m4f -DDG_Q8 -DDG_COUNT=3 -I"$B" examples/digits/digits.c -lm; then
    out=$(sh tests/run.sh "timeout 300 qemu-system-arm -M mps2-an386 -nographic -semihosting -kernel $B/digits.elf" \
        "${PYTHON:-/usr/bin/python3} tests/cross/count_insns.py mps2-an386 $B/digits-count.elf dg_mark digits" \
        "timeout 300 qemu-system-arm -M mps2-an386 -nographic -semihosting -kernel $B/digits-q8.elf" \
        "${PYTHON:-/usr/bin/python3} tests/cross/count_insns.py mps2-an386 $B/digits-q8-count.elf dg_mark digits-int8" 2>&1)
    printf '%s\n' "$out" | grep -E '^digits|passed,|FAIL'
    add "cortex-m4f digits" "$out"
else
    add "cortex-m4f digits build" ""
fi
# ---- training on the Cortex-M4F: examples/train, its loss curve against PyTorch's
if ! target; then :
elif build "$B/train.elf" $m4f -Iexamples/train examples/train/train.c -lm; then
    out=$(sh tests/run.sh "timeout 300 qemu-system-arm -M mps2-an386 -nographic -semihosting -kernel $B/train.elf" 2>&1)
    printf '%s\n' "$out" | grep -E '^largest|passed,|FAIL'
    add "cortex-m4f training (examples/train)" "$out"
else
    add "cortex-m4f training build" ""
fi

# ---- instructions per inference on every emulated Cortex-M core (README table) ----
if target; then
    out=$(${PYTHON:-/usr/bin/python3} tests/cross/insn_report.py 2>&1)
    printf '%s\n' "$out" | grep -E '^\||passed,'
    add "instructions per inference (Cortex-M3, M4F, M7, M33, M55)" "$out"
fi
# ---- no heap, no double: a bare Cortex-M4F image around mha.h ---------------
if ! target; then :
elif build "$B/noheap.elf" arm-none-eabi-gcc -mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16 -Os \
        $STRICT -ffunction-sections -fdata-sections -nostartfiles -Wl,--gc-sections -Wl,--entry=noheap_reset \
        -Ltests/cross/mps2 -T tests/cross/cortexm.ld tests/cross/noheap.c -lc -lgcc; then
    bad=$(arm-none-eabi-nm "$B/noheap.elf" | grep -E ' (malloc|free|calloc|realloc|_malloc_r|_free_r|__aeabi_d[a-z0-9_]*)$')
    if [ -z "$bad" ]; then
        echo "noheap.elf: no malloc/free/calloc/realloc, no __aeabi_d* (nm)"
        add "cortex-m4f image: no heap, no double" "1 passed, 0 failed"
    else
        echo "$bad"; add "cortex-m4f image: no heap, no double" "0 passed, 1 failed"
    fi
else
    add "cortex-m4f no-heap image build" ""
fi

# ---- Linux targets: s390x and aarch64 under qemu-user, i386 natively -------
# (or under qemu-i386 where the kernel cannot run 32-bit programs)
linux() { # linux NAME RUNNER CC ARGS...
    name=$1; runner=$2; shift 2
    # s390x evaluates float in double under ISO C (FLT_EVAL_METHOD 1), which
    # -Wdouble-promotion reports; the GNU default (fast excess precision) does not.
    extra=""; [ "$name" = s390x ] && extra="-fexcess-precision=fast"
    # i386 under qemu-i386 (a kernel without 32-bit support) emulates the x87 unit about fifty
    # times slower than a core runs it: there the decoding tests leave out their long caches
    # (run natively and on aarch64), the math test takes every 4001st float, not 401st, and
    # test_fast 60 random problems and every 1331st float (not 240 and 331). On s390x the fast
    # path's decoding test leaves them out (its reference path's keeps them; 256-slot chunks make
    # the short caches span several).
    small=""; fsmall=""; stride=401u; fargs=""
    case "$name:$runner" in
    i386:qemu-i386) small="-DTEST_DECODE_SMALL=1"; fsmall=$small; stride=4001u; fargs=" 60 1331" ;;
    s390x:*) fsmall="-DTEST_DECODE_SMALL=1" ;;
    esac
    ok=1
    # the implementation once per path (the fast one with decoding's chunks of 256 slots, so that the
    # tests' caches span several), linked into the programs that use only its public functions
    build "$B/$name-impl.o" "$@" -O2 -std=c99 -c tests/test_impl.c || ok=0
    build "$B/$name-fimpl.o" "$@" -O2 -std=c99 -DMHA_FAST=1 "-DMHA__DCH=((size_t)256)" -c tests/test_impl.c || ok=0
    impl="$B/$name-impl.o"; fimpl="$B/$name-fimpl.o"
    build "$B/$name-mha" "$@" -O2 -std=c99 -Itests tests/test_mha.c "$impl" -lm || ok=0
    build "$B/$name-hostile" "$@" -O2 -std=c99 -Itests tests/test_hostile.c "$impl" -lm || ok=0
    build "$B/$name-replay" "$@" -O2 -std=c99 tests/fuzz/fuzz_mha.c tests/fuzz/replay.c "$impl" -lm || ok=0
    build "$B/$name-threads" "$@" -O2 -std=c99 -Itests tests/test_threads.c "$impl" -lm -pthread || ok=0
    build "$B/$name-mathf" "$@" -O2 -std=c99 -DMATHF_STRIDE=$stride -Itests tests/test_mathf.c -lm || ok=0
    build "$B/$name-static" "$@" -O2 $STRICT $extra tests/static_a.c tests/static_b.c tests/static_main.c -lm || ok=0
    build "$B/$name-twice" "$@" -O2 $STRICT $extra tests/include_twice.c -lm || ok=0
    # the fast path: NEON on aarch64, the portable code on s390x and i386
    build "$B/$name-fast" "$@" -O2 $STRICT $extra -Wno-conversion -Wno-double-promotion -Itests tests/test_fast.c \
        "$fimpl" -lm || ok=0
    build "$B/$name-mha-fast" "$@" -O2 -std=c99 -DMHA_FAST=1 -Itests tests/test_mha.c "$fimpl" -lm || ok=0
    build "$B/$name-decode" "$@" -O2 -std=c99 $small -Itests tests/test_decode.c "$impl" -lm || ok=0
    build "$B/$name-backward" "$@" -O2 -std=c99 -Itests tests/test_backward.c "$impl" -lm || ok=0
    build "$B/$name-backward-fast" "$@" -O2 -std=c99 -DMHA_FAST=1 -Itests tests/test_backward.c "$fimpl" -lm || ok=0
    build "$B/$name-decode-fast" "$@" -O2 -std=c99 -DMHA_FAST=1 $fsmall -Itests tests/test_decode.c "$fimpl" -lm ||
        ok=0
    build "$B/$name-q8" "$@" -O2 -std=c99 -DQ8_EXP_STRIDE=7 -Itests tests/test_q8.c "$impl" -lm || ok=0
    build "$B/$name-q16" "$@" -O2 -std=c99 -Itests tests/test_q16.c "$impl" -lm || ok=0
    # aarch64 also with MHA_NO_SIMD: the portable code in GNU C vectors on NEON registers
    fastp=""
    if [ "$name" = aarch64 ]; then
        build "$B/$name-fastp" "$@" -O2 $STRICT -Wno-conversion -Wno-double-promotion -DMHA_FAST=1 -DMHA_NO_SIMD=1 \
            -Itests tests/test_fast.c tests/test_impl.c -lm || ok=0
        fastp="$runner $B/$name-fastp"
    fi
    if [ $ok = 0 ]; then add "$name build" ""; return; fi
    out=$(RUN_JOBS=${JOBS:-$(nproc 2>/dev/null || echo 1)} sh tests/run.sh "$runner $B/$name-mha" "$runner $B/$name-hostile" "$runner $B/$name-replay $CORPUS" \
        "$runner $B/$name-threads" "$runner $B/$name-mathf" "$runner $B/$name-static" "$runner $B/$name-twice" \
        "$runner $B/$name-fast$fargs" "$runner $B/$name-mha-fast" "$runner $B/$name-decode" "$runner $B/$name-backward" \
        "$runner $B/$name-backward-fast" "$runner $B/$name-decode-fast" "$runner $B/$name-q8 $B/q8_cases.bin" \
        "$runner $B/$name-q16 $B/q16_cases.bin" ${fastp:+"$fastp"} 2>&1)
    printf '%s\n' "$out" | grep -E '^== |passed,|ulp|random problems|FAIL|^q8: [0-9]|^q16: [0-9]' | sed "s|$CORPUS|corpus|"
    add "$name" "$out"
}
target && linux s390x qemu-s390x s390x-linux-gnu-gcc -static
target && linux aarch64 qemu-aarch64 aarch64-linux-gnu-gcc-12 -static
target && linux i386 "$(sh tests/runner32.sh "$B")" gcc -m32

# ---- AVR ATmega2560 under simavr --------------------------------------------
# (the linker drops what a program does not call: the 16x8 path's tables, 2 KB, would otherwise be copied to
# the 8 KiB of RAM)
AVRGC="-ffunction-sections -fdata-sections -Wl,--gc-sections"
if ! target; then :
elif build "$B/avr.elf" avr-gcc -mmcu=atmega2560 -Os -std=c99 -Wall -Wextra -DF_CPU=16000000UL -DMHA_NO_LIBM=1 $AVRGC -Itests \
        tests/cross/avr_test.c tests/test_impl.c; then
    # simavr prints each UART line in colour and ends it with a '.'
    out=$(timeout 300 simavr -m atmega2560 -f 16000000 "$B/avr.elf" 2>&1 | sed -e 's/\x1b\[[0-9;]*m//g' -e 's/\.$//')
    printf '%s\n' "$out" | grep -vE '^\s*$' | tail -n 8
    add "avr-atmega2560" "$out"
else
    add "avr-atmega2560 build" ""
fi
# the int8 path there: four tiny cases of tests/q8_ref.py bit for bit, bad input, 16-bit size_t counts;
# without the status strings (AVR copies string constants to its 8 KiB of RAM, where the test's own fill most)
if ! target; then :
elif build "$B/avr-q8.elf" avr-gcc -mmcu=atmega2560 -Os -std=c99 -Wall -Wextra -DF_CPU=16000000UL -DMHA_NO_LIBM=1 $AVRGC \
        -DMHA_NO_STATUS_STRINGS=1 \
        -DQ8_EXP_STRIDE=4099 '-DQ8_HEADER="ref_q8_tiny.h"' -Itests tests/test_q8.c tests/test_impl.c -lm; then
    out=$(timeout 300 simavr -m atmega2560 -f 16000000 "$B/avr-q8.elf" 2>&1 | sed -e 's/\x1b\[[0-9;]*m//g' -e 's/\.$//')
    printf '%s\n' "$out" | grep -E '^q8: [0-9]|passed,|FAIL'
    add "avr-atmega2560 int8" "$out"
else
    add "avr-atmega2560 int8 build" ""
fi
# the 16x8 path there: three tiny cases of tests/q16_ref.py bit for bit (held in flash: __flash, GNU C), their
# decodings, bad input
if ! target; then :
elif build "$B/avr-q16.elf" avr-gcc -mmcu=atmega2560 -Os -std=gnu99 -Wall -Wextra -DF_CPU=16000000UL -DMHA_NO_LIBM=1 $AVRGC \
        -DMHA_NO_STATUS_STRINGS=1 '-DQ16_HEADER="ref_q16_tiny.h"' -Itests tests/test_q16.c tests/test_impl.c -lm; then
    out=$(timeout 300 simavr -m atmega2560 -f 16000000 "$B/avr-q16.elf" 2>&1 | sed -e 's/\x1b\[[0-9;]*m//g' -e 's/\.$//')
    printf '%s\n' "$out" | grep -E '^q16: [0-9]|passed,|FAIL'
    add "avr-atmega2560 16x8" "$out"
else
    add "avr-atmega2560 16x8 build" ""
fi

# ---- compile only -----------------------------------------------------------
compile_only() { # compile_only NAME HOSTED CC ARGS...: HOSTED 1 also builds the libm configuration
    name=$1; hosted=$2; shift 2
    : > "$B/$name.log"
    if { [ "$hosted" = 0 ] || "$@" $STRICT -O2 -c tests/test_impl.c -o "$B/$name.o" >> "$B/$name.log" 2>&1; } &&
       "$@" $STRICT -O2 -DMHA_NO_LIBM=1 -ffreestanding -c tests/test_impl.c -o "$B/$name-free.o" >> "$B/$name.log" 2>&1 &&
       "$@" $STRICT -Os -DMHA_NO_LIBM=1 -DMHA_NO_ADDITIVE=1 -DMHA_NO_STATUS_STRINGS=1 -ffreestanding \
           -c tests/test_impl.c -o "$B/$name-small.o" >> "$B/$name.log" 2>&1; then
        add "$name (compile only, -Werror)" "1 passed, 0 failed"
    else
        cat "$B/$name.log"; add "$name (compile only)" ""
    fi
}
target && compile_only cortex-m0plus 1 arm-none-eabi-gcc -mcpu=cortex-m0plus -mthumb
# the Helium kernels (int8 products, and the fast path's) under the strict warnings
target && compile_only cortex-m55-fast 1 arm-none-eabi-gcc -mcpu=cortex-m55 -mthumb -mfloat-abi=hard -DMHA_FAST=1
# Debian's riscv64-unknown-elf-gcc comes without a libc: freestanding, MHA_NO_LIBM builds only
target && compile_only rv32imac 0 riscv64-unknown-elf-gcc -march=rv32imac -mabi=ilp32

[ -n "$one" ] && exit 0
# the pool: the int8 cases of tests/q8_ref.py (numpy) for test_q8 on the Linux targets first, then
# every target once, JOBS at a time, the longest first; their outputs in order, and the total
${PYTHON:-/usr/bin/python3} tests/q8_ref.py "$B/q8_cases.bin" --cases 1000 > /dev/null || rm -f "$B/q8_cases.bin"
${PYTHON:-/usr/bin/python3} tests/q16_ref.py "$B/q16_cases.bin" --cases 1000 > /dev/null || rm -f "$B/q16_cases.bin"
jobs=${JOBS:-$(nproc 2>/dev/null || echo 1)}
first="12 10 11 8" # the targets that take longest (i386, s390x, aarch64, the instruction report), started first
order="$first"
k=0
while [ "$k" -lt "$count" ]; do k=$((k + 1)); case " $first " in *" $k "*) ;; *) order="$order $k" ;; esac; done
printf '%s\n' $order | xargs -P "$jobs" -I{} sh -c \
    't0=$(date +%s); sh tests/cross/cross_test.sh --one "$1" > "$2/out.$1" 2>&1; echo "($(( $(date +%s) - t0 )) s)" >> "$2/out.$1"' \
    sh {} "$B"
k=0
while [ "$k" -lt "$count" ]; do
    k=$((k + 1))
    cat "$B/out.$k"
    lines=$(grep -E '^cross .*: [0-9]+ passed, [0-9]+ failed$' "$B/out.$k")
    if [ -z "$lines" ]; then echo "cross target $k: no result"; total_f=$((total_f + 1)); continue; fi
    for p in $(printf '%s\n' "$lines" | sed -E 's/.*: ([0-9]+) passed, [0-9]+ failed$/\1/'); do total_p=$((total_p + p)); done
    for f in $(printf '%s\n' "$lines" | sed -E 's/.*: [0-9]+ passed, ([0-9]+) failed$/\1/'); do total_f=$((total_f + f)); done
done
echo "$total_p passed, $total_f failed"
[ "$total_f" -eq 0 ]

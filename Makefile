# mha.h - build, test and install.
#   make            build the tests and examples
#   make test       the test suite (last line: N passed, M failed)
#   make run        the main demo: a transformer encoder block trained in PyTorch, run in C (examples/encoder_block)
#   make models     retrain the digit classifier and the tiny language model (examples/digits, examples/tinylm)
#                   from scratch and check their C programs against the retrained models (python3-torch, -sklearn)
#   make sanitize   suite, hostile tests and fuzz corpus under -fsanitize=address,undefined (clang)
#   make matrix     strict builds with gcc, clang, g++, tcc and -m32, each run
#   make refcheck   regenerate the PyTorch vectors into a scratch folder and run the suite on them
#   make valgrind   the test programs (not the math sweep) under valgrind memcheck (--error-exitcode=1)
#   make tsan       the threads test, and the fast path on two threads, under -fsanitize=thread (clang)
#   make fuzz       libFuzzer for FUZZ_SECONDS (default 60) seconds (clang); make fuzz-fast: on the fast path,
#                   once per vector unit (portable, and AVX2, AVX-512 where the CPU has them)
#   make mathf-sweep exp and tanh of every build against libm, every SWEEP_STRIDE-th float (default 1: all)
#   make accuracy   mha.h's error against float64 beside PyTorch fp32's, every build (python3-torch)
#   make coverage   line and branch coverage of mha.h by the suite (gcc, gcov)
#   make lint       cppcheck and clang-tidy (config in .clang-tidy)
#   make cross-test the tests on Cortex-M, AVR, s390x, aarch64 and i386 (emulated)
#   make size       the size and stack table of docs/firmware.md, regenerated
#   make bench      the fast path on the benchmark shapes: time, GFLOP/s, % of peak, threads, vs reference;
#                   then decoding steps: GB/s, % of the measured bandwidth, 2 threads, vs a llama2.c-style loop
#   make peers      mha.h against PyTorch, OpenBLAS and oneDNN compositions (and ONNX Runtime
#                   after make ort), alternating, one thread and two (bench/peers.py); draws
#                   build/peers.png and build/decode.png (python3-matplotlib)
#   make callgrind  instruction counts of one call on shapes T and M (bench/callgrind.sh)
#   make install    mha.h, LICENSE, mha.pc and the CMake package under $(DESTDIR)$(PREFIX); make uninstall
#   make export-test the PyTorch exporter's round trip (python3-torch)
#   make install-test  install into a scratch prefix; pkg-config, find_package and FetchContent consumers

CC      ?= cc
CXX     ?= c++
# Python: PYTHON, unless given, is the first of python3 (on PATH) and /usr/bin/python3 that can
# import numpy (else python3); PYTORCH, for the targets that need PyTorch, the first of PYTHON,
# python3 and /usr/bin/python3 that can import torch, looked for only when such a target runs.
# A target whose modules are missing says which in one line and stops (NEED).
PYFIRST = $(firstword $(foreach p,$(2),$(if $(shell $(p) -c 'import $(1)' > /dev/null 2>&1 && echo y),$(p))))
ifeq ($(origin PYTHON),undefined)
PYTHON := $(or $(call PYFIRST,numpy,python3 /usr/bin/python3),python3)
endif
PYTORCH ?= $(eval PYTORCH := $(or $(call PYFIRST,torch,$(PYTHON) python3 /usr/bin/python3),$(PYTHON)))$(PYTORCH)
COMMA := ,
SPACE := $(subst ,, )
NEED = @$(PYTORCH) -c 'import $(subst $(SPACE),$(COMMA),$(strip $(1)))' > /dev/null 2>&1 || { echo "make $@ needs a python3 that can import: \
       $(1) ($(PYTORCH) cannot); Debian: python3-torch, python3-numpy, python3-sklearn; or PYTORCH=a-python3"; \
       exit 1; }
export PYTHON
PREFIX  ?= /usr/local
BUILD   ?= build
SCRATCH ?= $(BUILD)/scratch
STRICT   = -std=c99 -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wdouble-promotion -Wvla -Werror
CFLAGS  ?= -O2 # (no -g: the builds are shorter; CFLAGS="-O2 -g" to debug)
LDLIBS   = -lm

SUITE    = tests/test_mha.c tests/test_impl.c
SUITEDEP = $(SUITE) tests/test_util.h tests/ref_case.h tests/ref_vectors.h mha.h
HOSTILE  = tests/test_hostile.c tests/test_impl.c
REPLAY   = tests/fuzz/fuzz_mha.c tests/fuzz/replay.c tests/test_impl.c
THREADS  = tests/test_threads.c tests/test_impl.c
TESTDEP  = mha.h tests/test_util.h tests/naive_ref.h
# The test programs' flags: the strict set less -Wconversion/-Wdouble-promotion (the tests
# compute in double on purpose); `make matrix` holds the implementation to the full strict set.
TFLAGS   = $(CFLAGS) $(STRICT) -Wno-conversion -Wno-double-promotion -Itests
# The contract tests (the header included twice, MHA_STATIC pairs, C++, empty options), the
# examples and the trained models check what compiles and what a program computes, not its
# speed: -O0 keeps make test's build short (the language model: TLMFLAGS); the
# implementation's objects and the tests of private functions are built with CFLAGS.
OFLAGS   ?= -O0
EXFLAGS  ?= -O0
MODFLAGS ?= -O0
TLMFLAGS ?= -O1 # the language model (at -O0 its run, token by token, costs more than -O1 adds to its build)
CORPUS   = tests/fuzz/corpus/*
FUZZ_SECONDS ?= 60
# numpy writes three things at build time: the 1000 int8 cases of tests/q8_ref.py, the 1000
# 16x8 cases of tests/q16_ref.py and the quantised digit models of examples/digits/quantize.py
# (int8 and 16x8). Where $(PYTHON) cannot import it,
# make test builds and runs everything else and says in one line what it skipped.
# (.ci/run's no-numpy step copies the first make test's programs but these by name:
# q8_cases.bin, q16_cases.bin and digits_q*; a new file that numpy writes goes in that list too.)
HAVE_NUMPY := $(shell $(PYTHON) -c 'import numpy' > /dev/null 2>&1 && echo 1)
ifeq ($(HAVE_NUMPY),1)
Q8CASES  = $(BUILD)/q8_cases.bin
Q16CASES = $(BUILD)/q16_cases.bin
Q8MODELS = $(BUILD)/digits_q8 $(BUILD)/digits_q8p $(BUILD)/digits_q16
SKIPPED  =
else
Q8CASES  =
Q16CASES =
Q8MODELS =
SKIPPED  = skipped, $(PYTHON) cannot import numpy: the 1000 int8 cases of tests/q8_ref.py \
           (test_q8 runs its built-in ones), the 1000 16x8 cases of tests/q16_ref.py (test_q16 runs its \
           checks of bad input and its built-in cases) and the int8 and 16x8 digit models (examples/digits/quantize.py); \
           Debian: apt-get install python3-numpy, or make test PYTHON=a-python3-with-numpy
endif
# the suite's programs, as tests/run.sh runs them
PROGRAMS = $(BUILD)/test_mha $(BUILD)/test_hostile "$(BUILD)/replay $(CORPUS)" $(BUILD)/test_threads \
           $(BUILD)/test_mathf $(BUILD)/test_decode $(BUILD)/test_backward \
           "$(BUILD)/test_q8 $(Q8CASES)" "$(BUILD)/test_q8_single $(Q8CASES)" "$(BUILD)/test_q16 $(Q16CASES)"
# The fast path (MHA_FAST 1): test_fast against the reference, once per vector
# unit, and the whole suite once more on the fast path. The SIMD builds run
# only where the CPU has the instructions (tests/if_cpu.sh).
ifeq ($(shell uname -m),x86_64)
FASTSIMD = $(BUILD)/test_fast_avx2 $(BUILD)/test_fast_avx512 $(BUILD)/test_bf16dot $(BUILD)/test_backward_avx512
FASTRUN  = "sh tests/if_cpu.sh avx2,fma $(BUILD)/test_fast_avx2" \
           "sh tests/if_cpu.sh avx2,fma,f16c $(BUILD)/test_mha_fast" "sh tests/if_cpu.sh avx2,fma,f16c $(BUILD)/test_decode_fast" \
           "sh tests/if_cpu.sh avx512f,fma,avx512_bf16 $(BUILD)/test_bf16dot" \
           "sh tests/if_cpu.sh avx2,fma,f16c $(BUILD)/test_backward_fast"
# A compiler without the x86 vector extensions (tcc) compiles the avx512 configuration as the
# portable one (no __AVX512F__, chunks of 256 slots: the same code), so its three programs run
# only where the compiler has them.
ifeq ($(shell printf '\043ifdef __AVX512F__\nyes\n\043endif\n' | $(CC) -mavx512f -E - 2>/dev/null | grep -c '^yes'),1)
FASTRUN += "sh tests/if_cpu.sh avx512f,fma $(BUILD)/test_fast_avx512" "sh tests/if_cpu.sh avx512f,fma $(BUILD)/test_decode_avx512" \
           "sh tests/if_cpu.sh avx512f,fma $(BUILD)/test_backward_avx512"
else
SKIPVEC  = not run: the avx512 builds, which $(CC) (no AVX-512 code generation) makes the portable ones
endif
BF16DOT  = -DMHA_BF16_DOT=1 -mavx512f -mfma -mavx512bf16 # bf16 products (vdpbf16ps)
ASANBF   = $(BUILD)/asan_bf16dot
ASANBFRUN = "sh tests/if_cpu.sh avx512f,fma,avx512_bf16 $(BUILD)/asan_bf16dot"
DECODESIMD = $(BUILD)/test_decode_avx512
FASTMHA  = -mavx2 -mfma
F16C     = -mf16c # the AVX2 decode builds: f16 conversions by F16C (the portable builds test the lane-by-lane ones)
IFSIMD   = sh tests/if_cpu.sh avx2,fma
IFFAST   = sh tests/if_cpu.sh avx2,fma,f16c # the programs built with CFG_fast
VGFAST   = "sh tests/if_cpu.sh avx2,fma valgrind -q --error-exitcode=1 --leak-check=full $(BUILD)/test_fast_avx2 240 4001"
else
FASTSIMD =
FASTRUN  = $(BUILD)/test_mha_fast $(BUILD)/test_decode_fast $(BUILD)/test_backward_fast
DECODESIMD =
FASTMHA  =
IFSIMD   =
IFFAST   =
VGFAST   =
endif
FASTDEP  = tests/test_fast.c tests/test_hooks.h $(TESTDEP)
PROGRAMS += $(BUILD)/test_fast $(BUILD)/test_decode_portable $(BUILD)/test_backward_portable $(FASTRUN)
DECODE   = tests/test_decode.c tests/test_impl.c
EXAMPLES = quickstart encoder_block parallel_packed seed_questions self_attention cross_attention firmware_static decode \
           speculative
EXBINS   = $(EXAMPLES:%=$(BUILD)/%)
MODELS   = $(BUILD)/digits $(BUILD)/digits_ref $(Q8MODELS) $(BUILD)/tinylm $(BUILD)/tinylm_ref $(BUILD)/train
CONTRACT = $(BUILD)/include_twice $(BUILD)/static_pair $(BUILD)/cpp_tu $(BUILD)/options_empty

.PHONY: all test examples run sanitize matrix refcheck valgrind tsan fuzz fuzz-fast coverage lint cross-test size bench peers ort \
        peers-mcu \
        callgrind install uninstall install-test export-test clean mathf-sweep accuracy models

all: $(BUILD)/test_mha $(BUILD)/test_hostile $(BUILD)/replay $(BUILD)/test_threads $(BUILD)/test_mathf \
     $(BUILD)/test_fast $(FASTSIMD) $(BUILD)/test_mha_fast $(BUILD)/test_decode $(BUILD)/test_decode_portable \
     $(BUILD)/test_decode_fast $(DECODESIMD) $(BUILD)/test_backward $(BUILD)/test_backward_portable \
     $(BUILD)/test_backward_fast $(BUILD)/test_q8 $(BUILD)/test_q8_single $(Q8CASES) $(BUILD)/test_q16 $(Q16CASES) \
     $(CONTRACT) \
     $(EXBINS) $(MODELS)

$(BUILD):
	mkdir -p $(BUILD)

# The implementation is compiled once per configuration (tests/test_impl.c into an object);
# every test program is its own file compiled with the same configuration and linked against
# that object: test_fast and test_q8 reach the private functions they check (the vector exp and
# tanh, the integer exp) through tests/test_hooks.h. Only test_mathf (private functions of the
# call state), test_bf16dot (a configuration of its own), the contract tests, the quick start and
# the firmware example compile the header themselves. The other examples and the trained models
# use only the public API: they are compiled with MHA_IMPLEMENTATION_INCLUDED defined (EXLINK), so
# that the header gives them its declarations only, as it does to every file of a program but the
# one that holds the implementation, and are linked against lib (the library's own defaults) or
# ref. Each is compiled whole, the implementation in it, by make matrix (the examples: gcc,
# clang, -m32 and the options) and make models (the models).
#   lib       the library's defaults (the fast path on hosted x86-64 and aarch64)
#   ref       the reference path (MHA_FAST 0)
#   portable  the fast path's portable vectors; decoding's cache chunks of 256 slots, not
#             1024, so that the tests' caches of 515 to 647 positions span several chunks
#   fast      the fast path for AVX2 with F16C's 16-bit conversions (elsewhere: the target's
#             own vector unit)
#   avx512    the fast path for AVX-512 (x86-64), chunks of 256 slots
#   q8single  the reference path with the int8 path's single rounding (MHA_Q8_SINGLE_ROUNDING 1)
DCH256 = "-DMHA__DCH=((size_t)256)"
CFG_lib      = -DTEST_LIBRARY_DEFAULTS
CFG_ref      =
CFG_portable = -DMHA_FAST=1 -DMHA_NO_SIMD=1 $(DCH256)
CFG_fast     = -DMHA_FAST=1 $(FASTMHA) $(F16C)
CFG_avx512   = -DMHA_FAST=1 -mavx512f -mfma $(DCH256)
CFG_q8single = -DMHA_Q8_SINGLE_ROUNDING=1
.PRECIOUS: $(BUILD)/impl_%.o $(BUILD)/asan_impl_%.o
$(BUILD)/impl_%.o: tests/test_impl.c tests/test_hooks.h mha.h | $(BUILD)
	$(CC) $(TFLAGS) $(CFG_$*) -c tests/test_impl.c -o $@

# A test's own file does not depend on the configuration (it asks mha_build_info and the hooks):
# compiled once into an object, linked with each configuration's.
$(BUILD)/t_%.o: tests/%.c $(TESTDEP) tests/test_hooks.h | $(BUILD)
	$(CC) $(TFLAGS) -c $< -o $@
$(BUILD)/t_test_mha.o: $(SUITEDEP)
$(BUILD)/t_test_q8.o: $(Q8DEP)
$(BUILD)/t_test_backward.o: tests/ref_backward.h
$(BUILD)/t_test_fast.o: $(FASTDEP)

$(BUILD)/test_mha: $(BUILD)/t_test_mha.o $(BUILD)/impl_ref.o | $(BUILD)
	$(CC) $^ -o $@ $(LDLIBS)

$(BUILD)/test_hostile: $(HOSTILE) $(TESTDEP) $(BUILD)/impl_ref.o | $(BUILD)
	$(CC) $(TFLAGS) tests/test_hostile.c $(BUILD)/impl_ref.o -o $@ $(LDLIBS)

$(BUILD)/replay: $(REPLAY) $(TESTDEP) tests/fuzz/predicate.h $(BUILD)/impl_ref.o | $(BUILD)
	$(CC) $(CFLAGS) -std=c99 -Wall -Wextra -Werror tests/fuzz/fuzz_mha.c tests/fuzz/replay.c $(BUILD)/impl_ref.o -o $@ \
	    $(LDLIBS)

# mha_backward against finite differences of the double forward (tests/naive_ref.h) and
# PyTorch autograd (tests/ref_backward.h, written by tests/gen_backward.py)
# (test_backward: the reference build; _portable, _fast, _avx512: the fast path, which it
# also compares with mha_backward_reference)
BACKWARD = tests/test_backward.c tests/test_impl.c
$(BUILD)/test_backward: $(BUILD)/t_test_backward.o $(BUILD)/impl_ref.o | $(BUILD)
	$(CC) $^ -o $@ $(LDLIBS)

$(BUILD)/test_backward_%: $(BUILD)/t_test_backward.o $(BUILD)/impl_%.o | $(BUILD)
	$(CC) $^ -o $@ $(LDLIBS)

# the int8 path against tests/q8_ref.py (numpy), bit for bit: 1000 cases written at build time
# (a few more are in tests/ref_q8_small.h), in both rounding modes
Q8DEP = tests/test_q8.c tests/ref_q8_small.h tests/test_hooks.h $(TESTDEP)
$(BUILD)/q8_cases.bin: tests/q8_ref.py | $(BUILD)
	$(PYTHON) tests/q8_ref.py $@ --cases 1000

$(BUILD)/test_q8: $(BUILD)/t_test_q8.o $(BUILD)/impl_ref.o | $(BUILD)
	$(CC) $^ -o $@ $(LDLIBS)

$(BUILD)/test_q8_single: $(BUILD)/t_test_q8.o $(BUILD)/impl_q8single.o | $(BUILD)
	$(CC) $^ -o $@ $(LDLIBS)

# the 16x8 path against tests/q16_ref.py (numpy), bit for bit: 1000 cases written at build time
# (12 more are in tests/ref_q16_small.h)
$(BUILD)/q16_cases.bin: tests/q16_ref.py tests/q8_ref.py | $(BUILD)
	$(PYTHON) tests/q16_ref.py $@ --cases 1000

$(BUILD)/t_test_q16.o: tests/ref_q16_small.h
$(BUILD)/test_q16: $(BUILD)/t_test_q16.o $(BUILD)/impl_ref.o | $(BUILD)
	$(CC) $^ -o $@ $(LDLIBS)

$(BUILD)/test_threads: $(THREADS) $(TESTDEP) $(BUILD)/impl_ref.o | $(BUILD)
	$(CC) $(CFLAGS) $(STRICT) -Wno-conversion -Itests tests/test_threads.c $(BUILD)/impl_ref.o -o $@ $(LDLIBS) -pthread

# every 487th float in make test (about a second); make mathf-sweep covers every float
$(BUILD)/test_mathf: tests/test_mathf.c $(TESTDEP) | $(BUILD)
	$(CC) $(CFLAGS) $(STRICT) -Wno-conversion -Wno-double-promotion -DMATHF_STRIDE=487u -Itests $< -o $@ $(LDLIBS)

$(BUILD)/test_fast: $(BUILD)/t_test_fast.o $(BUILD)/impl_portable.o | $(BUILD)
	$(CC) $^ -o $@ $(LDLIBS)

$(BUILD)/test_fast_avx2: $(BUILD)/t_test_fast.o $(BUILD)/impl_fast.o | $(BUILD)
	$(CC) $^ -o $@ $(LDLIBS)

$(BUILD)/test_fast_avx512: $(BUILD)/t_test_fast.o $(BUILD)/impl_avx512.o | $(BUILD)
	$(CC) $^ -o $@ $(LDLIBS)

# bf16 products (MHA_BF16_DOT 1) against the double oracle; runs where the CPU has AVX512-BF16
$(BUILD)/test_bf16dot: tests/test_bf16dot.c tests/two_threads.h $(TESTDEP) | $(BUILD)
	$(CC) $(CFLAGS) $(STRICT) -Wno-conversion -Wno-double-promotion $(BF16DOT) -Itests $< -o $@ $(LDLIBS) -pthread

$(BUILD)/test_mha_fast: $(BUILD)/t_test_mha.o $(BUILD)/impl_fast.o | $(BUILD)
	$(CC) $^ -o $@ $(LDLIBS)

# Decoding and mha_attend against mha_forward_reference: the reference build, the
# fast path's portable code, and the fast path for the machine's vector units
$(BUILD)/test_decode: $(BUILD)/t_test_decode.o $(BUILD)/impl_ref.o | $(BUILD)
	$(CC) $^ -o $@ $(LDLIBS)

$(BUILD)/test_decode_%: $(BUILD)/t_test_decode.o $(BUILD)/impl_%.o | $(BUILD)
	$(CC) $^ -o $@ $(LDLIBS)

$(BUILD)/include_twice: tests/include_twice.c mha.h | $(BUILD)
	$(CC) $(OFLAGS) $(STRICT) $< -o $@ $(LDLIBS)

$(BUILD)/static_pair: tests/static_a.c tests/static_b.c tests/static_main.c mha.h | $(BUILD)
	$(CC) $(OFLAGS) $(STRICT) tests/static_a.c tests/static_b.c tests/static_main.c -o $@ $(LDLIBS)

$(BUILD)/options_empty: tests/options_empty.c mha.h | $(BUILD)
	$(CC) $(OFLAGS) $(STRICT) $< -o $@ $(LDLIBS)

$(BUILD)/cpp_tu: tests/cpp_tu.cpp mha.h | $(BUILD)
	$(CXX) $(OFLAGS) -std=c++11 -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Werror $< -o $@ $(LDLIBS)

# Examples include "mha.h" as a user's program would: -I. finds it. The quick start and the
# firmware example hold the implementation (as a one-file program does); the others link it.
EXLINK = -DMHA_IMPLEMENTATION_INCLUDED
EXDEP  = examples/example_util.h examples/encoder_weights.h mha.h
$(BUILD)/%: examples/%.c $(EXDEP) $(BUILD)/impl_lib.o | $(BUILD)
	$(CC) $(EXFLAGS) $(STRICT) $(EXLINK) -I. $< $(BUILD)/impl_lib.o -o $@ $(LDLIBS) -pthread
$(BUILD)/quickstart $(BUILD)/firmware_static: $(BUILD)/%: examples/%.c $(EXDEP) | $(BUILD)
	$(CC) $(EXFLAGS) $(STRICT) -I. $< -o $@ $(LDLIBS) -pthread

# Trained models (examples/digits, examples/tinylm): each C program against the committed headers
# that its train.py generated, on the fast path and on the reference path (MODELS: at the top).
DIGITS   = examples/digits/digits.c examples/digits/digits_model.h examples/model_util.h mha.h
TINYLM   = examples/tinylm/tinylm.c examples/tinylm/tinylm_model.h examples/tinylm/tinylm_expected.h \
           examples/model_util.h mha.h
$(BUILD)/digits: $(DIGITS) $(BUILD)/impl_lib.o | $(BUILD)
	$(CC) $(MODFLAGS) $(STRICT) $(EXLINK) -I. -Iexamples $< $(BUILD)/impl_lib.o -o $@ $(LDLIBS)
$(BUILD)/digits_ref: $(DIGITS) $(BUILD)/impl_ref.o | $(BUILD)
	$(CC) $(MODFLAGS) $(STRICT) -DMHA_FAST=0 $(EXLINK) -I. -Iexamples $< $(BUILD)/impl_ref.o -o $@ $(LDLIBS)
# the same model with both attention layers in int8: quantised after training by
# examples/digits/quantize.py (calibrated on the training images; numpy), then run by mha_forward_q8
$(BUILD)/digits_q8.h: examples/digits/quantize.py examples/digits/digits_model.h | $(BUILD)
	$(PYTHON) examples/digits/quantize.py examples/digits/digits_model.h $@
$(BUILD)/digits_q8: $(DIGITS) $(BUILD)/digits_q8.h $(BUILD)/impl_lib.o | $(BUILD)
	$(CC) $(MODFLAGS) $(STRICT) -DDG_Q8 $(EXLINK) -I. -Iexamples -I$(BUILD) $< $(BUILD)/impl_lib.o -o $@ $(LDLIBS)
# and calibrated by percentiles (0.01 and 99.99) instead of min/max
$(BUILD)/pct/digits_q8.h: examples/digits/quantize.py examples/digits/digits_model.h | $(BUILD)
	@mkdir -p $(BUILD)/pct
	$(PYTHON) examples/digits/quantize.py examples/digits/digits_model.h $@ --percentile=99.99
$(BUILD)/digits_q8p: $(DIGITS) $(BUILD)/pct/digits_q8.h $(BUILD)/impl_lib.o | $(BUILD)
	$(CC) $(MODFLAGS) $(STRICT) -DDG_Q8 $(EXLINK) -I. -Iexamples -I$(BUILD)/pct $< $(BUILD)/impl_lib.o -o $@ $(LDLIBS)
# and in 16x8 (int16 activations), run by mha_forward_q16
$(BUILD)/q16/digits_q8.h: examples/digits/quantize.py examples/digits/digits_model.h | $(BUILD)
	@mkdir -p $(BUILD)/q16
	$(PYTHON) examples/digits/quantize.py examples/digits/digits_model.h $@ --q16
$(BUILD)/digits_q16: $(DIGITS) $(BUILD)/q16/digits_q8.h $(BUILD)/impl_lib.o | $(BUILD)
	$(CC) $(MODFLAGS) $(STRICT) -DDG_Q8 -DDG_Q16 $(EXLINK) -I. -Iexamples -I$(BUILD)/q16 $< $(BUILD)/impl_lib.o -o $@ \
	    $(LDLIBS)
$(BUILD)/tinylm: $(TINYLM) $(BUILD)/impl_lib.o | $(BUILD)
	$(CC) $(TLMFLAGS) $(STRICT) $(EXLINK) -I. -Iexamples $< $(BUILD)/impl_lib.o -o $@ $(LDLIBS)
$(BUILD)/tinylm_ref: $(TINYLM) $(BUILD)/impl_ref.o | $(BUILD)
	$(CC) $(TLMFLAGS) $(STRICT) -DMHA_FAST=0 $(EXLINK) -I. -Iexamples $< $(BUILD)/impl_ref.o -o $@ $(LDLIBS)
# examples/train: an attention layer trained in C (mha_backward, SGD), its loss curve against
# PyTorch's (examples/train/torch_curve.h, written by examples/train/train_torch.py)
$(BUILD)/train: examples/train/train.c examples/train/torch_curve.h mha.h $(BUILD)/impl_lib.o | $(BUILD)
	$(CC) $(MODFLAGS) $(STRICT) $(EXLINK) -I. -Iexamples/train $< $(BUILD)/impl_lib.o -o $@ $(LDLIBS)

# make models: both models trained again from scratch (seeded; needs python3-torch and
# python3-sklearn) into $(BUILD)/models, and each C program built against the new headers and
# run: they must agree with the retrained models (not bitwise with the committed weights:
# training on another CPU may round differently); and PyTorch's loss curve of examples/train
# run again, for train.c to match. The language model trains on one thread, as the committed
# one did (a second thread made its steps slower here, 0.39-0.45 s against 0.24-0.36 s on an AMD
# EPYC), while the other two train one after the other beside it (one thread each).
models: | $(BUILD)
	$(call NEED,torch sklearn)
	rm -rf $(BUILD)/models && mkdir -p $(BUILD)/models/digits $(BUILD)/models/tinylm $(BUILD)/models/train
	cp examples/digits/digits.c $(BUILD)/models/digits/ && cp examples/tinylm/tinylm.c $(BUILD)/models/tinylm/
	cp examples/train/train.c $(BUILD)/models/train/
	$(PYTORCH) examples/tinylm/train.py --threads 1 $(BUILD)/models/tinylm & tl=$$!; \
	$(PYTORCH) examples/train/train_torch.py $(BUILD)/models/train/torch_curve.h && \
	$(PYTORCH) examples/digits/train.py $(BUILD)/models/digits/digits_model.h; st=$$?; \
	wait $$tl && [ $$st -eq 0 ]
	$(CC) $(CFLAGS) $(STRICT) -I. -Iexamples $(BUILD)/models/digits/digits.c -o $(BUILD)/models/digits/digits $(LDLIBS)
	$(CC) $(CFLAGS) $(STRICT) -I. -Iexamples $(BUILD)/models/tinylm/tinylm.c -o $(BUILD)/models/tinylm/tinylm $(LDLIBS)
	$(CC) $(CFLAGS) $(STRICT) -I. $(BUILD)/models/train/train.c -o $(BUILD)/models/train/train $(LDLIBS)
	@RUN_JOBS=$(JOBS) sh tests/run.sh $(BUILD)/models/digits/digits $(BUILD)/models/tinylm/tinylm $(BUILD)/models/train/train

examples: $(EXBINS) $(MODELS)

# make test builds its programs on every core (JOBS, default nproc), then runs them one by one
JOBS ?= $(shell nproc 2>/dev/null || echo 1)
test:
	@$(MAKE) --no-print-directory -j$(JOBS) all
	@$(if $(SKIPPED),echo "$(SKIPPED)")
	@$(if $(SKIPVEC),echo "$(SKIPVEC)")
	@RUN_JOBS=$(JOBS) sh tests/run.sh $(PROGRAMS) $(MODELS) $(CONTRACT) "sh tests/check_includes.sh" "sh tests/readme_snippet.sh $(BUILD) none" "sh tests/docs_check.sh $(BUILD)" \
	    "sh tests/check_types.sh" "sh tests/run_examples.sh $(EXBINS)"

run: $(BUILD)/encoder_block
	$(BUILD)/encoder_block

SANFLAGS = -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -std=c99 -Itests
# as make test: the implementation once per configuration (ref, portable, fast), linked into the
# programs that use only its public functions; the tests of private functions compile it themselves
ASAN = $(BUILD)/asan_mha $(BUILD)/asan_hostile $(BUILD)/asan_replay $(BUILD)/asan_fast $(BUILD)/asan_fast_simd \
       $(BUILD)/asan_hostile_fast $(BUILD)/asan_replay_fast $(BUILD)/asan_decode $(BUILD)/asan_backward \
       $(BUILD)/asan_backward_portable $(BUILD)/asan_backward_fast $(BUILD)/asan_decode_portable \
       $(BUILD)/asan_decode_fast $(ASANBF) $(BUILD)/asan_q8 $(BUILD)/q8_cases.bin $(BUILD)/asan_q16 \
       $(BUILD)/q16_cases.bin
$(BUILD)/asan_impl_%.o: tests/test_impl.c tests/test_hooks.h mha.h | $(BUILD)
	clang $(SANFLAGS) $(CFG_$*) -c tests/test_impl.c -o $@
$(BUILD)/asan_mha: $(SUITEDEP) $(BUILD)/asan_impl_ref.o | $(BUILD)
	clang $(SANFLAGS) tests/test_mha.c $(BUILD)/asan_impl_ref.o -o $@ $(LDLIBS)
$(BUILD)/asan_hostile: $(HOSTILE) $(TESTDEP) $(BUILD)/asan_impl_ref.o | $(BUILD)
	clang $(SANFLAGS) tests/test_hostile.c $(BUILD)/asan_impl_ref.o -o $@ $(LDLIBS)
$(BUILD)/asan_hostile_fast: $(HOSTILE) $(TESTDEP) $(BUILD)/asan_impl_fast.o | $(BUILD)
	clang $(SANFLAGS) $(CFG_fast) tests/test_hostile.c $(BUILD)/asan_impl_fast.o -o $@ $(LDLIBS)
$(BUILD)/asan_replay: $(REPLAY) $(TESTDEP) tests/fuzz/predicate.h $(BUILD)/asan_impl_ref.o | $(BUILD)
	clang $(SANFLAGS) tests/fuzz/fuzz_mha.c tests/fuzz/replay.c $(BUILD)/asan_impl_ref.o -o $@ $(LDLIBS)
$(BUILD)/asan_replay_fast: $(REPLAY) $(TESTDEP) tests/fuzz/predicate.h $(BUILD)/asan_impl_fast.o | $(BUILD)
	clang $(SANFLAGS) $(CFG_fast) tests/fuzz/fuzz_mha.c tests/fuzz/replay.c $(BUILD)/asan_impl_fast.o -o $@ $(LDLIBS)
$(BUILD)/asan_decode: $(DECODE) $(TESTDEP) $(BUILD)/asan_impl_ref.o | $(BUILD)
	clang $(SANFLAGS) tests/test_decode.c $(BUILD)/asan_impl_ref.o -o $@ $(LDLIBS)
$(BUILD)/asan_decode_%: $(DECODE) $(TESTDEP) $(BUILD)/asan_impl_%.o | $(BUILD)
	clang $(SANFLAGS) $(CFG_$*) tests/test_decode.c $(BUILD)/asan_impl_$*.o -o $@ $(LDLIBS)
$(BUILD)/asan_backward: $(BACKWARD) tests/ref_backward.h $(TESTDEP) $(BUILD)/asan_impl_ref.o | $(BUILD)
	clang $(SANFLAGS) tests/test_backward.c $(BUILD)/asan_impl_ref.o -o $@ $(LDLIBS)
$(BUILD)/asan_backward_%: $(BACKWARD) tests/ref_backward.h $(TESTDEP) $(BUILD)/asan_impl_%.o | $(BUILD)
	clang $(SANFLAGS) $(CFG_$*) tests/test_backward.c $(BUILD)/asan_impl_$*.o -o $@ $(LDLIBS)
$(BUILD)/asan_fast: $(FASTDEP) $(BUILD)/asan_impl_portable.o | $(BUILD)
	clang $(SANFLAGS) tests/test_fast.c $(BUILD)/asan_impl_portable.o -o $@ $(LDLIBS)
$(BUILD)/asan_fast_simd: $(FASTDEP) $(BUILD)/asan_impl_fast.o | $(BUILD)
	clang $(SANFLAGS) tests/test_fast.c $(BUILD)/asan_impl_fast.o -o $@ $(LDLIBS)
$(BUILD)/asan_bf16dot: tests/test_bf16dot.c tests/two_threads.h $(TESTDEP) | $(BUILD)
	clang $(SANFLAGS) $(BF16DOT) tests/test_bf16dot.c -o $@ $(LDLIBS) -pthread
$(BUILD)/asan_q8: $(Q8DEP) $(BUILD)/asan_impl_ref.o | $(BUILD)
	clang $(SANFLAGS) tests/test_q8.c $(BUILD)/asan_impl_ref.o -o $@ $(LDLIBS)
$(BUILD)/asan_q16: tests/test_q16.c tests/ref_q16_small.h $(TESTDEP) $(BUILD)/asan_impl_ref.o | $(BUILD)
	clang $(SANFLAGS) tests/test_q16.c $(BUILD)/asan_impl_ref.o -o $@ $(LDLIBS)
sanitize: | $(BUILD)
	@$(MAKE) --no-print-directory -j$(JOBS) $(ASAN)
	@RUN_JOBS=$(JOBS) sh tests/run.sh "$(BUILD)/asan_q8 $(BUILD)/q8_cases.bin" "$(BUILD)/asan_q16 $(BUILD)/q16_cases.bin" \
	    $(BUILD)/asan_mha $(BUILD)/asan_hostile \
	    "$(BUILD)/asan_replay $(CORPUS)" $(BUILD)/asan_fast \
	    "$(IFSIMD) $(BUILD)/asan_fast_simd" "$(IFFAST) $(BUILD)/asan_hostile_fast" \
	    "$(IFFAST) $(BUILD)/asan_replay_fast $(CORPUS)" $(BUILD)/asan_decode $(BUILD)/asan_decode_portable \
	    $(BUILD)/asan_backward $(BUILD)/asan_backward_portable "$(IFFAST) $(BUILD)/asan_backward_fast" \
	    "$(IFFAST) $(BUILD)/asan_decode_fast" $(ASANBFRUN)

# test_fast under memcheck: the portable build and (valgrind has no AVX-512) the AVX2 build.
valgrind: $(BUILD)/test_mha $(BUILD)/test_hostile $(BUILD)/replay $(BUILD)/test_threads $(BUILD)/test_fast $(FASTSIMD) \
          $(BUILD)/test_decode $(BUILD)/test_decode_portable $(BUILD)/test_backward $(BUILD)/test_q8 $(BUILD)/q8_cases.bin \
          $(BUILD)/test_q16
	@RUN_JOBS=$(JOBS) sh tests/run.sh "valgrind -q --error-exitcode=1 --leak-check=full $(BUILD)/test_mha" \
	    "valgrind -q --error-exitcode=1 --leak-check=full $(BUILD)/test_q16" \
	    "valgrind -q --error-exitcode=1 --leak-check=full $(BUILD)/test_q8 $(BUILD)/q8_cases.bin" \
	    "valgrind -q --error-exitcode=1 --leak-check=full $(BUILD)/test_decode" \
	    "valgrind -q --error-exitcode=1 --leak-check=full $(BUILD)/test_backward" \
	    "valgrind -q --error-exitcode=1 --leak-check=full $(BUILD)/test_decode_portable" \
	    "valgrind -q --error-exitcode=1 --leak-check=full $(BUILD)/test_hostile" \
	    "valgrind -q --error-exitcode=1 --leak-check=full $(BUILD)/replay $(CORPUS)" \
	    "valgrind -q --error-exitcode=1 --leak-check=full $(BUILD)/test_threads" \
	    "valgrind -q --error-exitcode=1 --leak-check=full $(BUILD)/test_fast 240 4001" \
	    $(VGFAST)

tsan: | $(BUILD)
	clang -O1 -g -fsanitize=thread -std=c99 -Itests $(THREADS) -o $(BUILD)/tsan_threads $(LDLIBS) -pthread
	clang -O1 -g -fsanitize=thread -std=c99 -D_POSIX_C_SOURCE=200112L -DTEST_FAST_THREADS -DMHA_FAST=1 $(FASTMHA) -Itests \
	    tests/test_fast.c tests/test_impl.c -o $(BUILD)/tsan_fast $(LDLIBS) -pthread
	clang -O1 -g -fsanitize=thread -std=c99 -D_POSIX_C_SOURCE=200112L -DTEST_DECODE_THREADS -DMHA_FAST=1 $(FASTMHA) $(DCH256) \
	    -Itests $(DECODE) -o $(BUILD)/tsan_decode $(LDLIBS) -pthread
	@sh tests/run.sh $(BUILD)/tsan_threads "$(IFSIMD) $(BUILD)/tsan_fast 40" "$(IFSIMD) $(BUILD)/tsan_decode"

# libFuzzer grows a scratch copy of the committed corpus; prints the execution count.
fuzz: | $(BUILD)
	clang -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all $(REPLAY:tests/fuzz/replay.c=) \
	    -o $(BUILD)/fuzz_mha $(LDLIBS)
	rm -rf $(BUILD)/fuzz_corpus && mkdir -p $(BUILD)/fuzz_corpus && cp $(CORPUS) $(BUILD)/fuzz_corpus/
	@sh tests/fuzz/run_fuzz.sh $(BUILD)/fuzz_mha $(BUILD)/fuzz_corpus $(FUZZ_SECONDS)

# The same fuzzer on the fast path (MHA_FAST 1), once per vector unit: the
# portable code, and AVX2 and AVX-512 where this CPU runs them (FUZZ_SECONDS each).
FUZZFAST = clang -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -DMHA_FAST=1 \
           $(REPLAY:tests/fuzz/replay.c=) $(LDLIBS)
ifeq ($(shell uname -m),x86_64)
FUZZUNITS = "sh tests/if_cpu.sh avx2,fma sh tests/fuzz/run_fuzz.sh $(BUILD)/fuzz_fast_avx2 $(BUILD)/fuzz_corpus_avx2 $(FUZZ_SECONDS)" \
            "sh tests/if_cpu.sh avx512f,fma sh tests/fuzz/run_fuzz.sh $(BUILD)/fuzz_fast_avx512 $(BUILD)/fuzz_corpus_avx512 $(FUZZ_SECONDS)"
endif
FUZZDEP = $(REPLAY) tests/fuzz/predicate.h tests/test_hooks.h mha.h
$(BUILD)/fuzz_fast_portable: $(FUZZDEP) | $(BUILD)
	$(FUZZFAST) -DMHA_NO_SIMD=1 -o $@
$(BUILD)/fuzz_fast_avx2: $(FUZZDEP) | $(BUILD)
	$(FUZZFAST) -mavx2 -mfma -o $@
$(BUILD)/fuzz_fast_avx512: $(FUZZDEP) | $(BUILD)
	$(FUZZFAST) -mavx512f -mfma -o $@
FUZZBINS = $(BUILD)/fuzz_fast_portable
ifeq ($(shell uname -m),x86_64)
FUZZBINS += $(BUILD)/fuzz_fast_avx2 $(BUILD)/fuzz_fast_avx512
endif
fuzz-fast: | $(BUILD)
	@$(MAKE) --no-print-directory -j$(JOBS) $(FUZZBINS)
	for u in portable avx2 avx512; do rm -rf $(BUILD)/fuzz_corpus_$$u && mkdir -p $(BUILD)/fuzz_corpus_$$u && \
	    cp $(CORPUS) $(BUILD)/fuzz_corpus_$$u/; done
	@RUN_JOBS=$(JOBS) sh tests/run.sh "sh tests/fuzz/run_fuzz.sh $(BUILD)/fuzz_fast_portable $(BUILD)/fuzz_corpus_portable $(FUZZ_SECONDS)" \
	    $(FUZZUNITS)

# exp and tanh of each build (MHA_NO_LIBM scalar, portable, and the vector units this CPU runs)
SWEEP_STRIDE ?= 1
ifeq ($(shell uname -m),x86_64)
SWEEPSIMD = "sh tests/if_cpu.sh avx2,fma $(BUILD)/sweep_avx2 $(SWEEP_STRIDE)" \
            "sh tests/if_cpu.sh avx512f,fma $(BUILD)/sweep_avx512 $(SWEEP_STRIDE)"
endif
mathf-sweep: tests/mathf_sweep.c mha.h | $(BUILD)
	$(CC) -O2 -std=c99 -DSWEEP_SCALAR tests/mathf_sweep.c -o $(BUILD)/sweep_scalar $(LDLIBS)
	$(CC) -O2 -std=c99 -DMHA_NO_SIMD=1 tests/mathf_sweep.c -o $(BUILD)/sweep_portable $(LDLIBS)
ifeq ($(shell uname -m),x86_64)
	$(CC) -O2 -std=c99 -mavx2 -mfma tests/mathf_sweep.c -o $(BUILD)/sweep_avx2 $(LDLIBS)
	$(CC) -O2 -std=c99 -mavx512f -mfma tests/mathf_sweep.c -o $(BUILD)/sweep_avx512 $(LDLIBS)
endif
	@RUN_JOBS=$(JOBS) sh tests/run.sh "$(BUILD)/sweep_scalar $(SWEEP_STRIDE)" "$(BUILD)/sweep_portable $(SWEEP_STRIDE)" $(SWEEPSIMD)

# The accuracy benchmark: tests/accuracy/run_mha.c built for the reference path
# and for the fast path of each vector unit this CPU runs; tests/accuracy/accuracy.py
# draws the problems, runs PyTorch and checks the goals.
ACCFLAGS = -O2 -std=c99 -Wall -Wextra -Werror
ifeq ($(shell uname -m),x86_64)
ACCSIMD = $(if $(shell grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo && echo y),avx2=$(BUILD)/acc_avx2) \
          $(if $(shell grep -qw avx512f /proc/cpuinfo && echo y),avx512=$(BUILD)/acc_avx512)
endif
accuracy: | $(BUILD)
	$(call NEED,torch)
	$(CC) $(ACCFLAGS) -DMHA_FAST=0 tests/accuracy/run_mha.c -o $(BUILD)/acc_reference $(LDLIBS)
	$(CC) $(ACCFLAGS) -DMHA_FAST=1 -DMHA_NO_SIMD=1 tests/accuracy/run_mha.c -o $(BUILD)/acc_portable $(LDLIBS)
ifeq ($(shell uname -m),x86_64)
	$(CC) $(ACCFLAGS) -DMHA_FAST=1 -mavx2 -mfma tests/accuracy/run_mha.c -o $(BUILD)/acc_avx2 $(LDLIBS)
	$(CC) $(ACCFLAGS) -DMHA_FAST=1 -mavx512f -mfma tests/accuracy/run_mha.c -o $(BUILD)/acc_avx512 $(LDLIBS)
endif
	if command -v qemu-aarch64 > /dev/null && command -v aarch64-linux-gnu-gcc-12 > /dev/null; then \
	    aarch64-linux-gnu-gcc-12 -static $(ACCFLAGS) -DMHA_FAST=1 tests/accuracy/run_mha.c -o $(BUILD)/acc_neon $(LDLIBS); fi
	$(PYTORCH) tests/accuracy/accuracy.py reference=$(BUILD)/acc_reference portable=$(BUILD)/acc_portable $(ACCSIMD) \
	    $$(test -x $(BUILD)/acc_neon && echo "neon=qemu-aarch64@$(BUILD)/acc_neon")

coverage: | $(BUILD)
	@sh tests/coverage.sh $(BUILD)/cov

lint:
	@sh tests/lint.sh

cross-test:
	@sh tests/cross/cross_test.sh

size:
	$(PYTHON) tests/size_report.py --readme

matrix:
	@sh tests/matrix.sh

refcheck: | $(BUILD)
	$(call NEED,torch)
	mkdir -p $(SCRATCH)
	$(PYTORCH) tests/gen_vectors.py $(SCRATCH)/ref_vectors.h
	$(CC) $(CFLAGS) -Itests -DREF_VECTORS_FILE='"$(abspath $(SCRATCH))/ref_vectors.h"' $(SUITE) \
	    -o $(BUILD)/test_mha_fresh $(LDLIBS)
	$(PYTORCH) tests/gen_backward.py $(SCRATCH)/ref_backward.h
	$(CC) $(CFLAGS) -Itests -DREF_BACKWARD_FILE='"$(abspath $(SCRATCH))/ref_backward.h"' $(BACKWARD) \
	    -o $(BUILD)/test_backward_fresh $(LDLIBS)
	@sh tests/run.sh $(BUILD)/test_mha_fresh $(BUILD)/test_backward_fresh

# The benchmark is built for this machine's vector unit (BENCHFLAGS).
BENCHFLAGS ?= -O2 -march=native
$(BUILD)/bench: bench/bench.c bench/shapes.h bench/bench_util.h tests/two_threads.h mha.h | $(BUILD)
	$(CC) $(BENCHFLAGS) -std=c99 -Wall -Wextra -Werror $< -o $@ $(LDLIBS) -pthread

# The OpenBLAS peer (libopenblas-dev): its softmax and tanh loops are vectorised by gcc.
# Each peer checks its output against mha.h's (bench/peer_check.c, compiled without -ffast-math).
$(BUILD)/peer_check.o: bench/peer_check.c bench/peer_check.h bench/shapes.h mha.h | $(BUILD)
	$(CC) -O2 -march=native -std=c99 -Wall -Wextra -Werror -c $< -o $@
$(BUILD)/blas_mha: bench/blas_mha.c bench/shapes.h bench/peer_check.h $(BUILD)/peer_check.o | $(BUILD)
	$(CC) -O3 -march=native -ffast-math -std=c99 -Wall -Wextra -Werror $$(pkg-config --cflags openblas) $< \
	    $(BUILD)/peer_check.o -o $@ $$(pkg-config --libs openblas) -lm

$(BUILD)/bench_decode: bench/bench_decode.c bench/bench_util.h tests/two_threads.h mha.h | $(BUILD)
	$(CC) -O2 -std=c99 -Wall -Wextra -Werror $(BENCHFLAGS) $< -o $@ -lm -pthread

bench: $(BUILD)/bench $(BUILD)/bench_decode
	$(BUILD)/bench
	$(BUILD)/bench_decode

# The oneDNN peer (libdnnl-dev).
$(BUILD)/dnnl_mha: bench/dnnl_mha.c bench/shapes.h bench/peer_check.h $(BUILD)/peer_check.o | $(BUILD)
	$(CC) -O2 -march=native -std=c99 -Wall -Wextra -Werror $< $(BUILD)/peer_check.o -o $@ -ldnnl -lm

# A shape's weights, inputs and mha.h's output for the ONNX Runtime peer (bench/ort_peer.py).
$(BUILD)/peer_data: bench/peer_data.c bench/shapes.h bench/peer_check.h $(BUILD)/peer_check.o | $(BUILD)
	$(CC) -O2 -march=native -std=c99 -Wall -Wextra -Werror $< $(BUILD)/peer_check.o -o $@ -lm
# ONNX Runtime's CPU library from the npm registry (onnxruntime-node ships it; its install
# script, which fetches GPU parts, is skipped); make peers uses it when it is there.
ort:
	npm install --prefix $(BUILD)/ort --no-audit --no-fund --ignore-scripts onnxruntime-node@1.30.0

peers: $(BUILD)/bench $(BUILD)/bench_decode $(BUILD)/blas_mha $(BUILD)/dnnl_mha $(BUILD)/peer_data
	$(PYTORCH) bench/peers.py

# mha_forward_q8 against the same layer composed from Arm CMSIS-NN's kernels, instructions counted under QEMU
# on the Cortex-M4F, M7, M33 and M55 (docs/int8.md); CMSIS_NN: CMSIS-NN's folder (Include/, Source/).
CMSIS_NN ?= ../shared/third_party/cmsis-nn
peers-mcu:
	CMSIS_NN=$(CMSIS_NN) $(PYTHON) tests/cross/peers_mcu.py

# Instruction counts of one call (T and M; AVX2 and portable builds), as in docs/performance.md.
callgrind:
	@sh bench/callgrind.sh

# make install PREFIX=... DESTDIR=...: the header, the licence, a pkg-config file and a
# CMake package (find_package(mha) -> mha::mha); make uninstall removes them.
VERSION = $(shell sed -n 's/^\#define MHA_VERSION_STRING "\(.*\)"/\1/p' mha.h)
VMAJOR  = $(word 1,$(subst ., ,$(VERSION)))
VMINOR  = $(word 2,$(subst ., ,$(VERSION)))
INSTALLED = include/mha.h share/licenses/mha/LICENSE lib/pkgconfig/mha.pc lib/cmake/mha/mhaConfig.cmake \
            lib/cmake/mha/mhaConfigVersion.cmake lib/cmake/mha/mhaImpl.cmake
install:
	mkdir -p $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/share/licenses/mha $(DESTDIR)$(PREFIX)/lib/pkgconfig \
	    $(DESTDIR)$(PREFIX)/lib/cmake/mha
	cp mha.h $(DESTDIR)$(PREFIX)/include/mha.h
	cp LICENSE $(DESTDIR)$(PREFIX)/share/licenses/mha/LICENSE
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' cmake/mha.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/mha.pc
	cp cmake/mhaConfig.cmake $(DESTDIR)$(PREFIX)/lib/cmake/mha/mhaConfig.cmake
	cp cmake/mhaImpl.cmake $(DESTDIR)$(PREFIX)/lib/cmake/mha/mhaImpl.cmake
	sed -e 's|@VERSION@|$(VERSION)|' -e 's|@MAJOR@|$(VMAJOR)|' -e 's|@MINOR@|$(VMINOR)|' cmake/mhaConfigVersion.cmake.in \
	    > $(DESTDIR)$(PREFIX)/lib/cmake/mha/mhaConfigVersion.cmake

uninstall:
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/,$(INSTALLED))
	-rmdir $(DESTDIR)$(PREFIX)/lib/cmake/mha $(DESTDIR)$(PREFIX)/share/licenses/mha 2>/dev/null

# The exporter's round trip: layers trained in PyTorch, exported, run through mha.h (python3-torch).
export-test: | $(BUILD)
	$(call NEED,torch)
	$(PYTORCH) tests/export/roundtrip.py $(BUILD)/export $(CC)

# Installs into a scratch prefix and builds consumers: pkg-config, find_package, FetchContent.
install-test:
	@sh tests/install_test.sh $(BUILD)/install

clean:
	rm -rf $(BUILD)

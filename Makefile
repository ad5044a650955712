# mha.h - build, test and install.
#   make            build the tests and examples
#   make test       the test suite (last line: N passed, M failed)
#   make run        the main demo (examples/seed_questions)
#   make sanitize   the suite under -fsanitize=address,undefined (clang)
#   make matrix     strict builds with gcc, clang, g++, tcc and -m32, each run
#   make refcheck   regenerate the PyTorch vectors into a scratch folder and run the suite on them
#   make install    copy mha.h to $(PREFIX)/include

CC      ?= cc
CXX     ?= c++
PYTHON  ?= /usr/bin/python3
PREFIX  ?= /usr/local
BUILD   ?= build
SCRATCH ?= $(BUILD)/scratch
STRICT   = -std=c99 -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wdouble-promotion -Wvla -Werror
CFLAGS  ?= -O2 -g
LDLIBS   = -lm

SUITE    = tests/test_mha.c tests/test_impl.c
SUITEDEP = $(SUITE) tests/test_util.h tests/ref_case.h tests/ref_vectors.h mha.h
EXAMPLES = seed_questions self_attention cross_attention firmware_static
EXBINS   = $(EXAMPLES:%=$(BUILD)/%)
CONTRACT = $(BUILD)/include_twice $(BUILD)/static_pair $(BUILD)/cpp_tu

.PHONY: all test examples run sanitize matrix refcheck install clean

all: $(BUILD)/test_mha $(CONTRACT) $(EXBINS)

$(BUILD):
	mkdir -p $(BUILD)

# The suite is held to the strict warning set as well.
$(BUILD)/test_mha: $(SUITEDEP) | $(BUILD)
	$(CC) $(CFLAGS) $(STRICT) -Wno-conversion -Wno-double-promotion -Itests $(SUITE) -o $@ $(LDLIBS)

$(BUILD)/include_twice: tests/include_twice.c mha.h | $(BUILD)
	$(CC) $(CFLAGS) $(STRICT) $< -o $@ $(LDLIBS)

$(BUILD)/static_pair: tests/static_a.c tests/static_b.c tests/static_main.c mha.h | $(BUILD)
	$(CC) $(CFLAGS) $(STRICT) tests/static_a.c tests/static_b.c tests/static_main.c -o $@ $(LDLIBS)

$(BUILD)/cpp_tu: tests/cpp_tu.cpp mha.h | $(BUILD)
	$(CXX) $(CFLAGS) -std=c++11 -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Werror $< -o $@ $(LDLIBS)

$(BUILD)/%: examples/%.c examples/example_util.h mha.h | $(BUILD)
	$(CC) $(CFLAGS) $(STRICT) $< -o $@ $(LDLIBS)

examples: $(EXBINS)

test: $(BUILD)/test_mha $(CONTRACT) $(EXBINS)
	@sh tests/run.sh $(BUILD)/test_mha $(CONTRACT) "sh tests/check_includes.sh" \
	    "sh tests/run_examples.sh $(EXBINS)"

run: $(BUILD)/seed_questions
	$(BUILD)/seed_questions

sanitize: | $(BUILD)
	clang -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer \
	    $(STRICT) -Wno-conversion -Wno-double-promotion -Itests $(SUITE) -o $(BUILD)/test_mha_asan $(LDLIBS)
	@sh tests/run.sh $(BUILD)/test_mha_asan

matrix:
	@sh tests/matrix.sh

refcheck: | $(BUILD)
	mkdir -p $(SCRATCH)
	$(PYTHON) tests/gen_vectors.py $(SCRATCH)/ref_vectors.h
	$(CC) $(CFLAGS) -Itests -DREF_VECTORS_FILE='"$(abspath $(SCRATCH))/ref_vectors.h"' $(SUITE) \
	    -o $(BUILD)/test_mha_fresh $(LDLIBS)
	@sh tests/run.sh $(BUILD)/test_mha_fresh

install:
	mkdir -p $(DESTDIR)$(PREFIX)/include
	cp mha.h $(DESTDIR)$(PREFIX)/include/mha.h

clean:
	rm -rf $(BUILD)

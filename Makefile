# relayc: build the library (static and shared), the relayc command and the
# tests. `make help` lists the targets.

BUILD    ?= build
PREFIX   ?= /usr/local
CC       ?= cc
PKGS     := hdf5 openblas cmocka
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs hdf5 openblas 2>/dev/null)
CMOCKA_LIBS := $(shell pkg-config --libs cmocka 2>/dev/null)

OPT      ?= -O2
CFLAGS   ?= $(OPT) -g
WARN     := -std=c11 -Wall -Wextra -Werror -Wno-unused-parameter -Wno-format-truncation -Wno-unknown-warning-option
CPPFLAGS += -D_GNU_SOURCE -Iinclude -Isrc $(PKG_CFLAGS)
ALL_CFLAGS = $(WARN) $(CFLAGS) -fPIC -pthread $(FILE_CFLAGS) $(EXTRA_CFLAGS)
LDLIBS   += $(PKG_LIBS) -lz -lm -pthread

LIB_SRCS := $(sort $(wildcard src/tensor/*.c src/ir/*.c src/op/*.c src/pass/*.c \
              src/runtime/*.c src/backend/*.c src/backend/cpu/*.c src/io/*.c src/train/*.c \
              ad/*.c optim/*.c datasets/*.c))
CLI_SRCS := $(sort $(wildcard src/cli/*.c))
TEST_SRCS := $(sort $(wildcard tests/test_*.c))
EXAMPLE_SRCS := $(sort $(wildcard models/*.c))

LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o)
CLI_OBJS := $(CLI_SRCS:%.c=$(BUILD)/obj/%.o)
TEST_BINS := $(TEST_SRCS:tests/%.c=$(BUILD)/tests/%)
EXAMPLES := $(EXAMPLE_SRCS:models/%.c=$(BUILD)/models/%)

STATIC := $(BUILD)/librelayc.a
SHARED := $(BUILD)/librelayc.so
RELAYC := $(BUILD)/relayc

.PHONY: all bench fuzz fuzz-bins fuzz-ci debug examples demo train test test-unit test-corpus asan test-asan test-asan-clang valgrind test-valgrind install clean help

all: $(STATIC) $(SHARED) $(RELAYC) $(EXAMPLES)

# The optimizers' square roots (of sums of squares: they never set errno)
# vectorize only without errno semantics; the results are the same bits.
$(BUILD)/obj/optim/%.o: FILE_CFLAGS := -fno-math-errno
$(BUILD)/obj/src/backend/cpu/update_%.o: FILE_CFLAGS := -fno-math-errno

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

$(STATIC): $(LIB_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(SHARED): $(LIB_OBJS)
	$(CC) -shared $(ALL_CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(RELAYC): $(CLI_OBJS) $(STATIC)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $(CLI_OBJS) $(STATIC) $(LDLIBS)

$(BUILD)/tests/%: tests/%.c tests/test_util.h $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -Itests -MMD -MP -o $@ $< $(STATIC) $(CMOCKA_LIBS) $(LDLIBS)

# The main job: train LeNet-5 on Fashion-MNIST for one epoch (SGD 0.05,
# momentum 0.9, batch 64), with checkpoints in $(BUILD)/lenet-ckpt (run
# again, it continues from them).
train: $(RELAYC)
	$(RELAYC) train models/lenet.relay --data fashion-mnist --epochs 1 --batch 64 \
	  --optimizer sgd --lr 0.05 --momentum 0.9 --seed 0 --checkpoint-dir $(BUILD)/lenet-ckpt --resume

# LeNet-5 through the command line: type-check it, then run it on the
# committed inputs with the interpreter.
LENET_INPUTS := $(foreach f,$(wildcard tests/run/lenet/in_*.npy),--input $(patsubst in_%.npy,%,$(notdir $f))=$f)
demo: $(RELAYC)
	$(RELAYC) check tests/run/lenet.relay
	$(RELAYC) run tests/run/lenet.relay $(LENET_INPUTS) --out $(BUILD)/demo

# The example training programs in C (models/*.c).
examples: $(EXAMPLES)
$(BUILD)/models/%: models/%.c $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -MMD -MP -o $@ $< $(STATIC) $(LDLIBS)

# Benchmarks (JSON lines), each beside its PyTorch mirror (bench/README.md).
BENCH_THREADS ?= 1
BENCH_SECONDS ?= 10
BENCH_BINS := $(addprefix $(BUILD)/bench/,grad_ratio train_step kernels vm_steps grad_sparse gemm)
$(BUILD)/bench/%: bench/%.c bench/bench_util.c bench/bench_util.h $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -Ibench -o $@ $< bench/bench_util.c $(STATIC) $(LDFLAGS) \
	  -Wl,--wrap=cblas_sgemm -Wl,--wrap=cblas_dgemm $(LDLIBS)
bench: $(BENCH_BINS)
	@for n in mlp lenet charlstm treelstm; do \
	  BUILD=$(BUILD) bench/run $$n --threads $(BENCH_THREADS) --seconds $(BENCH_SECONDS) --peer || exit 1; done
	@for n in mlp lenet charlstm treelstm; do \
	  BUILD=$(BUILD) bench/run $$n --scaling --rounds 3 --seconds $(BENCH_SECONDS) || exit 1; done
	BUILD=$(BUILD) bench/run grad_ratio --threads $(BENCH_THREADS) --seconds 3

# The unit suites, then the .relay corpora through the command line.
# TEST_WRAP runs each binary under a tool (valgrind).
test: test-unit test-corpus

test-unit: $(TEST_BINS) $(RELAYC)
	@fail=0; for t in $(TEST_BINS); do \
	  echo "== $$t"; RELAYC=$(RELAYC) $(TEST_WRAP) $$t || fail=1; done; \
	  exit $$fail

test-corpus: $(RELAYC)
	@RELAYC="$(TEST_WRAP) $(RELAYC)" sh tests/run_corpus.sh

# A debug build (build-debug/): -O0, and ry_ir_verify between passes.
debug:
	$(MAKE) BUILD=build-debug OPT=-O0 EXTRA_CFLAGS=-DRY_DEBUG all

# ASan+UBSan build in its own folder.
SAN_FLAGS := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
asan:
	$(MAKE) BUILD=build-asan CFLAGS="$(SAN_FLAGS)" LDFLAGS="-fsanitize=address,undefined" all $(patsubst $(BUILD)/%,build-asan/%,$(TEST_BINS))
test-asan:
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
	  $(MAKE) BUILD=build-asan CFLAGS="$(SAN_FLAGS)" LDFLAGS="-fsanitize=address,undefined" test
# The same with clang, whose UBSan also stops at arithmetic on null pointers.
test-asan-clang:
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
	  $(MAKE) BUILD=build-clang CC=clang CFLAGS="$(SAN_FLAGS)" LDFLAGS="-fsanitize=address,undefined" test

# libFuzzer targets (tests/fuzz/fuzz_*.c, seeds in tests/fuzz/<target>/),
# built with clang in build-fuzz/: the library with coverage hooks, ASan and
# UBSan, each target linked with libFuzzer's main.
FUZZ_TARGETS := parse grad npy idx treebank text checkpoint
FUZZ_BINS = $(FUZZ_TARGETS:%=$(BUILD)/fuzz/fuzz_%)
FUZZ_SAN := -O1 -g -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
fuzz:
	$(MAKE) BUILD=build-fuzz CC=clang CFLAGS="$(FUZZ_SAN)" LDFLAGS="-fsanitize=address,undefined" fuzz-bins
fuzz-bins: $(FUZZ_BINS)
$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_util.h $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -fsanitize=fuzzer -o $@ $< $(STATIC) $(LDFLAGS) $(LDLIBS)
# Each target for FUZZ_SECONDS on its seeds (two at a time), in a scratch
# corpus so the committed seeds stay small; any crash, leak, timeout or
# out-of-memory fails, and libFuzzer leaves the input in build-fuzz/crashes/.
FUZZ_SECONDS ?= 30
fuzz-ci: fuzz
	@mkdir -p build-fuzz/crashes && \
	  printf '%s\n' $(FUZZ_TARGETS) | xargs -P 2 -I{} sh tools/fuzz-run.sh {} $(FUZZ_SECONDS)

VALGRIND := valgrind --quiet --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect
test-valgrind:
	$(MAKE) BUILD=build-vg OPT=-O1 TEST_WRAP="$(VALGRIND)" test

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include/relayc
	install -m 755 $(RELAYC) $(DESTDIR)$(PREFIX)/bin/relayc
	install -m 644 $(STATIC) $(SHARED) $(DESTDIR)$(PREFIX)/lib/
	install -m 644 include/relayc/*.h $(DESTDIR)$(PREFIX)/include/relayc/

clean:
	rm -rf build build-asan build-clang build-vg build-debug build-fuzz

help:
	@echo "make            build $(STATIC), $(SHARED) and $(RELAYC)"
	@echo "make train      train LeNet-5 on Fashion-MNIST (1 epoch) and print the test accuracy"
	@echo "make demo       run LeNet-5 through relayc check and relayc run"
	@echo "make test       unit suites and the .relay corpora"
	@echo "make test-asan  the same under ASan+UBSan (build-asan/)"
	@echo "make test-asan-clang  the same built with clang (build-clang/)"
	@echo "make test-valgrind  the same under valgrind (build-vg/)"
	@echo "make fuzz       the libFuzzer targets (build-fuzz/fuzz/, clang)"
	@echo "make fuzz-ci    each fuzz target for FUZZ_SECONDS=$(FUZZ_SECONDS) on its seeds"
	@echo "make install    into PREFIX=$(PREFIX)"

-include $(LIB_OBJS:.o=.d) $(CLI_OBJS:.o=.d) $(TEST_BINS:=.d)

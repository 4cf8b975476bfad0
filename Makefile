# relayc: build the library (static and shared), the relayc command and the
# tests. `make help` lists the targets.

BUILD    ?= build
PREFIX   ?= /usr/local
CC       ?= cc
PKGS     := hdf5 openblas cmocka
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs hdf5 openblas 2>/dev/null)
CMOCKA_LIBS := $(shell pkg-config --libs cmocka 2>/dev/null)

# MPI (data-parallel training, src/dist/): on when pkg-config knows ompi-c
# or an mpicc is on the PATH; MPI=0 builds without it (the same API, one
# rank). Only src/dist/comm_mpi.c sees mpi.h.
MPI_PC   := $(shell pkg-config --exists ompi-c 2>/dev/null && echo ompi-c)
MPI      ?= $(if $(MPI_PC)$(shell command -v mpicc 2>/dev/null),1,0)
ifeq ($(MPI),1)
MPI_CFLAGS := $(if $(MPI_PC),$(shell pkg-config --cflags ompi-c),$(shell mpicc --showme:compile 2>/dev/null))
MPI_LIBS   := $(if $(MPI_PC),$(shell pkg-config --libs ompi-c),$(shell mpicc --showme:link 2>/dev/null))
DIST_SRC   := src/dist/comm_mpi.c
else
DIST_SRC   := src/dist/comm_none.c
endif
MPIRUN   ?= mpirun --oversubscribe

# OpenCL (the accelerator target, src/backend/opencl/): on when the ICD
# loader's and CLBlast's headers are installed; OPENCL=0 builds without it
# (the target then says it is not built in). Only src/backend/opencl/ sees
# CL/cl.h and clblast_c.h.
OPENCL   ?= $(shell test -f /usr/include/CL/cl.h -a -f /usr/include/clblast_c.h && echo 1 || echo 0)
ifeq ($(OPENCL),1)
OPENCL_SRC  := $(sort $(wildcard src/backend/opencl/*.c))
OPENCL_LIBS := -lclblast -lOpenCL
CPPFLAGS    += -DRY_HAVE_OPENCL
endif

OPT      ?= -O2
CFLAGS   ?= $(OPT) -g
WARN     := -std=c11 -Wall -Wextra -Werror -Wno-unused-parameter -Wno-format-truncation -Wno-unknown-warning-option
CPPFLAGS += -D_GNU_SOURCE -Iinclude -Isrc $(PKG_CFLAGS)
# Hidden by default: the shared library exports what include/relayc/
# declares (base.h's RY_BEGIN_API) and nothing else.
ALL_CFLAGS = $(WARN) $(CFLAGS) -fPIC -fvisibility=hidden -pthread $(FILE_CFLAGS) $(EXTRA_CFLAGS)
# CUDA (src/backend/cuda/): on when the toolkit's headers are found
# (CUDA_HOME, default /usr/local/cuda); CUDA=0 builds without it. Its
# libraries are loaded with dlopen when first used, so nothing of CUDA is
# linked: the same build runs on a machine without the toolkit or a GPU.
CUDA_HOME ?= /usr/local/cuda
CUDA     ?= $(shell test -f $(CUDA_HOME)/include/nvrtc.h && echo 1 || echo 0)
ifeq ($(CUDA),1)
CUDA_SRC := $(sort $(wildcard src/backend/cuda/*.c))
CPPFLAGS += -DRY_HAVE_CUDA
$(BUILD)/obj/src/backend/cuda/%.o: FILE_CFLAGS := -I$(CUDA_HOME)/include
endif
LDLIBS   += $(PKG_LIBS) $(MPI_LIBS) $(OPENCL_LIBS) -ldl -lz -lm -pthread

LIB_SRCS := $(sort $(wildcard src/tensor/*.c src/ir/*.c src/op/*.c src/pass/*.c \
              src/runtime/*.c src/backend/*.c src/backend/device/*.c src/backend/cpu/*.c src/backend/c/*.c src/io/*.c src/train/*.c \
              ad/*.c optim/*.c datasets/*.c)) $(DIST_SRC) $(OPENCL_SRC) $(CUDA_SRC)
CLI_SRCS := $(sort $(wildcard src/cli/*.c))
TEST_SRCS := $(sort $(wildcard tests/test_*.c))
EXAMPLE_SRCS := $(sort $(wildcard models/*.c))

LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/gen/c_rt.o
CLI_OBJS := $(CLI_SRCS:%.c=$(BUILD)/obj/%.o)
TEST_BINS := $(TEST_SRCS:tests/%.c=$(BUILD)/tests/%)
EXAMPLES := $(EXAMPLE_SRCS:models/%.c=$(BUILD)/models/%)

STATIC := $(BUILD)/librelayc.a
# The shared library is versioned: librelayc.so.MAJOR is its SONAME
# (RELAYC_VERSION in include/relayc/base.h).
VERSION  := $(shell sed -n 's/^\#define RELAYC_VERSION "\(.*\)"/\1/p' include/relayc/base.h)
ABI      := $(firstword $(subst ., ,$(VERSION)))
SHARED := $(BUILD)/librelayc.so
SHARED_REAL := $(BUILD)/librelayc.so.$(VERSION)
RELAYC := $(BUILD)/relayc

.PHONY: all bench bench-bins fuzz fuzz-bins fuzz-ci debug examples demo train test test-unit test-corpus test-api test-mpi test-oom coverage asan test-asan test-asan-clang valgrind test-valgrind install clean help

all: $(STATIC) $(SHARED) $(RELAYC) $(EXAMPLES)

# The optimizers' square roots (of sums of squares: they never set errno)
# vectorize only without errno semantics; the results are the same bits.
$(BUILD)/obj/optim/%.o: FILE_CFLAGS := -fno-math-errno
$(BUILD)/obj/src/backend/cpu/update_%.o: FILE_CFLAGS := -fno-math-errno
$(BUILD)/obj/src/dist/comm_mpi.o: FILE_CFLAGS := $(MPI_CFLAGS)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

# The export runtime (src/backend/c/rt/*.c) as strings in the library.
C_RT_SRCS := $(sort $(wildcard src/backend/c/rt/*.c))
$(BUILD)/gen/c_rt.c: $(C_RT_SRCS) tools/embed_c_rt.sh
	@mkdir -p $(dir $@)
	sh tools/embed_c_rt.sh $(C_RT_SRCS) > $@.tmp && mv $@.tmp $@
$(BUILD)/obj/gen/c_rt.o: $(BUILD)/gen/c_rt.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -c $< -o $@

$(STATIC): $(LIB_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(SHARED_REAL): $(LIB_OBJS)
	$(CC) -shared -Wl,-soname,librelayc.so.$(ABI) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(SHARED): $(SHARED_REAL)
	ln -sf librelayc.so.$(VERSION) $(BUILD)/librelayc.so.$(ABI)
	ln -sf librelayc.so.$(VERSION) $@

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
BENCH_BINS := $(addprefix $(BUILD)/bench/,grad_ratio train_step kernels vm_steps grad_sparse gemm device_gemm device_conv export_infer soak autobatch_cost)
BENCH_SHARED := bench/bench_util.c bench/bench_models.c
$(BUILD)/bench/%: bench/%.c $(BENCH_SHARED) bench/bench_util.h bench/bench_models.h $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -Ibench -o $@ $< $(BENCH_SHARED) $(STATIC) $(LDFLAGS) \
	  -Wl,--wrap=cblas_sgemm -Wl,--wrap=cblas_dgemm $(LDLIBS)
bench-bins: $(BENCH_BINS)
bench: $(BENCH_BINS)
	@for n in mlp lenet charlstm treelstm; do \
	  BUILD=$(BUILD) bench/run $$n --threads $(BENCH_THREADS) --seconds $(BENCH_SECONDS) --peer || exit 1; done
	@for n in mlp lenet charlstm treelstm; do \
	  BUILD=$(BUILD) bench/run $$n --scaling --rounds 3 --seconds $(BENCH_SECONDS) || exit 1; done
	BUILD=$(BUILD) bench/run grad_ratio --threads $(BENCH_THREADS) --seconds 3

# The unit suites, the .relay corpora through the command line, the public
# API as a user meets it, then (MPI builds, about 12 s) test-mpi. TEST_WRAP
# runs each binary under a tool (valgrind). The sanitizer and valgrind runs
# leave test-mpi out (TEST_MPI=0): OpenMPI's own allocations at MPI_Init
# are not ours.
TEST_MPI ?= $(MPI)
test: test-unit test-corpus test-api $(if $(filter 1,$(TEST_MPI)),test-mpi)

# TEST_SKIP: suites a wrapped or sanitized run leaves out; TEST_JOBS:
# how many run at once (tools/run-suites.sh: each suite's time, and the
# failed ones named again at the end, where a log's tail shows them).
# TEST_FIRST: suites started first (the longest, so two jobs end together).
TEST_JOBS ?= 1
TEST_RUN = $(filter-out $(TEST_SKIP),$(filter $(TEST_BINS),$(TEST_FIRST)) $(filter-out $(TEST_FIRST),$(TEST_BINS)))
test-unit: $(TEST_BINS) $(RELAYC)
	@RELAYC=$(RELAYC) TEST_WRAP="$(TEST_WRAP)" sh tools/run-suites.sh $(TEST_JOBS) $(BUILD)/test-logs $(TEST_RUN)

# Data-parallel training under mpirun (MPI=1 builds): the C API suite on
# 2 and 3 ranks, then the command line's (tests/mpi/run_cli.sh: mpirun
# relayc train, a rank killed, a rank hung). As root, mpirun needs the
# OMPI_ALLOW_RUN_AS_ROOT pair, set here.
MPI_ENV := OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
$(BUILD)/tests/mpi/test_dist: tests/mpi/test_dist.c tests/test_util.h $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -Itests -MMD -MP -o $@ $< $(STATIC) $(CMOCKA_LIBS) $(LDLIBS)
$(BUILD)/tests/mpi/ckpt_same: tests/mpi/ckpt_same.c $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -MMD -MP -o $@ $< $(STATIC) $(LDLIBS)
ifeq ($(MPI),1)
test-mpi: $(BUILD)/tests/mpi/test_dist $(BUILD)/tests/mpi/ckpt_same $(RELAYC)
	$(MPI_ENV) timeout 300 $(MPIRUN) -np 2 $(BUILD)/tests/mpi/test_dist
	$(MPI_ENV) timeout 300 $(MPIRUN) -np 3 $(BUILD)/tests/mpi/test_dist
	$(MPI_ENV) MPIRUN="$(MPIRUN)" RELAYC=$(RELAYC) CKPT_SAME=$(BUILD)/tests/mpi/ckpt_same \
	  sh tests/mpi/run_cli.sh
else
test-mpi:
	@echo "test-mpi: this build has no MPI (MPI=0, or no libopenmpi-dev): nothing to run" >&2; exit 1
endif

test-corpus: $(RELAYC)
	@RELAYC="$(TEST_WRAP) $(RELAYC)" sh tests/run_corpus.sh

# The public API as a user meets it: the exported symbols are exactly the
# functions the headers declare, relayc.h includes every header, the
# README's C blocks compile and link, a C++ program links the shared library.
test-api: $(STATIC) $(SHARED)
	@BUILD=$(BUILD) CC="$(CC)" CXX="$(CXX)" CPPFLAGS="$(CPPFLAGS)" CFLAGS="$(CFLAGS)" \
	  LDFLAGS="$(LDFLAGS)" LDLIBS="$(LDLIBS)" TEST_WRAP="$(TEST_WRAP)" sh tests/api/run.sh

# A debug build (build-debug/): -O0, and ry_ir_verify between passes.
debug:
	$(MAKE) BUILD=build-debug OPT=-O0 EXTRA_CFLAGS=-DRY_DEBUG all

# ASan+UBSan build in its own folder. intercept_tls_get_addr=0: GCC 12's
# and clang 14's runtimes take some of glibc 2.36's dynamic TLS blocks (PoCL
# and the libraries it dlopens hold them) for the pre-2.25 layout, read a
# bogus range from them and crash LeakSanitizer's tracer at exit ("Tracer
# caught signal 11", test_opencl_conv every run); leaks are still found
# through every other root.
SAN_ENV := ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:intercept_tls_get_addr=0 \
  UBSAN_OPTIONS=print_stacktrace=1
SAN_FLAGS := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
asan:
	$(MAKE) BUILD=build-asan CFLAGS="$(SAN_FLAGS)" LDFLAGS="-fsanitize=address,undefined" all $(patsubst $(BUILD)/%,build-asan/%,$(TEST_BINS))
# test_memory measures peak RSS, which ASan's shadow memory and quarantine
# (and valgrind's own, below) make meaningless: it runs in `make test`.
test-asan:
	$(SAN_ENV) \
	  $(MAKE) BUILD=build-asan CFLAGS="$(SAN_FLAGS)" LDFLAGS="-fsanitize=address,undefined" TEST_MPI=0 \
	  TEST_SKIP=build-asan/tests/test_memory test
# Allocation failure alone (tests/test_oom.c, also one of the unit suites):
# every allocation of parsing, checking, differentiating, the passes,
# compiling, a trainer, a step, a checkpoint save and runs on the VM and
# the interpreter fails once (a sample in large stages), in this build and
# under ASan+UBSan, where LeakSanitizer finds what a failure leaks.
test-oom: $(BUILD)/tests/test_oom
	$(BUILD)/tests/test_oom
	$(MAKE) BUILD=build-asan CFLAGS="$(SAN_FLAGS)" LDFLAGS="-fsanitize=address,undefined" build-asan/tests/test_oom
	$(SAN_ENV) build-asan/tests/test_oom
# The same with clang, whose UBSan also stops at arithmetic on null pointers.
test-asan-clang:
	$(SAN_ENV) \
	  $(MAKE) BUILD=build-clang CC=clang CFLAGS="$(SAN_FLAGS)" LDFLAGS="-fsanitize=address,undefined" TEST_MPI=0 \
	  TEST_SKIP=build-clang/tests/test_memory test

# Line and branch coverage of the library by `make test` (lcov): an -O0
# build in build-cov/, the summary printed, the HTML in build-cov/html/.
COV_RC := --rc lcov_branch_coverage=1
coverage:
	rm -rf build-cov
	$(MAKE) BUILD=build-cov OPT=-O0 CFLAGS="-O0 -g --coverage" LDFLAGS="--coverage" test
	lcov -q $(COV_RC) --capture --directory build-cov/obj --output-file build-cov/all.info
	lcov -q $(COV_RC) --extract build-cov/all.info '$(CURDIR)/src/*' '$(CURDIR)/ad/*' \
	  '$(CURDIR)/optim/*' '$(CURDIR)/datasets/*' --output-file build-cov/lib.info
	lcov -q $(COV_RC) --remove build-cov/lib.info '$(CURDIR)/src/cli/*' --output-file build-cov/coverage.info
	genhtml -q $(COV_RC) build-cov/coverage.info --output-directory build-cov/html
	lcov $(COV_RC) --summary build-cov/coverage.info

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
# (test_memory would also take 4 minutes here.) test_oom_libc interposes
# malloc, which valgrind owns; test_deep recurses 100,000 levels deep
# several times and test_oom repeats every stage once per allocation
# (minutes each under valgrind); the OpenCL suites run PoCL's LLVM
# compiler for every kernel, and test_cuda_gen NVRTC's: all run under
# ASan instead. The export suites spend their time in relayc and the C
# compilers, outside valgrind's reach; they run the artifacts they build
# under valgrind themselves, in every stage.
VG_SKIP := test_memory test_oom_libc test_deep test_oom test_opencl test_opencl_ops test_opencl_conv test_opencl_train test_cuda_gen test_cuda \
  test_export test_export_programs
# The longest under valgrind (minutes each on 2 cores) start first; the
# million-deep cases run their 100,000 forms (RY_TEST_LIGHT, test_util.h).
VG_FIRST := test_interp test_fuse test_vm test_vm_plan test_checkpoint test_pass test_train test_autobatch test_optim_grads test_conv_split test_datasets
test-valgrind:
	RY_TEST_LIGHT=1 $(MAKE) BUILD=build-vg OPT=-O1 TEST_WRAP="$(VALGRIND)" TEST_MPI=0 TEST_JOBS=2 \
	  TEST_FIRST="$(VG_FIRST:%=build-vg/tests/%)" TEST_SKIP="$(VG_SKIP:%=build-vg/tests/%)" test

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include/relayc
	install -m 755 $(RELAYC) $(DESTDIR)$(PREFIX)/bin/relayc
	install -m 644 $(STATIC) $(SHARED_REAL) $(DESTDIR)$(PREFIX)/lib/
	ln -sf librelayc.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/librelayc.so.$(ABI)
	ln -sf librelayc.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/librelayc.so
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' -e 's|@MPI_LIBS@|$(MPI_LIBS)|' tools/relayc.pc.in \
	  > $(DESTDIR)$(PREFIX)/lib/pkgconfig/relayc.pc
	install -m 644 include/relayc/*.h $(DESTDIR)$(PREFIX)/include/relayc/

clean:
	rm -rf build build-asan build-clang build-vg build-debug build-cov build-nompi build-fuzz

help:
	@echo "make            build $(STATIC), $(SHARED) and $(RELAYC)"
	@echo "make train      train LeNet-5 on Fashion-MNIST (1 epoch) and print the test accuracy"
	@echo "make demo       run LeNet-5 through relayc check and relayc run"
	@echo "make test       unit suites and the .relay corpora (and test-mpi with MPI)"
	@echo "make test-mpi   data-parallel training under mpirun, 2 and 3 ranks"
	@echo "make MPI=0 BUILD=build-nompi   the library without MPI (one rank)"
	@echo "make test-asan  the same under ASan+UBSan (build-asan/)"
	@echo "make test-asan-clang  the same built with clang (build-clang/)"
	@echo "make test-oom   every allocation of each stage failed once, plain and under ASan"
	@echo "make test-valgrind  the same under valgrind (build-vg/)"
	@echo "make coverage   line and branch coverage of the library by make test (lcov)"
	@echo "make fuzz       the libFuzzer targets (build-fuzz/fuzz/, clang)"
	@echo "make fuzz-ci    each fuzz target for FUZZ_SECONDS=$(FUZZ_SECONDS) on its seeds"
	@echo "make install    into PREFIX=$(PREFIX)"

-include $(LIB_OBJS:.o=.d) $(CLI_OBJS:.o=.d) $(TEST_BINS:=.d)

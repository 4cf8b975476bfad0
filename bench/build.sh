#!/bin/sh
# build.sh: builds the benchmark programs (bench/*.c) against the static
# library, until the Makefile has a rule for them. Run from anywhere:
#   bench/build.sh            -> build/bench/{grad_ratio,train_step}
#   BUILD=build-x CC=clang CFLAGS="-O1 -g -fsanitize=address,undefined" \
#   LDFLAGS=-fsanitize=address,undefined bench/build.sh
# cblas_sgemm/dgemm are wrapped at link time so the programs can report the
# share of time spent in GEMM (bench_util.c).
set -e
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
CC=${CC:-cc}
CFLAGS=${CFLAGS:-"-O2 -g"}
LDFLAGS=${LDFLAGS:-}
WARN="-std=c11 -Wall -Wextra -Werror -Wno-unused-parameter -Wno-format-truncation -Wno-unknown-warning-option"
PKG_CFLAGS=$(pkg-config --cflags hdf5 openblas)
PKG_LIBS=$(pkg-config --libs hdf5 openblas)
make --no-print-directory BUILD="$BUILD" CC="$CC" CFLAGS="$CFLAGS" LDFLAGS="$LDFLAGS" \
    "$BUILD/librelayc.a" >&2
mkdir -p "$BUILD/bench"
for prog in grad_ratio train_step kernels vm_steps grad_sparse gemm soak; do
    # shellcheck disable=SC2086
    $CC $WARN $CFLAGS -D_GNU_SOURCE -pthread -Iinclude -Isrc -Ibench $PKG_CFLAGS \
        -o "$BUILD/bench/$prog" "bench/$prog.c" bench/bench_util.c bench/bench_models.c "$BUILD/librelayc.a" \
        $LDFLAGS -Wl,--wrap=cblas_sgemm -Wl,--wrap=cblas_dgemm $PKG_LIBS -lz -lm -pthread
done

#!/bin/sh
# tests/gpu/run.sh: the CUDA target proven on a machine with a GPU, in one
# call, within 8 minutes. From the repository root:
#
#   tests/gpu/run.sh            # build with CUDA, test, train, bench; PASS/FAIL per part
#
# Parts: build (CUDA=1), device (relayc devices lists cuda:0), the CUDA
# suites (test_cuda; test_opencl, test_opencl_ops, test_opencl_conv, test_opencl_train with
# RELAYC_TEST_TARGET=cuda: every corpus program and gradient, the nn
# family and training against the CPU engine), MLP and LeNet trained one
# epoch on --target cuda (their test accuracy), bench/train_step --target
# cuda for the four models (the MLP at batch 64 and 1024) beside
# bench/device_gemm (cuBLAS's rate for the MLP's GEMM shapes, measured in
# the same run). Every part has its own time limit out of a total
# budget, so the script never hangs; without a GPU it reports the device
# part's FAIL with the driver's reason and skips what needs one.
#
# Environment: TARGET (default cuda; TARGET=opencl runs the same parts on
# PoCL, which is how the script's GPU half was tried without a GPU),
# BUDGET (seconds, default 470), JOBS (make -j, default the
# cores), FASHION_MNIST (IDX directory, default the Debian package's),
# SST (PTB trees for the Tree-LSTM, default ../shared/data/sst), OUT (a
# directory to copy the log and JSON lines into, optional).
set -u
cd "$(dirname "$0")/../.." || exit 2

TARGET=${TARGET:-cuda}
BUDGET=${BUDGET:-470}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 4)}
FASHION_MNIST=${FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
SST=${SST:-../shared/data/sst}
BUILD=build-gpu
LOG=$BUILD/gpu-run.log
START=$(date +%s)
FAILED=0
mkdir -p $BUILD
: >$LOG

left() { echo $((BUDGET - ($(date +%s) - START))); }

# part NAME LIMIT CMD...: runs CMD with at most LIMIT seconds (less if the
# budget is nearly spent), its output in the log; prints PASS or FAIL
part() {
    name=$1 limit=$2
    shift 2
    l=$(left)
    [ "$limit" -gt "$l" ] && limit=$l
    if [ "$limit" -le 0 ]; then
        echo "FAIL  $name (out of time)"
        FAILED=$((FAILED + 1))
        return 1
    fi
    t0=$(date +%s)
    echo "=== $name (limit ${limit}s)" >>$LOG
    timeout -k 5 "$limit" "$@" >>$LOG 2>&1
    rc=$?
    dt=$(($(date +%s) - t0))
    if [ $rc -eq 0 ]; then
        echo "PASS  $name (${dt}s)"
    else
        [ $rc -eq 124 ] && why="timed out" || why="exit $rc"
        echo "FAIL  $name (${dt}s, $why; last lines:)"
        tail -5 $LOG | sed 's/^/        /'
        FAILED=$((FAILED + 1))
    fi
    return $rc
}

skip() { echo "SKIP  $1 ($2)"; }

finish() {
    echo "--- $FAILED part(s) failed; $(($(date +%s) - START))s in all; log: $LOG"
    if [ -n "${OUT:-}" ]; then cp $LOG "$OUT/" 2>/dev/null; grep '^{' $LOG >"$OUT/gpu-bench.jsonl" 2>/dev/null; fi
    [ $FAILED -eq 0 ]
    exit $?
}

# ---- build ----
part build 200 make -j"$JOBS" BUILD=$BUILD CUDA=1 all \
    $BUILD/tests/test_cuda $BUILD/tests/test_opencl $BUILD/tests/test_opencl_ops \
    $BUILD/tests/test_opencl_train $BUILD/tests/test_opencl_conv $BUILD/tests/test_cuda_gen \
    $BUILD/bench/train_step $BUILD/bench/device_gemm $BUILD/bench/device_conv || finish
RELAYC=$BUILD/relayc
export RELAYC

# ---- the device ----
$RELAYC devices >>$LOG 2>&1
if ! $RELAYC devices 2>/dev/null | grep -q "^$TARGET:0"; then
    echo "FAIL  device: $($RELAYC devices 2>&1 | grep "^($TARGET" || echo "relayc devices lists no $TARGET:0")"
    FAILED=$((FAILED + 1))
    part "test_cuda (its CPU-side tests)" 60 $BUILD/tests/test_cuda
    part "test_cuda_gen (NVRTC, no GPU needed)" 90 $BUILD/tests/test_cuda_gen
    skip "the device parts" "no $TARGET device"
    finish
fi
echo "PASS  device: $($RELAYC devices | grep "^$TARGET:0")"

# ---- the CUDA suites ----
part test_cuda 60 $BUILD/tests/test_cuda
part "test_opencl on $TARGET (corpora and gradients vs the CPU)" 120 \
    env RELAYC_TEST_TARGET=$TARGET $BUILD/tests/test_opencl
part "test_opencl_ops on $TARGET (nn family vs the CPU)" 90 env RELAYC_TEST_TARGET=$TARGET $BUILD/tests/test_opencl_ops
part "test_opencl_conv on $TARGET (both convolution paths vs the CPU)" 60 env RELAYC_TEST_TARGET=$TARGET $BUILD/tests/test_opencl_conv
part "test_opencl_train on $TARGET (training vs the CPU)" 60 env RELAYC_TEST_TARGET=$TARGET $BUILD/tests/test_opencl_train
grep -E "corpora:|training step:" $LOG | sed 's/^/      /'

# ---- training one epoch (the command `make train` runs, on the device) ----
if [ -f "$FASHION_MNIST/train-images-idx3-ubyte.gz" ] || [ -f "$FASHION_MNIST/train-images-idx3-ubyte" ]; then
    for model in mlp lenet; do
        rm -rf $BUILD/ckpt-$model
        n0=$(wc -l <$LOG)
        part "train $model 1 epoch on $TARGET" 90 $RELAYC train models/$model.relay \
            --data fashion-mnist:"$FASHION_MNIST" --epochs 1 --batch 64 --optimizer sgd --lr 0.05 \
            --momentum 0.9 --seed 0 --target $TARGET --checkpoint-dir $BUILD/ckpt-$model
        tail -n +$((n0 + 1)) $LOG | grep -i "accuracy" | tail -1 | sed "s/^/      $model: /"
    done
else
    echo "FAIL  train mlp, lenet (no Fashion-MNIST at $FASHION_MNIST: set FASHION_MNIST)"
    FAILED=$((FAILED + 1))
fi

# ---- benchmarks: the step beside cuBLAS's own GEMM rate ----
for b in 64 1024; do
    part "device_gemm mlp batch $b (the device's BLAS)" 30 $BUILD/bench/device_gemm --target $TARGET --batch $b --calls 100
    part "train_step mlp batch $b on $TARGET" 30 $BUILD/bench/train_step mlp --target $TARGET --seconds 5 --batch $b
done
part "device_conv on $TARGET (direct against GEMM convolutions)" 40 $BUILD/bench/device_conv --target $TARGET --calls 20
for m in lenet charlstm treelstm; do
    part "train_step $m on $TARGET" 40 $BUILD/bench/train_step $m --target $TARGET --seconds 5 --sst "$SST"
done
grep '^{' $LOG | sed 's/^/      /'
finish

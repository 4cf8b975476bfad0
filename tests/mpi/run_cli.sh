#!/bin/sh
# run_cli.sh: `mpirun relayc train` (make test-mpi). Two ranks with
# --deterministic print the losses one process prints with the same
# --shards; a rank killed mid-run ends the job with mpirun's message; a
# rank that hangs (SIGSTOP) makes the other stop after --dist-timeout with
# its own message; on --target opencl the job writes one device process's
# checkpoint. Each within a bound, never a hang.
set -u
RELAYC=${RELAYC:-build/relayc}
MPIRUN=${MPIRUN:-mpirun --oversubscribe}
T=$(mktemp -d build-test-mpi-cli-XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$T"' EXIT
fail=0
cat > "$T/m.relay" <<'RELAY'
#[version = "0.0.5"]
// data: x y
// predict-data: x
// init: w1=kaiming_uniform b1=zeros w2=xavier_uniform b2=zeros
def @predict(%x: Tensor[(n, 4), float32], %w1: Tensor[(8, 4), float32], %b1: Tensor[(8), float32], %w2: Tensor[(3, 8), float32], %b2: Tensor[(3), float32]) -> Tensor[(n, 3), float32] {
  %0 = nn.dense(%x, %w1, units=8);
  %1 = nn.relu(nn.bias_add(%0, %b1));
  nn.bias_add(nn.dense(%1, %w2, units=3), %b2)
}
def @loss(%x: Tensor[(n, 4), float32], %y: Tensor[(n), int32], %w1: Tensor[(8, 4), float32], %b1: Tensor[(8), float32], %w2: Tensor[(3, 8), float32], %b2: Tensor[(3), float32]) -> float32 {
  %0 = @predict(%x, %w1, %b1, %w2, %b2);
  %1 = nn.log_softmax(%0, axis=-1);
  %2 = one_hot(%y, 1f, 0f, depth=3, axis=-1, dtype="float32");
  negative(mean(sum(multiply(%1, %2), axis=[1])))
}
RELAY
DATA="--data npy:tests/train/x.npy,tests/train/y.npy --batch 10 --lr 0.1 --momentum 0.9 --threads 1"

# The ranks of the job under the timeout whose pid is $1 (timeout, then
# mpirun, then the ranks).
ranks() {
    for m in $(pgrep -P "$1"); do pgrep -P "$m"; done
}

# The last rank of that job once both have started and had SECONDS ($2) to
# get going (a loaded machine starts them late), or nothing after 30 s.
started_rank() {
    i=0
    while [ $i -lt 150 ]; do
        r=$(ranks "$1")
        if [ "$(printf '%s\n' "$r" | grep -c .)" -ge 2 ]; then
            sleep "$2"
            printf '%s\n' "$r" | tail -n 1
            return
        fi
        sleep 0.2
        i=$((i + 1))
    done
}

command -v pgrep > /dev/null || { echo "FAIL pgrep is missing (procps: tools/install-deps.sh)"; exit 1; }

check() { # name, condition status
    if [ "$2" -eq 0 ]; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi
}

# 1. the same printed losses and checkpoint step as one process
$RELAYC train "$T/m.relay" $DATA --steps 9 --deterministic --shards 2 --quiet \
    --csv "$T/one.csv" --log-every 1 > "$T/one.out" 2>&1
timeout 60 $MPIRUN -np 2 $RELAYC train "$T/m.relay" $DATA --steps 9 --deterministic --quiet \
    --csv "$T/two.csv" --log-every 1 --checkpoint-dir "$T/ck" > "$T/two.out" 2>&1
rc=$?
grep -v '^checkpoint\|^data parallel' "$T/two.out" > "$T/two.loss"
# the CSV's step, epoch and loss columns (its time columns differ)
cut -d, -f1-4 "$T/one.csv" > "$T/one.cols"
cut -d, -f1-4 "$T/two.csv" > "$T/two.cols"
cmp -s "$T/one.out" "$T/two.loss" && cmp -s "$T/one.cols" "$T/two.cols" && [ $rc -eq 0 ] &&
    [ -f "$T/ck/ckpt-9.h5" ] && [ "$(wc -l < "$T/one.cols")" -eq 10 ]
check "mpirun -np 2 --deterministic prints one process's losses (CSV too)" $?

# 1b. the same with the optimizer state sharded (Adam: two slots)
$RELAYC train "$T/m.relay" $DATA --optimizer adam --lr 0.01 --steps 6 --deterministic \
    --shards 2 --quiet --log-every 1 > "$T/one-adam.out" 2>&1
timeout 60 $MPIRUN -np 2 $RELAYC train "$T/m.relay" $DATA --optimizer adam --lr 0.01 --steps 6 \
    --deterministic --shard-optimizer --quiet --log-every 1 > "$T/zero.out" 2>&1
rc=$?
grep -v '^data parallel' "$T/zero.out" > "$T/zero.loss"
cmp -s "$T/one-adam.out" "$T/zero.loss" && [ $rc -eq 0 ] && grep -q "^steps 6" "$T/zero.out"
check "mpirun -np 2 --shard-optimizer prints one process's losses" $?

# 1c. --target opencl: 2 ranks with --deterministic write one device
# process's checkpoint bit for bit (skipped, saying so, without a device)
if $RELAYC devices 2>/dev/null | grep -q '^opencl'; then
    $RELAYC train "$T/m.relay" $DATA --steps 6 --deterministic --shards 2 --quiet \
        --target opencl --checkpoint-dir "$T/cl1" > "$T/cl-one.out" 2>&1
    timeout 60 $MPIRUN -np 2 $RELAYC train "$T/m.relay" $DATA --steps 6 --deterministic --quiet \
        --target opencl --checkpoint-dir "$T/cl2" > "$T/cl-two.out" 2>&1
    rc=$?
    [ $rc -eq 0 ] && grep -q "^steps 6" "$T/cl-two.out" &&
        ${CKPT_SAME:-build/tests/mpi/ckpt_same} "$T/m.relay" "$T/cl1/ckpt-6.h5" "$T/cl2/ckpt-6.h5"
    check "mpirun -np 2 --deterministic --target opencl: one opencl process's checkpoint" $?
else
    echo "skip mpirun --target opencl: no OpenCL device ($RELAYC devices lists none)"
fi

# 2. resume that run with one process, to step 12
$RELAYC train "$T/m.relay" $DATA --steps 12 --deterministic --shards 2 --quiet \
    --checkpoint-dir "$T/ck" --resume > "$T/resume.out" 2>&1
grep -q "^steps 12" "$T/resume.out" && [ -f "$T/ck/ckpt-12.h5" ]
check "one process resumes the 2-rank checkpoint" $?

# 2b. a rank killed at a random step (once the checkpoint of step K, 5 <=
# K < 150, is there), the run resumed on 3 ranks with the optimizer
# sharded: at step 600 the parameters, state and step counts of one
# process's uninterrupted run, bit for bit
K=$(( $(od -An -N2 -tu2 /dev/urandom) % 145 + 5 ))
RUN="--batch 12 --steps 600 --deterministic --shards 6 --quiet"
$RELAYC train "$T/m.relay" $DATA $RUN --checkpoint-dir "$T/straight" > "$T/straight.out" 2>&1
timeout 60 $MPIRUN -np 2 $RELAYC train "$T/m.relay" $DATA $RUN --checkpoint-dir "$T/cut" \
    --checkpoint-every 1 --keep 2 > "$T/cut.out" 2>&1 &
mp=$!
i=0
while [ $i -lt 1500 ]; do
    at=$(ls "$T/cut" 2>/dev/null | sed -n 's/^ckpt-\([0-9]*\)\.h5$/\1/p' | sort -n | tail -n 1)
    [ "${at:-0}" -ge $K ] && break
    sleep 0.02
    i=$((i + 1))
done
victim=$(ranks $mp | sed -n "$((K % 2 + 1))p")
[ -n "$victim" ] && kill -9 "$victim"
wait $mp
cut_rc=$?
from=$(ls "$T/cut" 2>/dev/null | sed -n 's/^ckpt-\([0-9]*\)\.h5$/\1/p' | sort -n | tail -n 1)
timeout 60 $MPIRUN -np 3 $RELAYC train "$T/m.relay" $DATA $RUN --checkpoint-dir "$T/cut" \
    --shard-optimizer --resume > "$T/resumed.out" 2>&1
rc=$?
[ $cut_rc -ne 0 ] && [ $rc -eq 0 ] && [ -n "$from" ] && [ "$from" -lt 600 ] &&
    ${CKPT_SAME:-build/tests/mpi/ckpt_same} "$T/m.relay" "$T/straight/ckpt-600.h5" "$T/cut/ckpt-600.h5"
check "killed at step >= $K on one of 2 ranks, resumed from ${from:-?} on 3: the uninterrupted bits" $?

# 3. a rank killed mid-run: the job ends (mpirun's message), bounded
start=$(date +%s)
timeout 60 $MPIRUN -np 2 $RELAYC train "$T/m.relay" $DATA --steps 100000000 --quiet \
    > "$T/kill.out" 2>&1 &
mp=$!
victim=$(started_rank $mp 2)
[ -n "$victim" ] && kill -9 "$victim"
wait $mp
rc=$?
took=$(( $(date +%s) - start ))
[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -qi "signal 9\|killed" "$T/kill.out"
check "a killed rank ends the job with a message (exit $rc, ${took}s)" $?

# 4. a rank that hangs: the other gives up after --dist-timeout 2
start=$(date +%s)
timeout 60 $MPIRUN -np 2 $RELAYC train "$T/m.relay" $DATA --steps 100000000 --quiet \
    --dist-timeout 2 > "$T/hang.out" 2>&1 &
mp=$!
victim=$(started_rank $mp 2)
[ -n "$victim" ] && kill -STOP "$victim"
wait $mp
rc=$?
took=$(( $(date +%s) - start ))
[ -n "$victim" ] && kill -9 "$victim" 2>/dev/null
[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "has waited 2 s for the other ranks" "$T/hang.out"
check "a hung rank: the other stops after the timeout with a message (exit $rc, ${took}s)" $?

if [ $fail -ne 0 ]; then
    for f in "$T"/*.out; do echo "== $f"; tail -n 15 "$f"; done
fi
exit $fail

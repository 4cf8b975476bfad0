#!/bin/sh
# run-suites.sh JOBS LOGDIR SUITE...: runs the unit suites, JOBS at a
# time, each under $TEST_WRAP (valgrind, or nothing) with $RELAYC set, and
# prints one line per suite with its time. With JOBS 1 a suite's output
# streams as it runs; with more, each goes to LOGDIR/<suite>.log and a
# failed suite's log is printed at the end, so parallel output never
# interleaves. The failed suites are named again last, where a log's tail
# shows them. Under valgrind every suite runs one thread at a time, so two
# at once use both cores of a 2-core machine.
set -u

# One suite; a failure leaves LOGDIR/<suite>.failed. (xargs runs each
# through `run-suites.sh --one SUITE`, with JOBS and LOGDIR exported.)
run_one() {
    t=$1 name=$(basename "$1")
    start=$(date +%s)
    if [ "$JOBS" = 1 ]; then
        echo "== $t"
        RELAYC=$RELAYC $TEST_WRAP "$t"
    else
        RELAYC=$RELAYC $TEST_WRAP "$t" > "$LOGDIR/$name.log" 2>&1
    fi
    rc=$?
    secs=$(( $(date +%s) - start ))
    if [ "$rc" = 0 ]; then
        echo "== $t: ok (${secs} s)"
    else
        echo "== $t: FAILED, exit $rc (${secs} s)"
        : > "$LOGDIR/$name.failed"
    fi
}

if [ "$1" = --one ]; then
    run_one "$2"
    exit 0
fi

JOBS=$1 LOGDIR=$2
shift 2
export JOBS LOGDIR RELAYC TEST_WRAP
mkdir -p "$LOGDIR"
rm -f "$LOGDIR"/*.log "$LOGDIR"/*.failed
if [ "$JOBS" = 1 ]; then
    for t in "$@"; do run_one "$t"; done
else
    printf '%s\n' "$@" | xargs -P "$JOBS" -I{} sh "$0" --one {}
fi

failed=
for f in "$LOGDIR"/*.failed; do
    [ -e "$f" ] || continue
    name=$(basename "$f" .failed)
    failed="$failed $name"
    if [ "$JOBS" != 1 ]; then
        echo "==== $name: its output"
        cat "$LOGDIR/$name.log"
    fi
done
if [ -n "$failed" ]; then
    echo "test-unit: failed:$failed" >&2
    exit 1
fi

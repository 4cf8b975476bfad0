#!/bin/sh
# fuzz-run.sh TARGET SECONDS: runs build-fuzz/fuzz/fuzz_TARGET for SECONDS on
# a scratch copy of its seeds (tests/fuzz/TARGET/), so what it learns does
# not grow the committed corpus. Prints one line with the executions; exits
# non-zero on any crash, leak, timeout or out-of-memory, whose input
# libFuzzer writes to build-fuzz/crashes/.
set -eu
t=$1
secs=$2
bin=build-fuzz/fuzz/fuzz_$t
work=build-fuzz/corpus/$t
rm -rf "$work"
mkdir -p "$work" build-fuzz/crashes build-fuzz/logs
cp tests/fuzz/"$t"/* "$work"/
log=build-fuzz/logs/$t.log
# The checkpoint target gives libhdf5 2 s in the loader's child before the
# file is refused (an endless loop inside libhdf5 is one of the findings).
# libhdf5 runs only in that child, which ends with _exit: its own leaks
# after damaged files are not this process's, so leaks are checked for
# every target. (The child inherits libFuzzer's malloc limit: where
# libhdf5 asks for more, the child leaves an oom-* input in crashes/ and
# the parent gets an error, which is not a failure.)
to=10
leaks=1
if ASAN_OPTIONS=detect_leaks=$leaks:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "$bin" -max_total_time="$secs" -timeout="$to" -rss_limit_mb=2048 -malloc_limit_mb=2048 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix=build-fuzz/crashes/"$t"- \
    "$work" >"$log" 2>&1; then
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    echo "fuzz $t: ok, $execs executions in ${secs}s"
else
    echo "fuzz $t: FAILED (log: $log)"
    grep -E "ERROR|SUMMARY|runtime error|Test unit written" "$log" | head -5
    exit 1
fi

#!/bin/sh
# run_corpus.sh: the .relay corpora through the command line.
#  - tests/corpus/*.relay: `relayc check` passes, and `relayc fmt` is a fixed
#    point (formatting the formatted text changes nothing).
#  - tests/errors/*.relay: each ends with `// ERROR: LINE:COL[: TEXT]`;
#    `relayc check` must exit 1 and print `FILE:LINE:COL: error: ...TEXT...`
#    first, never crash.
#  - tests/tvm_accepted/MANIFEST: relayc prints exactly what TVM 0.19
#    parsed and type-checked (tools/check_tvm_parse.py --golden).
# RELAYC may carry a wrapper (valgrind ...). Prints "N passed, N failed".
RELAYC=${RELAYC:-build/relayc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }

for f in tests/corpus/*.relay tests/run/*.relay tests/run_errors/*.relay; do
    if ! $RELAYC check "$f" >"$tmp/check" 2>&1; then bad "$f: check"; cat "$tmp/check"; continue; fi
    if ! $RELAYC fmt "$f" >"$tmp/a.relay" 2>"$tmp/err"; then bad "$f: fmt"; cat "$tmp/err"; continue; fi
    if ! $RELAYC fmt "$tmp/a.relay" >"$tmp/b.relay" 2>"$tmp/err"; then bad "$f: fmt of fmt"; cat "$tmp/err"; continue; fi
    if ! cmp -s "$tmp/a.relay" "$tmp/b.relay"; then bad "$f: fmt is not a fixed point"; diff "$tmp/a.relay" "$tmp/b.relay" | head -10; continue; fi
    if ! $RELAYC check "$tmp/a.relay" >"$tmp/check2" 2>&1; then bad "$f: formatted text does not check"; cat "$tmp/check2"; continue; fi
    if ! cmp -s "$tmp/check" "$tmp/check2"; then bad "$f: types change after fmt"; diff "$tmp/check" "$tmp/check2" | head; continue; fi
    pass=$((pass + 1))
done

for f in tests/errors/*.relay; do
    spec=$(sed -n 's#^// ERROR: ##p' "$f" | head -n 1)
    loc=$(echo "$spec" | cut -d: -f1-2)
    text=$(echo "$spec" | cut -d: -f3- | sed 's/^ //')
    $RELAYC check "$f" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    first=$(head -n 1 "$tmp/err")
    if [ $rc -ne 1 ]; then bad "$f: exit status $rc, expected 1"; cat "$tmp/err"; continue; fi
    case "$first" in
        "$f:$loc: error: "*"$text"*) pass=$((pass + 1)) ;;
        *) bad "$f: expected '$f:$loc: error: ...$text...', got: $first" ;;
    esac
done

grep -v '^#' tests/tvm_accepted/MANIFEST | while read -r out args; do
    [ -n "$out" ] || continue
    # shellcheck disable=SC2086
    if ! $RELAYC $args >"$tmp/tvm.relay" 2>"$tmp/err"; then echo "FAIL: relayc $args"; cat "$tmp/err"; continue; fi
    if cmp -s "$tmp/tvm.relay" "tests/tvm_accepted/$out"; then echo ok; else
        echo "FAIL: relayc $args differs from tests/tvm_accepted/$out (what TVM accepted; if the change is"
        echo "      meant, rerun tools/check_tvm_parse.py --golden, which checks it in TVM)"
        diff "tests/tvm_accepted/$out" "$tmp/tvm.relay" | head -10
    fi
done >"$tmp/tvm_results"
grep -v '^ok$' "$tmp/tvm_results"
pass=$((pass + $(grep -c '^ok$' "$tmp/tvm_results")))
fail=$((fail + $(grep -c '^FAIL' "$tmp/tvm_results")))

echo "corpus: $pass passed, $fail failed"
[ $fail -eq 0 ]

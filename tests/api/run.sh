#!/bin/sh
# tests/api/run.sh: the public API as a user meets it (make test-api).
#   1. the shared library exports exactly the functions include/relayc/
#      declares, and nothing else (no internal ry_ function);
#   2. relayc.h includes every public header;
#   3. every ```c block of the README compiles and links against the
#      static library, inside a main() that declares what the block uses;
#   4. a C++ program includes relayc.h, links the shared library by its
#      SONAME and runs a program;
#   5. `make install` into a scratch prefix gives headers, the versioned
#      library and relayc.pc, and a C program built with
#      `pkg-config --cflags --libs relayc` alone runs.
# Environment (from the Makefile): BUILD CC CXX CPPFLAGS CFLAGS LDFLAGS
# LDLIBS TEST_WRAP. Prints "api: N passed, M failed".
set -u
BUILD=${BUILD:-build}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/relayc-api.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "api: FAIL: $*"; }

# 1. exports. A declaration: a line of a public header that starts with a
# type at column 0 and has ry_NAME( before any other parenthesis.
sed -nE '/^(typedef|static|extern|#)/d; s/^[A-Za-z_][^(]*[ *](ry_[a-z0-9_]+)\(.*/\1/p' \
    include/relayc/*.h | sort -u > "$tmp/declared"
# (a coverage build also exports gcov's runtime, which is not ours)
nm -D --defined-only "$BUILD/librelayc.so" | awk '$2 ~ /^[TDRBV]$/ {print $3}' |
    grep -v '^__gcov_\|^mangle_path$' | sort -u > "$tmp/exported"
if cmp -s "$tmp/declared" "$tmp/exported"; then ok; else
    bad "exported symbols differ from the headers' declarations (< declared, > exported):"
    diff "$tmp/declared" "$tmp/exported" | grep '^[<>]' | head -40
fi
[ "$(wc -l < "$tmp/exported")" -gt 200 ] && ok || bad "only $(wc -l < "$tmp/exported") symbols exported"
soname=$(readelf -d "$BUILD/librelayc.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
case "$soname" in librelayc.so.[0-9]*) ok ;; *) bad "SONAME is '$soname'" ;; esac

# 2. relayc.h includes every header
for h in include/relayc/*.h; do
    n=$(basename "$h")
    [ "$n" = relayc.h ] && continue
    grep -q "#include \"relayc/$n\"" include/relayc/relayc.h && ok || bad "relayc.h lacks $n"
done

# 3. the README's C blocks
awk -v dir="$tmp" '/^```c$/ {n++; f = dir "/readme_" n ".inc"; on = 1; next}
    /^```/ {on = 0} on {print > f}' README.md
blocks=0
for inc in "$tmp"/readme_*.inc; do
    [ -e "$inc" ] || continue
    blocks=$((blocks + 1))
    src="${inc%.inc}.c"
    cat > "$src" <<EOT
#include <stdio.h>
#include "relayc/relayc.h"
/* what a README block may use without declaring it */
int main(void) {
    ry_error err;
    ry_tensor *train[2] = {NULL, NULL}, *test[2] = {NULL, NULL};
    (void)train; (void)test;
    {
#include "$(basename "$inc")"
    }
    return 0;
    goto fail;
fail:
    ry_error_print(stderr, &err);
    return 1;
}
EOT
    if $CC $CPPFLAGS -std=c11 -Wall -Werror -Wno-unused-label -Wno-unused-variable $CFLAGS \
        -I"$tmp" "$src" -o "${src%.c}" "$BUILD/librelayc.a" $LDFLAGS $LDLIBS 2> "$tmp/err"; then
        ok
    else
        bad "README C block $(basename "$inc") does not compile:"
        cat "$inc" "$tmp/err" | head -30
    fi
done
[ "$blocks" -ge 1 ] && ok || bad "no C block found in README.md"

# 4. C++ against the shared library
if $CXX -std=c++17 -Wall -Wextra -Werror -pedantic $CFLAGS -Iinclude tests/api/client.cpp \
    -o "$tmp/client" -L"$BUILD" -lrelayc -Wl,-rpath,"$PWD/$BUILD" $LDFLAGS 2> "$tmp/err"; then
    ok
    needed=$(readelf -d "$tmp/client" | sed -n 's/.*(NEEDED).*\[\(librelayc[^]]*\)\]/\1/p')
    [ "$needed" = "$soname" ] && ok || bad "the C++ client needs '$needed', not the SONAME $soname"
    out=$(${TEST_WRAP:-} "$tmp/client" 2>&1)
    [ "$out" = "relayc $(sed -n 's/^#define RELAYC_VERSION "\(.*\)"/\1/p' include/relayc/base.h): [5, 7, 9]" ] \
        && ok || bad "the C++ client printed: $out"
else
    bad "the C++ client does not build:"
    head -30 "$tmp/err"
fi

# 5. make install and pkg-config
prefix="$tmp/prefix"
if ${MAKE:-make} -s install BUILD="$BUILD" PREFIX="$prefix" > "$tmp/err" 2>&1; then
    ok
    for f in include/relayc/relayc.h lib/librelayc.a lib/librelayc.so lib/pkgconfig/relayc.pc \
        "lib/$soname" bin/relayc; do
        [ -e "$prefix/$f" ] && ok || bad "make install left out $f"
    done
    flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs relayc)
    sed 's|@|#|' > "$tmp/pc.c" <<'EOT'
@include <stdio.h>
@include "relayc/relayc.h"
int main(void) { printf("%s\n", ry_version()); return 0; }
EOT
    if $CC -std=c11 -Wall -Werror $CFLAGS "$tmp/pc.c" -o "$tmp/pc" $flags $LDFLAGS 2> "$tmp/err"; then
        [ "$(LD_LIBRARY_PATH="$prefix/lib" ${TEST_WRAP:-} "$tmp/pc")" = "$(sed -n 's/^#define RELAYC_VERSION "\(.*\)"/\1/p' include/relayc/base.h)" ] \
            && ok || bad "the pkg-config program printed the wrong version"
    else
        bad "a program built with pkg-config relayc ($flags) does not build:"
        head -20 "$tmp/err"
    fi
else
    bad "make install failed:"
    head -20 "$tmp/err"
fi

echo "api: $pass passed, $fail failed"
[ "$fail" -eq 0 ]

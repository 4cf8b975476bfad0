#!/bin/sh
# install-deps.sh: installs with apt what relayc needs to build, test and
# train, and does nothing when it is all there. The only record of the
# project's dependencies. Run as root (or with sudo available).
# g++: the C++ client of make test-api; clang: make test-asan-clang and
# make fuzz (libFuzzer's runtime ships with clang on Debian 12); lcov: make
# coverage; OpenMPI: data-parallel training (src/dist/); procps: pgrep in
# tests/mpi/run_cli.sh; the OpenCL headers, ICD loader, PoCL (OpenCL on
# this machine's CPU, so the OpenCL target is tested everywhere) and
# CLBlast (its GEMMs): the OpenCL target (src/backend/opencl/).
set -eu

PACKAGES="gcc g++ make pkg-config libc6-dev libopenblas-dev libhdf5-dev libcmocka-dev
zlib1g-dev valgrind clang lcov dataset-fashion-mnist libopenmpi-dev openmpi-bin procps
opencl-c-headers ocl-icd-opencl-dev pocl-opencl-icd libclblast-dev"

missing=""
for p in $PACKAGES; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    case "$status" in
        *"ok installed") ;;
        *) missing="$missing $p" ;;
    esac
done

if [ -z "$missing" ]; then
    echo "install-deps: everything is installed"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
        echo "install-deps: need root (or sudo) to install:$missing" >&2
        exit 1
    fi
fi

echo "install-deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing

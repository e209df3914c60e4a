#!/usr/bin/env bash
# Runs every test: installs what is missing, builds with warnings as
# errors, runs the suite (unit tests, the fixtures against llama.cpp's
# goldens, the npm reference comparisons, the server tests), the suite
# again under AddressSanitizer + UBSan, the fuzz corpora replayed, and the
# unit tests and a tiny end-to-end generation on aarch64 under qemu.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit 1
jobs=$(nproc 2>/dev/null || echo 2)
status=0
step() { echo; echo "=== $* ==="; }

step "build (x86-64, -Werror)"
make -j"$jobs" WERROR=1 all || exit 1
step "tests"
make WERROR=1 test || status=1
step "tests under ASan + UBSan"
make -j"$jobs" WERROR=1 asan || status=1
step "aarch64 under qemu"
make -j"$jobs" WERROR=1 test-arm || status=1
exit $status

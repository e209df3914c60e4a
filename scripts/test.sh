#!/usr/bin/env bash
# Runs every test CI gates: installs what is missing, builds with warnings
# as errors, runs the suite (tests/tiers: the unit tests, the fixtures
# against llama.cpp's goldens, llama.cpp itself on every family, the npm
# reference comparisons, the server tests), then the C unit tests, the
# fuzz corpora and the server tests again under AddressSanitizer + UBSan,
# the fuzz corpora under clang's UBSan (float-cast-overflow included),
# then the unit tests and a tiny generation on aarch64 under qemu. Tests
# run in parallel (one per core); each part ends with the ten slowest.
#
#   bash scripts/test.sh          the CI tier (under 20 minutes)
#   bash scripts/test.sh --full   the long matrices too: every preset in
#                                 every type and every mix against llama.cpp
#                                 (RKM_TEST_FULL=1 does the same)
#   make check                    the quick tier alone, before a commit
set -uo pipefail
cd "$(dirname "$0")/.."
tier=ci
[ "${RKM_TEST_FULL:-0}" = 1 ] && tier=full
for a in "$@"; do
  case $a in
    --full) tier=full ;;
    -h | --help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "test.sh: unknown option '$a' (see --help)"; exit 2 ;;
  esac
done
bash scripts/setup.sh || exit 1
jobs=$(nproc 2>/dev/null || echo 2)
status=0
t0=$(date +%s)
step() { echo; echo "=== $* ($(($(date +%s) - t0)) s) ==="; }

step "build (x86-64, -Werror)"
make -j"$jobs" WERROR=1 all || exit 1
step "tests (tier $tier)"
RKM_TEST_TIER=$tier make WERROR=1 test || status=1
step "tests under ASan + UBSan"
make -j"$jobs" WERROR=1 asan || status=1
step "fuzz corpora under clang's UBSan"
make -j"$jobs" ubsan || status=1
step "aarch64 under qemu"
make -j"$jobs" WERROR=1 test-arm || status=1
step "done: $([ $status -eq 0 ] && echo passed || echo FAILED)"
exit $status

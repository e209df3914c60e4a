#!/usr/bin/env bash
# Runs every test binary in $BUILD/tests and every tests/*.sh script, each in
# its own process with a timeout, and prints one summary line
# "N passed, N failed, N skipped". A test exits 0 (pass), 77 (skip) or
# anything else (fail). RKM_RUNNER prefixes binaries (qemu for ARM);
# RKM_TEST_SET=arm runs only the tests listed in tests/arm.list.
set -u
BUILD=${BUILD:-build}
RUNNER=${RKM_RUNNER:-}
TIMEOUT=${RKM_TEST_TIMEOUT:-900}
cd "$(dirname "$0")/.."
export RKM_BUILD=$BUILD RKM_RUNNER=$RUNNER
pass=0; fail=0; skip=0; failed=()
tests=()
if [ "${RKM_TEST_SET:-}" = arm ]; then
  while read -r t; do [ -n "$t" ] && [ "${t#\#}" = "$t" ] && tests+=("$BUILD/tests/$t"); done < tests/arm.list
else
  for t in "$BUILD"/tests/test-*; do case "$t" in *.o|*.d) continue;; esac; [ -x "$t" ] && tests+=("$t"); done
  for t in tests/test-*.sh; do [ -f "$t" ] && tests+=("$t"); done
fi
if [ -n "${RKM_TEST_FILTER:-}" ]; then
  f=(); for t in "${tests[@]}"; do case "$t" in *$RKM_TEST_FILTER*) f+=("$t");; esac; done; tests=("${f[@]}")
fi
for t in "${tests[@]}"; do
  name=$(basename "$t")
  start=$(date +%s%N)
  log=$(mktemp)
  case "$t" in
    *.sh) timeout "$TIMEOUT" bash "$t" >"$log" 2>&1 ;;
    *)    timeout "$TIMEOUT" $RUNNER "$t" >"$log" 2>&1 ;;
  esac
  rc=$?
  end=$(date +%s%N); dt=$(( (end - start) / 100000000 )); dt="$((dt / 10)).$((dt % 10))"
  if [ $rc -eq 0 ]; then pass=$((pass+1)); echo "PASS $name (${dt}s)"
  elif [ $rc -eq 77 ]; then skip=$((skip+1)); echo "SKIP $name: $(tail -n 1 "$log")"
  else fail=$((fail+1)); failed+=("$name"); echo "FAIL $name (rc $rc, ${dt}s)"; tail -n 40 "$log" | sed 's/^/    /'
  fi
  rm -f "$log"
done
[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]

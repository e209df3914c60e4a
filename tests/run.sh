#!/usr/bin/env bash
# Runs the tests of one tier and set, as tests/tiers describes them, each in
# its own process with its own timeout and its own temporary directory, up
# to RKM_TEST_JOBS at a time (default: the core count), and prints each
# result as it ends, the ten slowest, and "N passed, N failed, N skipped".
# A test exits 0 (pass), 77 (skip) or anything else (fail).
#
#   RKM_TEST_TIER=quick|ci|full  which tests, and how much each one does
#                                (exported to the tests; default ci)
#   RKM_TEST_SET=asan|arm        only the tests whose column says yes
#   RKM_TEST_FILTER=part         only the tests whose name contains it
#   RKM_RUNNER                   prefixes binaries (qemu for ARM)
#   RKM_TEST_TIMEOUT             seconds a test may take (default 900; full 3600)
#
# Tests start longest first, by the times of the last run in this build
# directory ($BUILD/test-times). Each test's output is kept in
# $BUILD/test-logs/NAME.log (NAME as the table has it) until the next run.
# Models the tests synthesize and convert are shared through
# $BUILD/test-models (tests/common/models.sh), at most
# RKM_TEST_MODELS_MAX_MB (default 8192) of them, least recently used dropped.
set -u
BUILD=${BUILD:-build}
RUNNER=${RKM_RUNNER:-}
TIER=${RKM_TEST_TIER:-ci}
TIMEOUT=${RKM_TEST_TIMEOUT:-$([ "$TIER" = full ] && echo 3600 || echo 900)}
JOBS=${RKM_TEST_JOBS:-$(nproc 2>/dev/null || echo 2)}
cd "$(dirname "$0")/.."
case $TIER in quick | ci | full) ;; *) echo "run.sh: RKM_TEST_TIER must be quick, ci or full, not '$TIER'"; exit 2 ;; esac
export RKM_BUILD=$BUILD RKM_RUNNER=$RUNNER RKM_TEST_TIER=$TIER
export RKM_TEST_MODELS=${RKM_TEST_MODELS:-$PWD/$BUILD/test-models}

# the table: name, then quick/asan/arm columns (y or -)
tests=()
while read -r name quick asan arm _; do
  case $name in '' | '#'*) continue ;; esac
  [ "$TIER" != quick ] || [ "$quick" = y ] || continue
  case ${RKM_TEST_SET:-} in
    asan) [ "$asan" = y ] || continue ;;
    arm) [ "$arm" = y ] || continue ;;
  esac
  [ -z "${RKM_TEST_FILTER:-}" ] || case $name in *$RKM_TEST_FILTER*) ;; *) continue ;; esac
  tests+=("$name")
done < tests/tiers
# every test in the tree is in the table, and every name in it exists
missing=()
for t in tests/test-*.c tests/test-*.sh; do
  n=$(basename "$t"); n=${n%.c}
  grep -q "^$n[[:space:]]" tests/tiers || missing+=("$n")
done
[ ${#missing[@]} -eq 0 ] || { echo "run.sh: not in tests/tiers: ${missing[*]}"; exit 1; }

times=$BUILD/test-times
[ -f "$times" ] || : >"$times"
# longest first (unknown ones first of all: they may be long)
mapfile -t tests < <(for n in "${tests[@]}"; do
  s=$(awk -v n="$n" '$1 == n {print $2}' "$times"); echo "${s:-99999} $n"; done | sort -k1,1nr | cut -d' ' -f2)

scratch=$(mktemp -d "${TMPDIR:-/tmp}/rkm-run.XXXXXX")
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$scratch"' EXIT
trap 'exit 130' INT TERM
mkdir -p "$RKM_TEST_MODELS" "$BUILD/test-logs"
find "$RKM_TEST_MODELS" -mindepth 1 -maxdepth 1 -mtime +1 -exec rm -rf {} + # unused for two days
# and, beyond RKM_TEST_MODELS_MAX_MB (default 8192), the least recently used
# first: every rebuilt binary makes its own models, tens of GB in two days
cap_kb=$(( ${RKM_TEST_MODELS_MAX_MB:-8192} * 1024 ))
total_kb=$(du -sk "$RKM_TEST_MODELS" | cut -f1)
if [ "$total_kb" -gt "$cap_kb" ]; then
  while read -r _ path; do
    [ "$total_kb" -le "$cap_kb" ] && break
    kb=$(du -sk "$path" | cut -f1)
    rm -rf "$path" "$path.lock"
    total_kb=$((total_kb - kb))
  done < <(find "$RKM_TEST_MODELS" -mindepth 1 -maxdepth 1 ! -name '*.lock' -printf '%T@ %p\n' | sort -n)
fi

start_test() { # name: runs in the background, writes $scratch/name.{log,rc,time}
  local n=$1 cmd
  if [ "${n%.sh}" != "$n" ]; then cmd=(bash "tests/$n")
  elif [ -x "$BUILD/tests/$n" ]; then cmd=($RUNNER "$BUILD/tests/$n")
  else cmd=(sh -c "echo '$BUILD/tests/$n is not built'; exit 1"); fi
  mkdir -p "$scratch/$n.tmp"
  (
    t0=$(date +%s%N)
    TMPDIR=$scratch/$n.tmp timeout "$TIMEOUT" "${cmd[@]}" >"$scratch/$n.log" 2>&1 </dev/null
    echo $? >"$scratch/$n.rc.part"
    echo $(( ($(date +%s%N) - t0) / 1000000 )) >"$scratch/$n.time"
    cp "$scratch/$n.log" "$BUILD/test-logs/$n.log" 2>/dev/null
    mv "$scratch/$n.rc.part" "$scratch/$n.rc"
  ) &
}

pass=0; fail=0; skip=0; failed=(); done_names=()
report() { # name
  local n=$1 rc ms dt
  rc=$(cat "$scratch/$n.rc"); ms=$(cat "$scratch/$n.time")
  dt="$((ms / 1000)).$(((ms % 1000) / 100))"
  if [ "$rc" -eq 0 ]; then pass=$((pass + 1)); echo "PASS $n (${dt}s)"
  elif [ "$rc" -eq 77 ]; then skip=$((skip + 1)); echo "SKIP $n: $(tail -n 1 "$scratch/$n.log")"
  else
    fail=$((fail + 1)); failed+=("$n")
    [ "$rc" -eq 124 ] && echo "FAIL $n (timed out after ${TIMEOUT}s)" || echo "FAIL $n (rc $rc, ${dt}s)"
    tail -n 40 "$scratch/$n.log" | sed 's/^/    /'
  fi
  [ "$rc" -eq 77 ] || done_names+=("$n $ms")
  rm -rf "$scratch/$n.tmp"
}

running=()
next=0
while [ $next -lt ${#tests[@]} ] || [ ${#running[@]} -gt 0 ]; do
  while [ ${#running[@]} -lt "$JOBS" ] && [ $next -lt ${#tests[@]} ]; do
    start_test "${tests[$next]}"; running+=("${tests[$next]}"); next=$((next + 1))
  done
  wait -n 2>/dev/null || true
  still=()
  for n in "${running[@]}"; do
    if [ -f "$scratch/$n.rc" ]; then report "$n"; else still+=("$n"); fi
  done
  running=("${still[@]}")
done

if [ ${#done_names[@]} -gt 0 ]; then
  echo "slowest:"
  printf '%s\n' "${done_names[@]}" | sort -k2,2nr | head -n 10 |
    awk '{printf "  %-28s %7.1fs\n", $1, $2 / 1000}'
  # keep the times for the next run's order (the others' stay)
  { printf '%s\n' "${done_names[@]}" | awk '{print $1, int($2 / 1000)}'
    awk 'NR == FNR {seen[$1] = 1; next} !($1 in seen)' <(printf '%s\n' "${done_names[@]}") "$times"; } >"$times.new"
  mv "$times.new" "$times"
fi
[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
echo "$pass passed, $fail failed, $skip skipped (tier $TIER${RKM_TEST_SET:+, set $RKM_TEST_SET})"
[ $fail -eq 0 ]

#!/usr/bin/env bash
# run.sh - runs every libFuzzer target (or the ones named) for SECONDS each
# (default 600), one after the other, then merges the inputs that reached
# new coverage into fuzz/corpus/NAME (libFuzzer's -merge=1 keeps only
# those). Crashes land in $RKM_FUZZ_WORK/crash/ with a line in the log;
# reduce them with -minimize_crash=1 and keep them in fuzz/crashers/NAME.
# Usage: fuzz/run.sh [SECONDS] [NAME...]   (build first: make fuzz)
set -u
cd "$(dirname "$0")/.."
secs=${1:-600}; shift || true
work=${RKM_FUZZ_WORK:-/var/tmp/rkm/fuzz}
mkdir -p "$work/crash"
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for f in fuzz/fuzz-*.c; do n=$(basename "$f" .c); names+=("${n#fuzz-}"); done
fi
status=0
for n in "${names[@]}"; do
  bin=build-fuzz/fuzz/fuzz-$n
  [ -x "$bin" ] || { echo "$bin missing: run make fuzz" >&2; exit 2; }
  mkdir -p "fuzz/corpus/$n"
  rm -rf "$work/new-$n"; mkdir -p "$work/new-$n"
  before=$(ls "fuzz/corpus/$n" | wc -l)
  "$bin" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$work/crash/$n-" "$work/new-$n" "fuzz/corpus/$n" > "$work/$n.log" 2>&1
  rc=$?
  "$bin" -merge=1 "fuzz/corpus/$n" "$work/new-$n" >> "$work/$n.log" 2>&1
  after=$(ls "fuzz/corpus/$n" | wc -l)
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/$n.log" | grep -o '[0-9]*$' | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$work/$n.log" | tail -1)
  echo "$n: ${secs}s, ${execs:-?} runs, $cov, corpus $before -> $after, exit $rc"
  [ $rc -eq 0 ] || status=1
done
exit $status

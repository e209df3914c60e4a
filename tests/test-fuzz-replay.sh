#!/usr/bin/env bash
# test-fuzz-replay.sh - replays every fuzz target's kept corpus and crashers
# (fuzz/corpus/NAME, fuzz/crashers/NAME) through the parsers of this build,
# so a fixed crash stays fixed (under ASan in `make asan`).
set -u
B=${RKM_BUILD:-build}
cd "$(dirname "$0")/.."
n=0; bad=0
for bin in "$B"/fuzz-replay/fuzz-*; do
  [ -x "$bin" ] || continue
  name=$(basename "$bin"); name=${name#fuzz-}
  dirs=()
  [ -d "fuzz/corpus/$name" ] && dirs+=("fuzz/corpus/$name")
  [ -d "fuzz/crashers/$name" ] && dirs+=("fuzz/crashers/$name")
  [ ${#dirs[@]} -gt 0 ] || { echo "no corpus for $name"; bad=$((bad + 1)); continue; }
  if out=$(${RKM_RUNNER:-} "$bin" "${dirs[@]}" 2>&1); then echo "$name: $out"; n=$((n + 1))
  else echo "$name: FAILED"; echo "$out" | tail -20; bad=$((bad + 1)); fi
done
echo "$n targets replayed, $bad failed"
[ $n -gt 0 ] && [ $bad -eq 0 ]

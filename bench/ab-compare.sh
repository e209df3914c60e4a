#!/usr/bin/env bash
# ab-compare.sh - two rkmojo builds side by side on one .rkmojo model,
# alternating (A, B, A, B, ...) so that a drifting host slows both alike:
# fully resident decode from an empty context and warm prefill, then the
# same model under a memory budget with the page cache dropped before each
# run (as root). Prints each run's bench lines; measures, never asserts.
#
#   bench/ab-compare.sh BIN_A BIN_B MODEL [ROUNDS] [BUDGET]
#   e.g. bench/ab-compare.sh /tmp/old/rkmojo build/rkmojo olmoe-q4_0.rkmojo 2 2G
set -u
[ $# -ge 3 ] || { sed -n 2,9p "$0"; exit 2; }
A=$1 B=$2 M=$3 ROUNDS=${4:-2} BUDGET=${5:-2G}
for bin in "$A" "$B"; do [ -x "$bin" ] || { echo "not executable: $bin"; exit 2; }; done
[ -f "$M/manifest.json" ] || { echo "not a .rkmojo directory: $M"; exit 2; }
drop_caches() { sync; [ -w /proc/sys/vm/drop_caches ] && echo 3 > /proc/sys/vm/drop_caches; }
for round in $(seq "$ROUNDS"); do
  for bin in "$A" "$B"; do
    echo "== round $round $bin: resident"
    "$bin" bench -m "$M" --prompt-tokens 128 -n 64 -t 2 --warm --depth 0 -r 3 2>&1 | grep -E '^(prefill|decode) tok/s over'
  done
done
for round in $(seq "$ROUNDS"); do
  for bin in "$A" "$B"; do
    drop_caches
    echo "== round $round $bin: budget $BUDGET"
    "$bin" bench -m "$M" --mem-budget "$BUDGET" --ctx 1024 --prompt-tokens 32 -n 64 -t 2 2>&1 |
      grep -E '^(expert cache|prefill|decode|TTFT)'
  done
done

#!/usr/bin/env bash
# verify-resident.sh - what checking the resident weights at open costs:
# the wall time of a one-token `rkmojo run` with RKM_VERIFY_RESIDENT=never,
# load and background, alternated ROUNDS times (default 3) after reading
# resident.bin once into the page cache. Measures; asserts nothing.
# usage: bench/verify-resident.sh MODEL.rkmojo   (env: BUILD, ROUNDS, BUDGET)
set -eu
cd "$(dirname "$0")/.."
B=$PWD/${BUILD:-build}/rkmojo
M=${1:?usage: bench/verify-resident.sh MODEL.rkmojo}
cat "$M/resident.bin" >/dev/null
for _ in $(seq "${ROUNDS:-3}"); do
  for mode in never load background; do
    s=$(date +%s.%N)
    RKM_VERIFY_RESIDENT=$mode "$B" run -m "$M" --prompt-ids 1 -n 1 -q --mem-budget "${BUDGET:-4G}" >/dev/null 2>&1
    e=$(date +%s.%N)
    awk -v m="$mode" -v s="$s" -v e="$e" 'BEGIN { printf "%-10s %.2f s\n", m, e - s }'
  done
done

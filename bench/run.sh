#!/usr/bin/env bash
# run.sh - `make bench`: the kernel benchmark, then the streaming table of
# every model named in $RKM_BENCH_MODELS (space-separated .rkmojo
# directories; none by default, since real-size models take minutes to
# synthesise: bench/README.md says how to make them).
set -eu
B=${BUILD:-build}
make -s "BUILD=$B" bench-bin
"$B/bench/bench-kernels" -s 4
for m in ${RKM_BENCH_MODELS:-}; do
  RKMOJO="$B/rkmojo" bench/bench-streaming.sh "$m"
done

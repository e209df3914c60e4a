#!/usr/bin/env bash
# bench-convert.sh - converter throughput and peak memory against the
# disk's sequential read bandwidth (the converter is meant to stay under
# 1 GiB of RSS for any model size and to read at least half the disk's
# sequential bandwidth).
#
#   bench/bench-convert.sh [PRESET] [DTYPE] [QUANT] [WORKDIR]
#   e.g. bench/bench-convert.sh qwen3-30b-a3b q4_0 keep /work/bench-data
#
# Synthesizes the checkpoint if it is not there, drops the page cache (as
# root), measures O_DIRECT sequential read bandwidth of the input with dd,
# drops the cache again, then converts under /usr/bin/time -v.
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-olmoe-1b-7b}; dtype=${2:-q4_0}; quant=${3:-keep}; work=${4:-/tmp/rkmojo-bench}
bin=${RKMOJO:-build/rkmojo}
mkdir -p "$work"
in="$work/$preset-$dtype.gguf"; out="$work/$preset-$dtype-$quant.rkmojo"
[ -f "$in" ] || "$bin" synth --preset "$preset" --dtype "$dtype" -o "$in" --quiet
drop() { sync; if [ -w /proc/sys/vm/drop_caches ]; then echo 3 > /proc/sys/vm/drop_caches; else echo "(cannot drop the page cache: not root)"; fi; }
size=$(stat -c %s "$in")
drop
t0=$(date +%s.%N); dd if="$in" of=/dev/null bs=8M iflag=direct status=none; t1=$(date +%s.%N)
disk=$(echo "$size / ($t1 - $t0) / 1000000" | bc -l)
drop
rm -rf "$out"
/usr/bin/time -v "$bin" convert "$in" "$out" --quant "$quant" --quiet 2> "$work/convert-time.txt"
el=$(grep "Elapsed (wall clock)" "$work/convert-time.txt" | awk '{print $NF}')
secs=$(echo "$el" | awk -F: '{ if (NF==3) print $1*3600+$2*60+$3; else print $1*60+$2 }')
rss=$(grep "Maximum resident set size" "$work/convert-time.txt" | awk '{print $NF}')
rate=$(echo "$size / $secs / 1000000" | bc -l)
printf 'input %s: %.2f GB\n' "$in" "$(echo "$size / 1000000000" | bc -l)"
printf 'disk sequential read (O_DIRECT, dd 8 MiB): %.0f MB/s\n' "$disk"
printf 'convert --quant %s: %.1f s, %.0f MB/s of input (%.0f%% of disk read), peak RSS %.1f MiB\n' \
  "$quant" "$secs" "$rate" "$(echo "100 * $rate / $disk" | bc -l)" "$(echo "$rss / 1024" | bc -l)"

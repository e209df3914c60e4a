#!/usr/bin/env bash
# bench-vision.sh - image encode time of rkmojo's vision tower against
# llama.cpp's mtmd, side by side on the same files and threads, the runs
# alternating (rkmojo, mtmd, rkmojo, ...) so that a noisy host weighs on
# both alike.
#
#   LLAMA_MTMD_CLI=/path/to/llama-mtmd-cli [PRESET=qwen3-vl-30b-a3b] bench/bench-vision.sh [WORKDIR] [REPS] [THREADS]
#
# Writes (once, kept in WORKDIR) the vision tower of PRESET (Gemma 4
# 26B-A4B's by default; qwen3-vl-30b-a3b: Qwen3-VL-30B-A3B's, 27 blocks of
# 1152 with three deep-stack mergers) in f16 with `rkmojo synth
# --mmproj-out` beside a text model of the same width but few layers and
# experts (mtmd needs one; its size does not enter the encode), and
# test images of 224x224, 448x448 and 896x896 (tests' make-image). Per size
# and rep: rkmojo's "encoded in" time (`rkmojo run --mmproj --image -n 0`,
# preprocessing included) and mtmd's "batch encoding done in" time
# (llama-mtmd-cli, which also preprocesses); prints each pair, then the
# medians and their ratio, and rkmojo's peak RSS for the tower.
# LLAMA_MTMD_CLI is llama.cpp's CLI built from source for this CPU (never
# inside the project); without it only rkmojo runs.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$PWD/${RKMOJO:-build/rkmojo}
img=$PWD/build/tests/make-image
. bench/vision-files.sh
work=${1:-$vision_work}; reps=${2:-3}; threads=${3:-2}
vision_files "$work"
for s in 224 448 896; do
  : > "$work/ours.$s"; : > "$work/ref.$s"
  for r in $(seq "$reps"); do
    /usr/bin/time -f "%M" -o "$work/rss" "$bin" run --mmproj "$work/mmproj.gguf" --image "$work/$s.png" -n 0 -p x \
      -t "$threads" 2> "$work/ours.log"
    ours=$(sed -n 's/.*encoded in \([0-9]*\) ms.*/\1/p' "$work/ours.log")
    echo "$ours" >> "$work/ours.$s"
    ref=-
    if [ -n "${LLAMA_MTMD_CLI:-}" ]; then
      "$LLAMA_MTMD_CLI" -m "$work/text.gguf" --mmproj "$work/mmproj.gguf" --image "$work/$s.png" -p x -n 1 \
        -t "$threads" --temp 0 > "$work/ref.log" 2>&1
      ref=$(sed -n 's/.*batch encoding done in \([0-9]*\) ms.*/\1/p' "$work/ref.log")
      echo "$ref" >> "$work/ref.$s"
    fi
    echo "${s}x$s rep $r: rkmojo $ours ms, mtmd $ref ms, rkmojo peak RSS $(($(cat "$work/rss") / 1024)) MiB"
  done
  mo=$(median < "$work/ours.$s")
  if [ -s "$work/ref.$s" ]; then
    mr=$(median < "$work/ref.$s")
    echo "${s}x$s median: rkmojo $mo ms, mtmd $mr ms, speed ratio $(awk -v a="$mr" -v b="$mo" 'BEGIN {printf "%.2f", a / b}')x"
  else
    echo "${s}x$s median: rkmojo $mo ms"
  fi
done

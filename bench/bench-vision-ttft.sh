#!/usr/bin/env bash
# bench-vision-ttft.sh - time to the first token of a prompt with one
# image, and the memory the vision tower adds, rkmojo against llama.cpp's
# mtmd, side by side on the same files and threads, the runs alternating
# (rkmojo, mtmd, rkmojo, ...) so that a noisy host weighs on both alike.
#
#   [SIZES="224 448"] [PRESET=qwen3-vl-30b-a3b] bench/bench-vision-ttft.sh [WORKDIR] [REPS] [THREADS]
#
# Writes (once, kept in WORKDIR) the preset's vision tower in f16 beside
# a text model of its width with few layers and experts (the files
# bench-vision.sh uses, bench/vision-files.sh), the text model converted with its tower
# (`rkmojo convert --mmproj`), and test images of 224x224, 448x448 and
# 896x896. Per size and rep: rkmojo's TTFT (`rkmojo run -m DIR --image
# IMG -p "... <__media__> ..." -n 1`: the prompt evaluated, the image
# decoded, prepared, encoded and its rows evaluated, to the first token's
# logits) and mtmd's (tests/ref/mtmd_ref.c's gen mode: mtmd_tokenize and
# mtmd_helper_eval_chunks, the same steps, timed to the first logits).
# The reference is the prebuilt llama.cpp of the npm package
# @fugood/node-llama-linux-x64 (tests/js), a generic x86-64 build: not
# llama.cpp at its best on this CPU (bench-vision.sh takes a native
# llama-mtmd-cli for the encode alone). Then the peak RSS of rkmojo with
# the image and without it (the same prompt, the marker left out): what
# the tower adds. NO_REF=1 runs rkmojo alone (the npm build takes minutes
# an image).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$PWD/${RKMOJO:-build/rkmojo}
ref=$PWD/build/tests/mtmd-ref
addon=$PWD/tests/js/node_modules/@fugood/node-llama-linux-x64/index.node
img=$PWD/build/tests/make-image
. bench/vision-files.sh
work=${1:-$vision_work}; reps=${2:-3}; threads=${3:-2}; sizes=${SIZES:-224 448 896}
vision_files "$work"
[ -d "$work/text.rkmojo" ] || "$bin" convert "$work/text.gguf" "$work/text.rkmojo" --quant keep --mmproj "$work/mmproj.gguf" --quiet
prompt="Describe <__media__> in one word."
for s in $sizes; do
  : > "$work/ttft.ours.$s"; : > "$work/ttft.ref.$s"
  for r in $(seq "$reps"); do
    /usr/bin/time -f "%M" -o "$work/rss" "$bin" run -m "$work/text.rkmojo" --image "$work/$s.png" -p "$prompt" -n 1 --temp 0 \
      -t "$threads" > /dev/null 2> "$work/ttft.log"
    ours=$(sed -n 's/.*TTFT \([0-9]*\) ms.*/\1/p' "$work/ttft.log")
    echo "$ours" >> "$work/ttft.ours.$s"
    rf=-
    if [ -z "${NO_REF:-}" ] && [ -f "$addon" ] && [ -x "$ref" ]; then
      rf=$("$ref" "$addon" "$work/text.gguf" "$work/mmproj.gguf" gen "$prompt" 1 "$work/$s.png" -- "$threads" |
        awk '$1 == "prompt_ms" {printf "%d", $2}')
      echo "$rf" >> "$work/ttft.ref.$s"
    fi
    echo "${s}x$s rep $r: TTFT rkmojo $ours ms, mtmd (npm build) $rf ms; rkmojo peak RSS $(($(cat "$work/rss") / 1024)) MiB"
  done
  mo=$(median < "$work/ttft.ours.$s")
  if [ -s "$work/ttft.ref.$s" ]; then
    mr=$(median < "$work/ttft.ref.$s")
    echo "${s}x$s median TTFT: rkmojo $mo ms, mtmd $mr ms, speed ratio $(awk -v a="$mr" -v b="$mo" 'BEGIN {printf "%.2f", a / b}')x"
  else
    echo "${s}x$s median TTFT: rkmojo $mo ms"
  fi
done
/usr/bin/time -f "%M" -o "$work/rss0" "$bin" run -m "$work/text.rkmojo" -p "${prompt/<__media__> /}" -n 1 --temp 0 -t "$threads" \
  > /dev/null 2>&1
first=${sizes%% *}
/usr/bin/time -f "%M" -o "$work/rss1" "$bin" run -m "$work/text.rkmojo" --image "$work/$first.png" -p "$prompt" -n 1 --temp 0 \
  -t "$threads" > /dev/null 2>&1
echo "peak RSS without an image $(($(cat "$work/rss0") / 1024)) MiB, with a ${first}x$first image $(($(cat "$work/rss1") / 1024)) MiB:" \
  "the tower adds $(( ($(cat "$work/rss1") - $(cat "$work/rss0")) / 1024 )) MiB ($(du -m "$work/mmproj.gguf" | cut -f1) MiB file)"

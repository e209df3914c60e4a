#!/usr/bin/env bash
# vision-files.sh - sourced by bench-vision.sh and bench-vision-ttft.sh:
# the files their runs share, written once and kept in the work directory.
#
#   PRESET=gemma4-26b-a4b (default) | qwen3-vl-30b-a3b
#   vision_files WORKDIR   -> $work/text.gguf, $work/mmproj.gguf (f16),
#                             $work/224.png, 448.png, 896.png
#
# The tower is the preset's full one (Gemma 4 26B-A4B's 27 blocks of 1152
# with 3x3 pooling; Qwen3-VL-30B-A3B's 27 blocks of 1152 with three
# deep-stack mergers), beside a text model of its width with few layers
# and experts (mtmd needs one; its size does not enter the encode).
# Expects $bin (rkmojo) and $img (tests' make-image). Also median.
vision_preset=${PRESET:-gemma4-26b-a4b}
case $vision_preset in
  gemma4-26b-a4b) vision_work=/var/tmp/rkm/vis/bench
    vision_sets=(--set n_layer=6 --set n_vocab=512 --set n_expert=4 --set n_expert_used=2 --set n_ff_exp=64 --set n_ff=64) ;;
  qwen3-vl-30b-a3b) vision_work=/var/tmp/rkm/vis/bench-qwen3vl
    vision_sets=(--set n_layer=4 --set n_vocab=512 --set n_expert=4 --set n_expert_used=2 --set n_ff_exp=64) ;;
  *) echo "PRESET: gemma4-26b-a4b or qwen3-vl-30b-a3b" >&2; exit 2 ;;
esac
vision_files() {
  mkdir -p "$1"
  [ -f "$1/mmproj.gguf" ] ||
    "$bin" synth --preset "$vision_preset" "${vision_sets[@]}" --dtype f16 -o "$1/text.gguf" --mmproj-out "$1/mmproj.gguf" --quiet
  for s in 224 448 896; do [ -f "$1/$s.png" ] || "$img" "$1/$s.png" $s $s 11; done
}
# the median of the numbers on stdin, one a line
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

#!/usr/bin/env bash
# rknn-check.sh - what a board owner runs on an RK3588 (or RK3576) to get
# the numbers the NPU backend is judged by (docs/NPU.md, "Board check"):
#   1. rkmojo doctor: driver, runtime, chip, whether the NPU is used;
#   2. per-matmul GOPS at decode (M = 1) and prefill (M = 128) shapes, and
#      one expert FFN's latency, CPU vs NPU (rkmojo doctor --bench);
#   3. end-to-end prefill and decode tok/s of the same model converted for
#      the CPU (q8_0) and for the NPU (--target rk3588), rkmojo bench with
#      --backend cpu and --backend rknn; the NPU model also runs on the CPU
#      (its fallback kernel), and on the NPU with the expert slots in
#      ordinary memory (RKM_RKNN_SLOT_BYTES=0: B copied per run), and with
#      the dense projections kept on the CPU at prefill (RKM_NPU_DENSE=0),
#      so the rows can be compared.
#
#   bench/rknn-check.sh [SOURCE.gguf|HF-dir] [WORKDIR]
# Without a source, a 4-layer OLMoE-shaped model is synthesized (random
# weights, real expert shapes 2048 x 1024). Environment: RKMOJO (binary,
# default build/rkmojo), THREADS (default: the performance cores),
# PROMPT_TOKENS (128), DECODE (32), MIN_TIME (0.5 s per matmul timing),
# QUICK=1 (tiny matmul shapes: the tests' plumbing run), RKM_RKNN_LIB (a
# librknnrt.so other than the system's).
#
# Run here against the emulator (RKM_RKNN_LIB=build/tests/librknnrt.so
# RKM_RKNN_CHIP=rk3588) it checks the plumbing only: the emulator computes
# on the CPU, and the script says so loudly.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${RKMOJO:-build/rkmojo}
src=${1:-}
work=${2:-/tmp/rkmojo-rknn-check}
pt=${PROMPT_TOKENS:-128}
nd=${DECODE:-32}
thr=()
[ -n "${THREADS:-}" ] && thr=(-t "$THREADS")
mkdir -p "$work"
emu=0
if "$bin" doctor | grep -q "emulated" || [ -n "${RKNN_EMU_CHIP:-}" ]; then emu=1; fi
warn() {
  if [ $emu = 1 ]; then
    echo "WARNING: RKNN_EMU detected: librknnrt is the emulator (CPU). The 'npu' / 'rknn' figures below time"
    echo "WARNING: an emulation on the CPU and say NOTHING about the NPU. Run this on a board for real numbers."
  fi
}
echo "== rkmojo doctor"
"$bin" doctor
warn
echo
echo "== per-matmul GOPS and expert FFN latency"
quick=(); [ -n "${QUICK:-}" ] && quick=(--quick)
"$bin" doctor --bench "${thr[@]}" "${quick[@]}" --min-time "${MIN_TIME:-0.5}" | sed -n '/^matmul\|^WARNING\|^npu:/,$p'
echo
if [ -z "$src" ]; then
  src="$work/olmoe4.gguf"
  [ -f "$src" ] || "$bin" synth --preset olmoe-1b-7b --set n_layer=4 -o "$src" --quiet
fi
cpu="$work/model-q8_0.rkmojo"; npu="$work/model-rk3588.rkmojo"
[ -f "$cpu/manifest.json" ] || "$bin" convert "$src" "$cpu" --quant q8_0 --quiet
[ -f "$npu/manifest.json" ] || "$bin" convert "$src" "$npu" --quant q8_0 --target rk3588 --quiet
echo "== end to end: rkmojo bench --prompt-tokens $pt -n $nd"
row() { # label model backend
  local out
  if ! out=$("$bin" bench -m "$2" --backend "$3" --prompt-tokens "$pt" -n "$nd" "${thr[@]}" 2>&1); then
    printf '%-34s failed: %s\n' "$1" "$(echo "$out" | tail -n 1)"; return
  fi
  printf '%-34s %s\n' "$1" "$(echo "$out" | grep -Ei 'prefill|decode' | tr '\n' ' ' | tr -s ' ')"
}
row "q8_0 experts, --backend cpu" "$cpu" cpu
row "rknn_i8 experts, --backend cpu" "$npu" cpu
row "rknn_i8 experts, --backend rknn" "$npu" rknn
RKM_RKNN_SLOT_BYTES=0 row "rknn_i8, rknn, copy path (no slots)" "$npu" rknn
RKM_NPU_DENSE=0 row "rknn_i8, rknn, dense on the CPU" "$npu" rknn
warn

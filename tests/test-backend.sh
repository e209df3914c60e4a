#!/usr/bin/env bash
# test-backend.sh - the NPU backend through the CLI: `rkmojo doctor` on a
# faked RK3588 board (RKM_SYSROOT with a device tree, an rknpu driver
# version and a cpuinfo) and on a machine without one; a model converted
# with --target rk3588 generating the same tokens with --backend cpu and
# --backend rknn (emulated RK3588, and emulated RK3576: two cores, K
# segments of 4096); --backend auto falling back to the CPU with a reason
# (RK3562, missing library); a bad --backend value; a manifest that gives
# rknn_i8 to a resident tensor refused; a vision tower's matmuls on the
# emulated NPU of both chips (its image rows within a cosine of 0.999 of
# the CPU's); the board-check script running against the emulator and
# saying so.
set -u
B=${RKM_BUILD:-build}
R="${RKM_RUNNER:-} $B/rkmojo"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }
EMU=$(realpath "$B/tests/librknnrt.so" 2>/dev/null || true)

# --- doctor, no board: honest "not found"
env -u RKM_RKNN_CHIP RKM_SYSROOT="$T/empty" RKM_RKNN_LIB=/nonexistent/librknnrt.so $R doctor > "$T/d0.txt" 2>&1
grep -q "npu driver:       not found" "$T/d0.txt" && grep -q "chip:             unknown" "$T/d0.txt" \
  && grep -q "backend auto:     cpu: rknn: cannot load /nonexistent/librknnrt.so" "$T/d0.txt" \
  && ok "doctor without a board" || { fail "doctor without a board"; cat "$T/d0.txt"; }

# --- doctor, faked board
S="$T/sys"
mkdir -p "$S/proc/device-tree" "$S/sys/module/rknpu"
printf 'rockchip,rk3588s-orangepi-5\0rockchip,rk3588\0' > "$S/proc/device-tree/compatible"
printf '0.9.8\n' > "$S/sys/module/rknpu/version"
printf 'processor\t: 0\nBogoMIPS\t: 48.00\nFeatures\t: fp asimd evtstrm aes fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp\nCPU part\t: 0xd0b\n\nHardware\t: Rockchip RK3588 (faked)\n' > "$S/proc/cpuinfo"
if [ -n "$EMU" ]; then
  env -u RKM_RKNN_CHIP RKM_SYSROOT="$S" RKM_RKNN_LIB="$EMU" RKNN_EMU_CHIP=rk3588 $R doctor > "$T/d1.txt" 2>&1
  grep -q "cpu:              Rockchip RK3588 (faked)" "$T/d1.txt" \
    && grep -q "npu driver:       0.9.8 (/sys/module/rknpu/version)" "$T/d1.txt" \
    && grep -q "cpu features:     asimd asimddp asimdhp fphp$" "$T/d1.txt" \
    && grep -q "chip:             rk3588 (device tree: rockchip,rk3588s-orangepi-5)" "$T/d1.txt" \
    && grep -q "runtime:          2.3.2 (emulated)" "$T/d1.txt" && grep -q "backend auto:     rknn" "$T/d1.txt" \
    && ok "doctor on a faked RK3588" || { fail "doctor on a faked RK3588"; cat "$T/d1.txt"; }
  printf 'debug driver v0.9.6\n' > "$T/v"; mkdir -p "$S/sys/kernel/debug/rknpu"; cp "$T/v" "$S/sys/kernel/debug/rknpu/version"
  env -u RKM_RKNN_CHIP RKM_SYSROOT="$S" RKM_RKNN_LIB="$EMU" $R doctor 2>&1 | grep -q "npu driver:       debug driver v0.9.6 (/sys/kernel/debug/rknpu/version)" \
    && ok "doctor prefers debugfs" || fail "doctor debugfs version"
else
  echo "skip: doctor on a faked board (no emulated librknnrt.so in $B/tests)"
fi

# --- generation: cpu vs emulated npu
$R synth --preset tiny -o "$T/t.gguf" --seed 3 --set n_ff_exp=128 --quiet || fail "synth"
$R convert "$T/t.gguf" "$T/npu.rkmojo" --target rk3588 --quiet || fail "convert --target rk3588"
$R inspect "$T/npu.rkmojo" --verify | grep -q "gate rknn_i8, up rknn_i8, down rknn_i8" && ok "inspect shows rknn_i8 parts" \
  || fail "inspect rknn_i8"
$R convert "$T/t.gguf" "$T/x.rkmojo" --target rk9999 --quiet 2> "$T/e.txt" && fail "bad --target accepted" \
  || { grep -q "target must be" "$T/e.txt" && ok "bad --target refused"; }
cp -r "$T/npu.rkmojo" "$T/bad.rkmojo"
sed -i '0,/"dtype":[[:space:]]*"f32"/s//"dtype": "rknn_i8"/' "$T/bad.rkmojo/manifest.json"
$R inspect "$T/bad.rkmojo" > /dev/null 2> "$T/bad.err" && fail "rknn_i8 resident tensor accepted" \
  || { grep -q "unsupported dtype 'rknn_i8'" "$T/bad.err" && ok "rknn_i8 refused for a resident tensor"; } || fail "bad manifest message: $(cat "$T/bad.err")"
gen() { $R run -m "$T/npu.rkmojo" --prompt-ids 5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21 -n 20 --temp 0 --chunk 8 -q "$@"; }
gen --backend cpu > "$T/cpu.txt" 2> "$T/cpu.err" || fail "run --backend cpu"
if [ -n "$EMU" ]; then
  for chip in rk3588 rk3576; do
    RKM_RKNN_LIB="$EMU" RKM_RKNN_CHIP=$chip RKNN_EMU_CHIP=$chip gen --backend rknn > "$T/npu-$chip.txt" 2> "$T/npu-$chip.err" \
      || { fail "run --backend rknn on $chip"; cat "$T/npu-$chip.err"; }
    cmp -s "$T/cpu.txt" "$T/npu-$chip.txt" && [ -s "$T/cpu.txt" ] && ok "same text on the CPU and emulated $chip" \
      || fail "cpu and $chip outputs differ"
  done
  RKM_RKNN_LIB="$EMU" RKM_RKNN_CHIP=rk3562 RKNN_EMU_CHIP=rk3562 $R run -m "$T/npu.rkmojo" --prompt-ids 5,6,7 -n 4 --temp 0 > /dev/null 2> "$T/a.err" \
    && grep -q "backend cpu: NPU unavailable: rknn: rk3562" "$T/a.err" && ok "auto on rk3562 falls back with a reason" \
    || { fail "auto on rk3562"; cat "$T/a.err"; }
  RKM_RKNN_LIB="$EMU" RKM_RKNN_CHIP=rk3588 RKNN_EMU_CHIP=rk3576 $R run -m "$T/npu.rkmojo" --prompt-ids 5,6,7 -n 4 --temp 0 > /dev/null 2> "$T/m.err" \
    && grep -q "backend cpu: NPU unavailable: rknn: NPU core 2 refused" "$T/m.err" && ok "a chip with fewer cores than claimed: CPU with a reason" \
    || { fail "core-mask probe"; cat "$T/m.err"; }
  RKM_RKNN_LIB="$EMU" RKM_RKNN_CHIP=rk3588 RKM_BACKEND=cpu $R run -m "$T/npu.rkmojo" --prompt-ids 5,6,7 -n 4 --temp 0 > /dev/null 2> "$T/b.err" \
    && grep -q "backend cpu: requested" "$T/b.err" && ok "RKM_BACKEND=cpu" || fail "RKM_BACKEND=cpu"
else
  echo "skip: --backend rknn runs (no emulated librknnrt.so)"
fi
RKM_RKNN_LIB=/nonexistent/librknnrt.so $R run -m "$T/npu.rkmojo" --prompt-ids 5,6,7 -n 4 --temp 0 --backend rknn > /dev/null 2> "$T/c.err" \
  && fail "--backend rknn without a library succeeded" \
  || { grep -q "backend rknn unavailable: rknn: cannot load" "$T/c.err" && ok "--backend rknn without a library: clear error"; } \
  || fail "missing-library message: $(cat "$T/c.err")"
$R run -m "$T/npu.rkmojo" --prompt-ids 5 -n 1 --backend gpu > /dev/null 2>&1 && fail "--backend gpu accepted" || ok "--backend gpu refused"

# --- the vision towers' matmuls on the emulated NPU: a model converted with
# its tower (synth's tiny-gemma4, tiny-qwen3vl), an image's rows from the
# int8 NPU as the CPU's to a cosine of 0.999 on every row, on both chips;
# on the CPU backend the rows are not the NPU's (the message says where
# they ran)
if [ -n "$EMU" ] && [ -x "$B/tests/make-image" ] && [ -x "$B/tests/npy-cmp" ]; then
  "$B/tests/make-image" "$T/img.png" 320 240 3 || fail "make-image"
  for preset in tiny-gemma4 tiny-qwen3vl; do
    $R synth --preset $preset --dtype f16 -o "$T/g.gguf" --mmproj-out "$T/g-mm.gguf" --quiet &&
      rm -rf "$T/g.rkmojo" && $R convert "$T/g.gguf" "$T/g.rkmojo" --quant keep --mmproj "$T/g-mm.gguf" --quiet > /dev/null ||
      fail "$preset with its tower"
    vrun() { $R run -m "$T/g.rkmojo" --image "$T/img.png" -p "x <__media__> y" -n 2 --temp 0 "$@"; }
    vrun --backend cpu --image-embd-out "$T/vcpu" > /dev/null 2> "$T/vcpu.err" || { fail "image on the CPU"; cat "$T/vcpu.err"; }
    ! grep -q "matmuls on the NPU" "$T/vcpu.err" || fail "the CPU run says NPU"
    for chip in rk3588 rk3576; do
      if RKM_RKNN_LIB="$EMU" RKM_RKNN_CHIP=$chip RKNN_EMU_CHIP=$chip vrun --backend rknn --image-embd-out "$T/vnpu" \
           > /dev/null 2> "$T/vnpu.err" && grep -q "vision tower: matmuls on the NPU" "$T/vnpu.err" &&
         line=$("$B/tests/npy-cmp" "$T/vnpu.0.npy" "$T/vcpu.0.npy" 0.999); then
        ok "$preset's tower on the emulated $chip NPU: $line"
      else
        fail "$preset's tower on the emulated $chip NPU: ${line:-}"; cat "$T/vnpu.err"
      fi
    done
  done
fi

# --- the board-check script runs against the emulator and warns
if [ -n "$EMU" ]; then
  RKMOJO=$B/rkmojo RKM_RKNN_LIB="$EMU" RKM_RKNN_CHIP=rk3588 MIN_TIME=0.01 QUICK=1 PROMPT_TOKENS=4 DECODE=2 \
    bash bench/rknn-check.sh "$T/t.gguf" "$T/check" > "$T/check.txt" 2>&1 || fail "rknn-check.sh failed"
  grep -q "WARNING: RKNN_EMU detected" "$T/check.txt" && grep -q "rknn_i8 experts, --backend rknn *prefill" "$T/check.txt" \
    && ok "rknn-check.sh against the emulator (with its warning)" || { fail "rknn-check.sh output"; tail -20 "$T/check.txt"; }
fi
[ $fails -eq 0 ] && echo "all ok" || echo "$fails failed"
[ $fails -eq 0 ]

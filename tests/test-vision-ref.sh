#!/usr/bin/env bash
# test-vision-ref.sh - rkmojo's vision towers against llama.cpp's
# multimodal library (mtmd) itself: the prebuilt binding of the npm package
# @fugood/node-llama-linux-x64 (pinned in tests/js/package.json), driven by
# tests/ref/mtmd_ref.c.
#
# For each projector synth writes (gemma4v, from the tiny-gemma4 preset),
# in f32, f16 and q8_0:
#   - mtmd loads synth's mmproj beside synth's text model and encodes an
#     image: the keys, tensor names, shapes and types are the ones
#     llama.cpp reads, and the projection fits the text model;
#   - rkmojo reads the same file (`rkmojo inspect MMPROJ --image WxH`) and
#     resizes images of several sizes and aspect ratios (under the minimum
#     of tokens, over the maximum, tall, wide) to the number of image
#     tokens mtmd makes of them.
# Skips (77) where the package or the harness is missing (non-x86-64).
set -u
cd "$(dirname "$0")/.."
BUILD=${RKM_BUILD:-${BUILD:-build}}
RKMOJO="${RKM_RUNNER:-} $BUILD/rkmojo"
ADDON=tests/js/node_modules/@fugood/node-llama-linux-x64/index.node
REF=$BUILD/tests/mtmd-ref
IMG=$BUILD/tests/make-image
[ -f "$ADDON" ] || { echo "llama.cpp's multimodal binding missing (x86-64 only; npm install in tests/js): skipped"; exit 77; }
for b in "$REF" "$IMG" "$BUILD/rkmojo"; do [ -x "$b" ] || { echo "FAIL: $b not built"; exit 1; }; done
tmp=$(mktemp -d)
trap '[ -n "${RKM_KEEP_TMP:-}" ] || rm -rf "$tmp"' EXIT
fail=0
sizes="320x240 640x480 1000x1000 40x1000 1000x40 48x48 5000x3000 97x131"
for s in $sizes; do "$IMG" "$tmp/$s.png" "${s%x*}" "${s#*x}" 7 || { echo "FAIL: make-image $s"; exit 1; }; done
for preset in tiny-gemma4; do
  for dt in f32 f16 q8_0; do
    m="$tmp/$preset-$dt"
    if ! $RKMOJO synth --preset "$preset" --dtype "$dt" -o "$m.gguf" --mmproj-out "$m-mmproj.gguf" --quiet; then
      echo "FAIL: synth $preset $dt"; fail=1; continue
    fi
    args=()
    for s in $sizes; do args+=(--image "$s"); done
    if ! $RKMOJO inspect "$m-mmproj.gguf" "${args[@]}" > "$m.inspect"; then
      echo "FAIL: inspect $preset $dt"; fail=1; continue
    fi
    for s in $sizes; do
      got=$("$REF" "$ADDON" "$m.gguf" "$m-mmproj.gguf" embd "$tmp/$s.png" "$m-$s.npy" 2) || {
        echo "FAIL: mtmd on $preset $dt $s"; fail=1; continue; }
      want=$(awk -v s="image $s:" 'index($0, s) == 1 {print $(NF-1)}' "$m.inspect")
      n=$(echo "$got" | awk '{print $2}')
      if ! [[ "$want" =~ ^[0-9]+$ && "$n" =~ ^[0-9]+$ ]] || [ "$n" != "$want" ]; then
        echo "FAIL: $preset $dt $s: mtmd makes $n image tokens, rkmojo $want"; fail=1
      fi
    done
    echo "$preset $dt: mtmd loads synth's mmproj; image tokens agree on $(echo $sizes | wc -w) sizes"
  done
done
[ $fail -eq 0 ] && echo "PASS"
exit $fail

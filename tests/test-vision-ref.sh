#!/usr/bin/env bash
# test-vision-ref.sh - rkmojo's vision towers against llama.cpp's
# multimodal library (mtmd) itself: the prebuilt binding of the npm package
# @fugood/node-llama-linux-x64 (pinned in tests/js/package.json), driven by
# tests/ref/mtmd_ref.c.
#
# For each projector synth writes (gemma4v from the tiny-gemma4 preset,
# qwen3vl_merger from tiny-qwen3vl: its deep-stack features included), in
# f32, f16 and q8_0:
#   - mtmd loads synth's mmproj beside synth's text model and encodes an
#     image: the keys, tensor names, shapes and types are the ones
#     llama.cpp reads, and the projection fits the text model;
#   - rkmojo reads the same file (`rkmojo inspect MMPROJ --image WxH`) and
#     resizes images of several sizes and aspect ratios (under the minimum
#     of tokens, over the maximum, tall, wide) to the number of image
#     tokens mtmd makes of them;
#   - rkmojo's image embeddings (`rkmojo run --mmproj --image
#     --image-embd-out`) equal mtmd's (mtmd_get_output_embd) to a cosine of
#     0.9999 on every token's row in f32 and f16 (PNG, which both decode
#     to the same pixels), 0.999 in q8_0 (the activations of both engines
#     are rounded to 8 bits, from sums taken in different orders); synth's
#     towers carry Gemma 4's clamp bounds on the linears, tight enough to
#     change every row (without them the rows part at 0.998);
#   - and from JPEG files to 0.995 in f32: libjpeg-turbo (rkmojo) and
#     stb_image (mtmd) round their inverse DCT, upsampling and colour
#     conversion differently, up to 2 levels of 255 in some pixels, which
#     the random weights amplify; from PNG the prepared image is mtmd's
#     to the bit.
#   - prompts with images through the text model (`rkmojo run -m DIR
#     --image ... -p "... <__media__> ..."` against mtmd_tokenize and
#     mtmd_helper_eval_chunks with llama.cpp's own text model, f32): the
#     same number of positions and the same 16 greedy ids up to the first
#     near-tie, for one image at three sizes (one of 252 rows, more than a
#     default prefill chunk), an image first and two images; the same for
#     Qwen3-VL (multi-axis positions, deep-stack rows; 961 rows for one).
#   - --image-min-tokens / --image-max-tokens as mtmd's image_min_tokens /
#     image_max_tokens: the same token counts and rows under three bounds,
#     a minimum above the maximum refused;
# The quick tier (RKM_TEST_TIER=quick) compares three of the sizes in f16,
# q8_0 and JPEG; the others all eight. The full tier also encodes a
# 448x448 image with the full Gemma 4 26B-A4B tower in f16 (27 blocks of
# 1152; the prebuilt binding takes about 5 minutes for it) and with
# Qwen3-VL-30B-A3B's (27 blocks of 1152, three deep-stack mergers) to
# 0.9999.
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
some=$sizes
[ "${RKM_TEST_TIER:-ci}" = quick ] && some="320x240 40x1000 5000x3000"
for s in $sizes; do
  for e in png jpg; do "$IMG" "$tmp/$s.$e" "${s%x*}" "${s#*x}" 7 || { echo "FAIL: make-image $s.$e"; exit 1; }; done
done
CMP=$BUILD/tests/npy-cmp
[ -x "$CMP" ] || { echo "FAIL: $CMP not built"; exit 1; }
# compare TAG MODEL MMPROJ IMAGE MIN_COS: rkmojo's embeddings against mtmd's
compare() {
  "$REF" "$ADDON" "$2.gguf" "$3" embd "$4" "$tmp/ref.npy" 2 > /dev/null || { echo "FAIL: mtmd on $1"; fail=1; return; }
  $RKMOJO run --mmproj "$3" --image "$4" "${lim[@]}" --image-embd-out "$tmp/ours" -n 0 -p x -t 2 2> "$tmp/run.err" ||
    { echo "FAIL: rkmojo run on $1: $(cat "$tmp/run.err")"; fail=1; return; }
  local line
  line=$("$CMP" "$tmp/ours.0.npy" "$tmp/ref.npy" "$5") || { echo "FAIL: $1: $line (min row cosine $5 wanted)"; fail=1; return; }
  echo "  $1: $line"
}
for preset in tiny-gemma4 tiny-qwen3vl; do
  # Qwen3-VL's default maximum of 4096 tokens (16384 patches) would make
  # the 5000x3000 image minutes of attention for both engines: 600 here
  lim=()
  unset MTMD_IMAGE_MAX_TOKENS
  if [ "$preset" = tiny-qwen3vl ]; then lim=(--image-max-tokens 600); export MTMD_IMAGE_MAX_TOKENS=600; fi
  for dt in f32 f16 q8_0; do
    m="$tmp/$preset-$dt"
    if ! $RKMOJO synth --preset "$preset" --dtype "$dt" -o "$m.gguf" --mmproj-out "$m-mmproj.gguf" --quiet; then
      echo "FAIL: synth $preset $dt"; fail=1; continue
    fi
    args=()
    for s in $sizes; do args+=(--image "$s"); done
    if ! $RKMOJO inspect "$m-mmproj.gguf" "${args[@]}" "${lim[@]}" > "$m.inspect"; then
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
    min=0.9999
    [ "$dt" = q8_0 ] && min=0.999
    set -- $some
    [ "$dt" = f32 ] && set -- $sizes
    for s in "$@"; do compare "$preset $dt $s.png" "$m" "$m-mmproj.gguf" "$tmp/$s.png" "$min"; done
    if [ "$dt" = f32 ]; then
      for s in $some; do compare "$preset $dt $s.jpg" "$m" "$m-mmproj.gguf" "$tmp/$s.jpg" 0.995; done
    fi
  done
done
unset MTMD_IMAGE_MAX_TOKENS
lim=()
# --image-min-tokens / --image-max-tokens against mtmd's image_min_tokens /
# image_max_tokens: the same number of tokens and the same rows
m="$tmp/tiny-gemma4-f32"
for lim in "0 70" "100 0" "60 120"; do
  read -r lo hi <<<"$lim"
  envs=() opts=()
  [ "$lo" -gt 0 ] && envs+=("MTMD_IMAGE_MIN_TOKENS=$lo") && opts+=(--image-min-tokens "$lo")
  [ "$hi" -gt 0 ] && envs+=("MTMD_IMAGE_MAX_TOKENS=$hi") && opts+=(--image-max-tokens "$hi")
  n=$(env "${envs[@]}" "$REF" "$ADDON" "$m.gguf" "$m-mmproj.gguf" embd "$tmp/1000x1000.png" "$tmp/lim.npy" 2 | awk '{print $2}') ||
    { echo "FAIL: mtmd with token limits $lim"; fail=1; continue; }
  if $RKMOJO run --mmproj "$m-mmproj.gguf" --image "$tmp/1000x1000.png" "${opts[@]}" --image-embd-out "$tmp/lim" -n 0 -p x -t 2 \
       2> "$tmp/lim.err" && line=$("$CMP" "$tmp/lim.0.npy" "$tmp/lim.npy" 0.9999); then
    echo "  token limits [$lo, $hi]: mtmd $n tokens, $line"
  else
    echo "FAIL: token limits [$lo, $hi]: mtmd $n tokens; rkmojo: $(cat "$tmp/lim.err") ${line:-}"; fail=1
  fi
done
$RKMOJO run --mmproj "$m-mmproj.gguf" --image "$tmp/48x48.png" --image-min-tokens 90 --image-max-tokens 80 -n 0 -p x \
  2> "$tmp/lim.err" && { echo "FAIL: a minimum above the maximum accepted"; fail=1; }
grep -q "a minimum of 90 is above the maximum of 80" "$tmp/lim.err" || { echo "FAIL: min > max message: $(cat "$tmp/lim.err")"; fail=1; }

# gen TAG MODEL_DIR GGUF MMPROJ PROMPT IMAGE...: the prompt with its images
# through the text model, greedy: the same positions (text ids and image
# rows as mtmd assembles them) and the same ids as llama.cpp's mtmd up to
# the first near-tie (llama.cpp's top two logits within 0.05).
gen() {
  local tag=$1 dir=$2 gguf=$3 mm=$4 prompt=$5
  shift 5
  local N=16 args=()
  for i in "$@"; do args+=(--image "$i"); done
  "$REF" "$ADDON" "$gguf" "$mm" gen "$prompt" $N "$@" > "$tmp/gen.ref" 2> "$tmp/gen.err" ||
    { echo "FAIL: mtmd gen on $tag: $(cat "$tmp/gen.err")"; fail=1; return; }
  $RKMOJO run -m "$dir" --mmproj "$mm" "${args[@]}" -p "$prompt" -n $N --temp 0 --print-ids -t 2 \
    > "$tmp/gen.ours" 2> "$tmp/gen.err" || { echo "FAIL: rkmojo run on $tag: $(cat "$tmp/gen.err")"; fail=1; return; }
  local rp op
  rp=$(awk '$1 == "positions" {print $2}' "$tmp/gen.ref")
  op=$(sed -n 's/^prompt: \([0-9]*\) positions.*/\1/p' "$tmp/gen.err")
  if [ -z "$rp" ] || [ "$rp" != "$op" ]; then echo "FAIL: $tag: mtmd makes $rp positions of the prompt, rkmojo ${op:-none}"; fail=1; return; fi
  local res
  res=$(awk 'BEGIN { n = 0; m = 0 } NR == FNR { if (NF == 1) ours[n++] = $1; next }
             f { ref[m] = $1; gap[m++] = $2 } $1 == "positions" { f = 1 }
             END { for (i = 0; i < m; i++) {
                     if (i >= n) { print "short", i; exit }
                     if (ours[i] != ref[i]) { print (gap[i] < 0.05 ? "tie" : "diff"), i, ref[i], gap[i], ours[i]; exit }
                   }
                   print "equal", m }' "$tmp/gen.ours" "$tmp/gen.ref")
  local kind at rid gap oid
  read -r kind at rid gap oid <<<"$res - - - - -"
  case $kind in
    equal) echo "  $tag: $rp positions, $at greedy ids equal to mtmd's" ;;
    tie) echo "  $tag: $rp positions, ids equal up to step $at, a near-tie (logit gap $gap)" ;;
    short) echo "FAIL: $tag: rkmojo stopped after $at ids"; fail=1 ;;
    *) echo "FAIL: $tag: at step $at mtmd has $rid (logit gap $gap), rkmojo $oid"; fail=1 ;;
  esac
}
# gen_set PRESET TWO_IMAGE_PROMPT SIZE...: the f32 model of the loop above
# converted, one image at each size, an image first, two images. For
# Qwen3-VL an image's rows sit at multi-axis positions (time, row,
# column) and the text after it max(rows, columns) on; its deep-stack rows
# are added after the first layers; 961 rows cross prefill chunks.
gen_set() {
  local preset=$1 two=$2 m="$tmp/$1-f32"
  shift 2
  if [ -f "$m.gguf" ] && $RKMOJO convert "$m.gguf" "$m.rkmojo" --quant keep --quiet > /dev/null 2>&1; then
    for s in "$@"; do
      gen "$preset f32 $s.png" "$m.rkmojo" "$m.gguf" "$m-mmproj.gguf" "Look: <__media__> what is it?" "$tmp/$s.png"
    done
    gen "$preset f32, image first" "$m.rkmojo" "$m.gguf" "$m-mmproj.gguf" "<__media__> describe" "$tmp/97x131.png"
    gen "$preset f32, two images" "$m.rkmojo" "$m.gguf" "$m-mmproj.gguf" "$two" "$tmp/320x240.png" "$tmp/1000x40.png"
  else
    echo "FAIL: convert of the $preset f32 model"; fail=1
  fi
}
gen_set tiny-gemma4 "<start_of_turn>user A <__media__> and B <__media__> differ how?<end_of_turn>" 320x240 40x1000 5000x3000
gen_set tiny-qwen3vl "<|im_start|>user A <__media__> and B <__media__> differ how?<|im_end|>" 320x240 40x1000 1000x1000
if [ "${RKM_TEST_TIER:-ci}" = full ]; then
  m="$tmp/g4full"
  if $RKMOJO synth --preset gemma4-26b-a4b --set n_layer=6 --set n_vocab=512 --set n_expert=4 --set n_expert_used=2 \
      --set n_ff_exp=64 --set n_ff=64 --dtype f16 -o "$m.gguf" --mmproj-out "$m-mmproj.gguf" --quiet; then
    "$IMG" "$tmp/448.png" 448 448 5
    compare "gemma4-26b-a4b f16 448x448.png" "$m" "$m-mmproj.gguf" "$tmp/448.png" 0.9999
  else
    echo "FAIL: synth of the full Gemma 4 tower"; fail=1
  fi
  m="$tmp/q3vlfull"
  if $RKMOJO synth --preset qwen3-vl-30b-a3b --set n_layer=4 --set n_vocab=512 --set n_expert=4 --set n_expert_used=2 \
      --set n_ff_exp=64 --dtype f16 -o "$m.gguf" --mmproj-out "$m-mmproj.gguf" --quiet 2> "$tmp/synth.err"; then
    compare "qwen3-vl-30b-a3b f16 448x448.png" "$m" "$m-mmproj.gguf" "$tmp/448.png" 0.9999
  else
    echo "FAIL: synth of the full Qwen3-VL tower: $(cat "$tmp/synth.err")"; fail=1
  fi
fi
[ $fail -eq 0 ] && echo "PASS"
exit $fail

#!/usr/bin/env bash
# test-convert.sh - the format through the CLI, as a user runs it:
# synth is deterministic (a mix too); synth -> convert -> inspect --verify
# works for every quant; experts are stored packed by default and plain with
# --expert-layout plain, with the same greedy text; --quant's names (an
# unknown one refused, writing nothing), its report and the warning for a
# source quantized again (test-quant-mix.sh compares the mixes with
# llama.cpp's quantizer); a flipped byte fails
# --verify naming the expert; an
# interrupted conversion (killed by SIGXFSZ) leaves no manifest; a write
# error (EFBIG, as a full disk) fails cleanly; bad inputs give one clear
# message and a non-zero status.
set -u
B=${RKM_BUILD:-build}
R="${RKM_RUNNER:-} $B/rkmojo"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }

$R synth --preset tiny -o "$T/a.gguf" --seed 7 --quiet || fail "synth"
$R synth --preset tiny -o "$T/b.gguf" --seed 7 --quiet
cmp -s "$T/a.gguf" "$T/b.gguf" && ok "same seed, same bytes" || fail "same seed gave different bytes"
$R synth --preset tiny -o "$T/c.gguf" --seed 8 --quiet
cmp -s "$T/a.gguf" "$T/c.gguf" && fail "different seeds gave the same bytes" || ok "different seeds differ"
$R synth --preset tiny --dtype q4_k_m -o "$T/k1.gguf" --seed 7 --quiet && $R synth --preset tiny --dtype q4_k_m -o "$T/k2.gguf" --seed 7 --quiet \
  && cmp -s "$T/k1.gguf" "$T/k2.gguf" && ok "same seed, same bytes (--dtype q4_k_m)" || fail "synth --dtype q4_k_m: not the same bytes twice"
rm -f "$T/k1.gguf" "$T/k2.gguf"

for q in keep q8_0 q4_0; do
  if $R convert "$T/a.gguf" "$T/m-$q" --quant "$q" --quiet && $R inspect "$T/m-$q" --verify > "$T/inspect-$q.txt"; then
    grep -q "architecture:     qwen3moe" "$T/inspect-$q.txt" && grep -q "verify:           ok" "$T/inspect-$q.txt" \
      && ok "convert --quant $q + inspect --verify" || fail "inspect output for $q"
  else
    fail "convert/inspect --quant $q"
  fi
done
grep -q "routed experts:" "$T/inspect-q4_0.txt" && grep -q "q4_0" "$T/inspect-q4_0.txt" || fail "inspect lists expert types"

# expert layout: packed (the kernels' rows) by default, GGUF rows on request;
# both give the same greedy text
grep -q "gate q4_0_x16, up q4_0_x16, down q4_0_x16" "$T/inspect-q4_0.txt" && ok "experts stored packed by default" \
  || fail "default layout: $(grep 'routed experts' "$T/inspect-q4_0.txt")"
if $R convert "$T/a.gguf" "$T/m-plain" --quant q4_0 --expert-layout plain --quiet && $R inspect "$T/m-plain" --verify > "$T/inspect-plain.txt"; then
  grep -q "gate q4_0, up q4_0, down q4_0" "$T/inspect-plain.txt" && ok "--expert-layout plain" \
    || fail "plain layout: $(grep 'routed experts' "$T/inspect-plain.txt")"
  g1=$($R run -m "$T/m-q4_0" -p "Once upon a time" -n 12 --temp 0 -q 2>/dev/null)
  g2=$($R run -m "$T/m-plain" -p "Once upon a time" -n 12 --temp 0 -q 2>/dev/null)
  [ -n "$g1" ] && [ "$g1" = "$g2" ] && ok "packed and plain experts give the same text" || fail "packed vs plain text differs"
else
  fail "convert --expert-layout plain"
fi
# The K-quants and IQ4 at full super-block width (Q4_K_M: Q4_K experts;
# Q5_K_S; Q6_K; Q3_K_S; Q2_K: Q2_K gate and up, a Q3_K down; IQ4_XS;
# IQ4_NL): experts stored packed (q4_k_x16, ..., iq4_nl_x16), resident matrices packed at
# load; --expert-layout plain keeps GGUF's rows, which the expert cache
# packs after each read. Every logit the same as the plain rows'
# (RKM_PACK=resident on the plain conversion: its experts run as rows;
# resident matrices packed on both sides, as the ref and AVX2 sets' plain
# q8_0 kernels do not fuse their multiply-add), resident and streamed
# through 3 slots
kquant_packed() { # MIX TYPE [DOWN_TYPE]
  local mix=$1 ty=$2 dt=${3:-$2} K=$T/k-$1
  if $R synth --preset tiny --set n_embd=256 --set n_ff_exp=256 --dtype "$mix" -o "$K.gguf" --quiet \
      && $R convert "$K.gguf" "$K-m" --quant keep --quiet && $R inspect "$K-m" --verify > "$K-inspect.txt" \
      && $R convert "$K.gguf" "$K-mp" --quant keep --expert-layout plain --quiet && $R inspect "$K-mp" > "$K-inspect-p.txt"; then
    grep -q "gate ${ty}_x16, up ${ty}_x16, down ${dt}_x16" "$K-inspect.txt" && ok "$mix: ${ty^^} experts stored packed by default" \
      || fail "$mix layout: $(grep 'routed experts' "$K-inspect.txt")"
    grep -q "gate $ty, up $ty, down $dt" "$K-inspect-p.txt" && ok "$mix: ${ty^^} experts as GGUF rows with --expert-layout plain" \
      || fail "$mix plain layout: $(grep 'routed experts' "$K-inspect-p.txt")"
    local ids=1,5,9,33,100,200,300,7,8,9,10,11,12,13,40,41 p0 p1 p2 p3
    ppl() { $R perplexity --ids $ids --print-top1 --router-margins "$@" 2>/dev/null; }
    p0=$(RKM_PACK=resident ppl -m "$K-mp")
    p1=$(ppl -m "$K-m")
    p2=$(ppl -m "$K-m" --expert-cache-slots 3)
    p3=$(ppl -m "$K-mp" --expert-cache-slots 3)
    [ -n "$p0" ] && [ "$p0" = "$p1" ] && [ "$p0" = "$p2" ] && [ "$p0" = "$p3" ] \
      && ok "$mix: ${ty^^} packed, the same logits as its rows (kernels $($R doctor 2>/dev/null | awk '/^kernels:/ {print $2}'))" \
      || fail "$mix packed vs rows: $(diff <(echo "$p0") <(echo "$p1") | head -3) / $(diff <(echo "$p0") <(echo "$p2") | head -3) / $(diff <(echo "$p0") <(echo "$p3") | head -3)"
  else
    fail "synth/convert $mix at width 256"
  fi
}
kquant_packed q4_k_m q4_k
kquant_packed q5_k_s q5_k
kquant_packed q6_k q6_k
kquant_packed q3_k_s q3_k
kquant_packed q2_k q2_k q3_k
kquant_packed iq4_xs iq4_xs
kquant_packed iq4_nl iq4_nl
$R convert "$T/a.gguf" "$T/m-x" --expert-layout diagonal --quiet 2> "$T/err" && fail "bad --expert-layout accepted" \
  || { grep -q "expert-layout" "$T/err" && ok "bad --expert-layout refused"; } || fail "message: $(cat "$T/err")"

# a flipped byte inside expert 3 of layer 2
cp -r "$T/m-q8_0" "$T/bad"
stride=$(grep -m1 '"blob_stride"' "$T/bad/manifest.json" | tr -dc 0-9)
printf '\x55' | dd of="$T/bad/experts/blk.2.bin" bs=1 seek=$((3 * stride + 100)) conv=notrunc status=none
if $R inspect "$T/bad" --verify > /dev/null 2> "$T/err"; then fail "--verify accepted a corrupt expert"
else grep -q "expert 3 of layer 2" "$T/err" && ok "--verify names the bad expert" || fail "message: $(cat "$T/err")"; fi

# interrupted: the file-size limit kills the converter half-way (SIGXFSZ)
( ulimit -f 200; exec $R convert "$T/a.gguf" "$T/int" --quant keep --quiet ) 2> /dev/null
[ -e "$T/int/manifest.json" ] && fail "an interrupted conversion left a manifest" || ok "interrupted conversion leaves no manifest"
if $R inspect "$T/int" > /dev/null 2> "$T/err"; then fail "inspect accepted an incomplete model"
else grep -q "no manifest.json" "$T/err" && ok "incomplete model is named as such" || fail "message: $(cat "$T/err")"; fi

# write failure (EFBIG, like a full disk): clean error, outputs removed
( trap '' XFSZ; ulimit -f 200; exec $R convert "$T/a.gguf" "$T/full" --quant keep --quiet ) 2> "$T/err"
rc=$?
[ $rc -ne 0 ] && grep -q "File too large" "$T/err" && [ ! -e "$T/full/manifest.json" ] && [ ! -e "$T/full/resident.bin" ] \
  && ok "write failure: clear error, partial output removed" || fail "write failure: rc $rc, $(cat "$T/err")"

# bad inputs: one line, non-zero exit, no crash
head -c 5000 "$T/a.gguf" > "$T/trunc.gguf"
printf 'GGUX' | cat - "$T/a.gguf" > "$T/magic.gguf"
mkdir -p "$T/hf-bad" && echo '{"model_type": "gpt_bigcode"}' > "$T/hf-bad/config.json"
for bad in trunc.gguf magic.gguf hf-bad missing.gguf; do
  $R convert "$T/$bad" "$T/out-$bad" --quiet 2> "$T/err-$bad"
  rc=$?
  if [ $rc -eq 1 ] && [ "$(wc -l < "$T/err-$bad")" -eq 1 ] && [ ! -e "$T/out-$bad/manifest.json" ]; then ok "bad input $bad: $(head -c 160 "$T/err-$bad")"
  else fail "bad input $bad: rc $rc"; fi
done
grep -q "gpt_bigcode" "$T/err-hf-bad" || fail "the unsupported architecture is named"
grep -q "bad magic" "$T/err-magic.gguf" || fail "a wrong magic is named"
grep -q "exceeds the file\|truncated" "$T/err-trunc.gguf" || fail "a truncated file is named"

# --quant: an unknown name lists the accepted ones and writes nothing;
# names are case-insensitive, mxfp4 is mxfp4_moe; the report names the
# types written; quantizing a quantized source again warns, keeping its
# type does not (and copies the bytes)
$R convert "$T/a.gguf" "$T/mix-bad" --quant q4_k_x 2> "$T/err"
rc=$?
[ $rc -eq 1 ] && [ "$(wc -l < "$T/err")" -eq 1 ] && grep -q "unknown type or mix 'q4_k_x'" "$T/err" \
  && grep -q "q4_k_m" "$T/err" && grep -q "mxfp4_moe (or mxfp4)" "$T/err" && [ ! -e "$T/mix-bad" ] \
  && ok "unknown --quant refused, nothing written: $(head -c 120 "$T/err")" || fail "unknown --quant: rc $rc, $(cat "$T/err")"
if $R convert "$T/a.gguf" "$T/mix-mx" --quant MXFP4 2> "$T/err" && $R inspect "$T/mix-mx" --verify > "$T/inspect-mx.txt"; then
  [ "$(jq -r .quant "$T/mix-mx/manifest.json")" = mxfp4_moe ] && grep -q "gate mxfp4_x16, up mxfp4_x16, down mxfp4_x16" "$T/inspect-mx.txt" \
    && grep -q "^convert: mxfp4_moe:.* mxfp4" "$T/err" && ok "--quant MXFP4 is mxfp4_moe, reported" \
    || fail "mxfp4 alias: $(grep 'routed experts' "$T/inspect-mx.txt"); $(cat "$T/err")"
else
  fail "convert --quant MXFP4"
fi
$R synth --preset tiny --dtype q8_0 -o "$T/q8.gguf" --quiet
$R convert "$T/q8.gguf" "$T/mix-rq" --quant q4_k_m --quiet 2> "$T/err" && grep -q "already quantized (q8_0) and q4_k_m quantizes them again" "$T/err" \
  && ok "re-quantizing a q8_0 source warns" || fail "re-quantize warning: $(cat "$T/err")"
$R convert "$T/q8.gguf" "$T/mix-q8" --quant q8_0 --quiet 2> "$T/err" && [ ! -s "$T/err" ] \
  && $R convert "$T/q8.gguf" "$T/mix-k8" --quant keep --quiet && cmp -s "$T/mix-q8/resident.bin" "$T/mix-k8/resident.bin" \
  && ok "q8_0 into q8_0: no warning, the bytes kept" || fail "q8_0 into q8_0: $(cat "$T/err")"

# a Hugging Face directory whose config disagrees with its tensors
$R synth --preset tiny --dtype f16 -o "$T/hf.gguf" --hf-out "$T/hf" --quiet || fail "synth --hf-out"
sed -i 's/"hidden_size":[[:space:]]*128/"hidden_size": 256/' "$T/hf/config.json"
if $R convert "$T/hf" "$T/hf-bad.rkmojo" --quiet 2> "$T/err"; then fail "a config/tensor mismatch was accepted"
else grep -q "config.json says\|imply" "$T/err" && ok "config/tensor mismatch: $(head -c 150 "$T/err")" || fail "message: $(cat "$T/err")"; fi

# --vocab-from: a real tokenizer travels into the checkpoint and the model
if [ -n "${RKM_SHARED:-}" ] || [ -d ../shared/vocab ]; then
  V=${RKM_SHARED:-../shared}/vocab/ggml-vocab-gpt-2.gguf
  $R synth --preset tiny --set n_layer=2 --vocab-from "$V" -o "$T/v.gguf" --quiet && $R convert "$T/v.gguf" "$T/v.rkmojo" --quiet \
    && $R inspect "$T/v.rkmojo" > "$T/v.txt" || fail "synth --vocab-from"
  grep -q "vocab 50257" "$T/v.txt" && grep -q "gpt2" "$T/v.txt" && ok "--vocab-from copies the GPT-2 vocabulary" \
    || fail "vocab-from: $(grep -E 'vocab|tokenizer' "$T/v.txt")"
  a=$($R tokenize -m "$T/v.rkmojo" --ids "Hello world" 2>/dev/null | tr -s ' \n' ' ')
  b=$($R tokenize --vocab "$V" --ids "Hello world" 2>/dev/null | tr -s ' \n' ' ')
  [ -n "$a" ] && [ "$a" = "$b" ] && ok "the model tokenizes as its vocabulary: $a" || fail "tokenize: '$a' vs '$b'"
else
  echo "skip: ../shared not found, --vocab-from not tested"
fi

echo "$fails failures"
[ $fails -eq 0 ]

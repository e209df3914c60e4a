#!/usr/bin/env bash
# test-quant-mix.sh - `rkmojo convert --quant MIX` against llama.cpp's own
# quantizer (llama_model_quantize of the npm package's prebuilt library,
# through tests/ref/llama_cpp_ref.c, no importance matrix): for every
# mix and several shrunk synth presets written as F32 (two as F16),
#   A = rkmojo convert X.gguf --quant MIX
#   B = rkmojo convert (llama.cpp's quantize X.gguf MIX) --quant keep
# must hold the same type for every tensor and expert part (the
# manifests' dtypes) and the same bytes (their XXH3 checksums, cmp of each
# resident tensor's bytes, of experts/*.bin). The F16 presets are also
# written as Hugging Face directories (safetensors; Mixtral's experts one
# tensor each), which must convert to A's types and bytes.
# `rkmojo synth --dtype MIX` writes the mix's types itself, quantizing the
# F32 rows as it draws them: for the F32 sources, every K-quant mix of
# tiny and q4_k_m of the others, that file D (same seed and options)
#   - converted with --quant keep, must be A: the same manifest types and
#     checksums, resident.bin and experts/*.bin byte for byte;
#   - must load in llama.cpp with the metadata (file type included) of
#     llama.cpp's own quantization of X, and give its greedy ids.
# The cases exercise the rules' conditions: 8 experts (Mixtral's bumps of
# attn_k, attn_v, attn_output), n_head / n_head_kv >= 4, 8 and 16 layers
# (the "more bits" layer pattern and the first eighth / sixteenth of
# ffn_down), Gemma 4's layers without attn_v (attn_v ranks count the
# tensors), a tied output, shared experts, rows that are not a multiple
# of 256 (the fallback types; tiny is 128 wide, mixtral's experts 288)
# and llama.cpp's "70B" model type (llama, 80 layers, grouped kv heads).
# Exceptions, rkmojo's documented rules (src/convert/quant_mix.c):
#   - q4_0 is rkmojo's uniform type: output.weight q8_0 and a tied
#     token_embd q4_0 (llama.cpp's Q4_0 mix: Q6_K for both), and attn_k /
#     attn_v of 8-expert models stay q4_0 (llama.cpp's: Q8_0). Those
#     tensors must have rkmojo's type in A and are not compared with B.
# rkmojo's other departures do not arise here: routers are F32 in these
# sources, as llama.cpp then keeps them, and no row is short of a multiple
# of 32; mxfp4_moe on Mixtral's split experts (the HF directory) gives
# mxfp4 by role, compared with llama.cpp's on the fused GGUF.
# How much runs depends on RKM_TEST_TIER (tests/run.sh, tests/tiers): in
# full, every case in each of its mixes; in ci (the default), tiny in all
# of its mixes (the synth --dtype checks of every K-quant mix with them)
# and each other case k in its j-th mix where (j + k) % 3 == 0, so that
# every case and every mix runs; each tier checks that all it planned was
# compared, full also the floors below.
# The models (synth, llama.cpp's quantizations) come from
# tests/common/models.sh, made once and shared.
# Skips (77) where the package or the harness is missing (non-x86-64).
set -u
export LC_ALL=C # sort and join agree on the order
cd "$(dirname "$0")/.."
. tests/common/llamacpp_ref.sh
. tests/common/models.sh
tier=${RKM_TEST_TIER:-ci}
command -v jq >/dev/null || { echo "FAIL: jq missing (scripts/setup.sh installs it)"; exit 1; }

all_mixes="q4_k_m q4_k_s q5_k_m q5_k_s q6_k q3_k_m q3_k_s q3_k_l q2_k iq4_xs iq4_nl mxfp4_moe q8_0 q4_0 f16 bf16"
e="--set n_embd=256"
# name|preset|source dtype|synth options|mixes (all: every mix); the
# sources written with --hf-out (name hf-*) are also converted from their
# Hugging Face directory, which must give A's types and bytes
x2="--set n_expert=2 --set n_expert_used=2"
by_layer="q4_k_m q4_k_s q5_k_m q3_k_m q3_k_l q2_k iq4_xs iq4_nl mxfp4_moe" # the mixes whose rules read layers or heads
few="q4_k_m q2_k iq4_nl mxfp4_moe"
# the mixes synth --dtype takes as mixes (q8_0, q4_0, f16, bf16 are its uniform types)
synth_mixes="q4_k_m q4_k_s q5_k_m q5_k_s q6_k q3_k_m q3_k_s q3_k_l q2_k iq4_xs iq4_nl mxfp4_moe"
ids=$(seq 3 7 150 | paste -sd, -) # 22 prompt ids, valid in every vocabulary
in_list() { case " $2 " in *" $1 "*) return 0 ;; esac; return 1; }
cases=(
  "tiny|tiny|f32||all"
  "olmoe|olmoe-1b-7b|f32|--set n_layer=2 $e --set n_head=2 --set n_head_kv=2 --set n_ff_exp=256 $x2|$few"
  "qwen3moe-8L|qwen3-30b-a3b|f32|--set n_layer=8 $e --set n_head=4 --set n_head_kv=1 --set n_ff_exp=256 $x2|$by_layer"
  "mixtral|mixtral-8x7b|f32|--set n_layer=2 $e --set n_head=8 --set n_head_kv=2 --set n_ff_exp=288|all"
  "llama-16L|llama-dense|f32|--set n_layer=16 $e --set n_head=8 --set n_head_kv=8 --set n_ff=256|$by_layer"
  "qwen3-tied|qwen3-dense|f32|--set n_layer=2 $e --set n_ff=512 --set tied_output=1|all"
  "gemma4|gemma4-26b-a4b|f32|--set n_layer=6 $e --set n_head=8 --set head_dim=128 --set head_dim_v=128 --set rope_dim=128 --set head_dim_swa=64 --set rope_dim_swa=64 --set n_ff_exp=256 --set n_ff=256 $x2|all"
  "qwen2moe|qwen2moe-a2.7b|f32|--set n_layer=2 $e --set n_head=2 --set n_head_kv=2 --set n_ff_exp=256 --set n_ff_shexp=512 --set n_expert=8|q4_k_m q3_k_m q2_k mxfp4_moe q4_0"
  "llama-70B|llama-dense|f32|--set n_layer=80 $e --set n_head=4 --set n_head_kv=2 --set n_ff=64|q2_k q3_k_s q3_k_m q4_k_m"
  "hf-mixtral-f16|mixtral-8x7b|f16|--set n_layer=2 $e --set n_head=8 --set n_head_kv=2 --set n_ff_exp=256|q4_k_m q3_k_m q6_k iq4_xs mxfp4_moe bf16"
  "hf-qwen3moe-f16|qwen3-30b-a3b|f16|--set n_layer=2 $e --set n_head=4 --set n_head_kv=1 --set n_ff_exp=256 $x2|q4_k_m q2_k f16"
)

vocab=$(model_synth --preset tiny --dtype f32) || { echo "FAIL: synth tiny"; exit 1; }

# "name dtype xxh3 offset bytes" per resident tensor, "L<layer>.<part>
# dtype" per expert part and "L<layer>.experts - xxh3,..." (the checksums
# of the layer's expert blobs), sorted
types() {
  jq -r '(.resident.tensors[] | "\(.name) \(.dtype) \(.xxh3) \(.offset) \(.bytes)"),
         (.experts.layers[]? as $l | ($l.parts | to_entries[] | "L\($l.layer).\(.key) \(.value.dtype)"),
          "L\($l.layer).experts - \($l.xxh3 | join(","))")' "$1/manifest.json" | sort
}

fail=0; pairs=0; compared=0; direct=0; planned=0; planned_direct=0
k=0
for entry in "${cases[@]}"; do
  IFS='|' read -r name preset dtype sets mixes <<<"$entry"
  [ "$mixes" = all ] && mixes=$all_mixes
  if [ "$tier" != full ] && [ "$name" != tiny ]; then
    j=0; sub=""
    for mix in $mixes; do [ $(((j + k) % 3)) -eq 0 ] && sub="$sub $mix"; j=$((j + 1)); done
    mixes=$sub
  fi
  k=$((k + 1))
  for mix in $mixes; do
    planned=$((planned + 1))
    if [ "$dtype" = f32 ] && in_list "$mix" "$synth_mixes" && { [ "$name" = tiny ] || [ "$mix" = q4_k_m ]; }; then
      planned_direct=$((planned_direct + 1))
    fi
  done
  x=$tmp/$name.gguf
  hf=()
  [ "${name#hf-}" != "$name" ] && hf=(--hf-out "$tmp/hf")
  rm -rf "$tmp/hf"
  # the Hugging Face directory comes with the GGUF: these are made here
  if [ ${#hf[@]} -gt 0 ]; then
    # shellcheck disable=SC2086  # $sets is a list of options
    $RKMOJO synth --preset "$preset" --dtype "$dtype" -o "$x" --quiet --vocab-from "$vocab" "${hf[@]}" $sets
  else
    # shellcheck disable=SC2086  # $sets is a list of options
    x=$(model_synth --preset "$preset" --dtype "$dtype" --vocab-from "$vocab" $sets)
  fi
  # shellcheck disable=SC2181  # the status of either
  if [ $? -ne 0 ]; then echo "FAIL $name: synth"; fail=1; continue; fi
  for mix in $mixes; do
    label="$name $mix"
    rm -rf "$tmp/A"
    if ! y=$(model_ref "$x" quantize "$mix" 2>"$tmp/ref.log"); then
      echo "FAIL $label: llama.cpp's quantizer failed:"; tail -n 3 "$tmp/ref.log"; fail=1; continue
    fi
    if ! $RKMOJO convert "$x" "$tmp/A" --quant "$mix" --quiet 2>"$tmp/a.err" ||
       ! B=$(model_convert "$y" --quant keep 2>"$tmp/b.err"); then
      echo "FAIL $label: convert:"; cat "$tmp/a.err" "$tmp/b.err" | tail -n 3; fail=1; continue
    fi
    n_expert=$(jq -r '.hparams.n_expert' "$tmp/A/manifest.json")
    # the exceptions: a tensor-name pattern and the type rkmojo must give it
    exc=()
    if [ "$mix" = q4_0 ]; then
      exc+=("^output\.weight q8_0")
      [ "$(jq -r '.hparams.tied_output' "$tmp/A/manifest.json")" = true ] && exc+=("^token_embd\.weight q4_0")
      [ "$n_expert" = 8 ] && exc+=("^blk\.[0-9]*\.attn_[kv]\.weight q4_0")
    fi
    skip="^$"
    for ex in "${exc[@]}"; do skip="$skip|${ex% *} "; done
    types "$tmp/A" >"$tmp/a.all"
    types "$B" >"$tmp/b.all"
    grep -Ev "$skip" "$tmp/a.all" >"$tmp/a.txt"
    grep -Ev "$skip" "$tmp/b.all" >"$tmp/b.txt"
    for ex in "${exc[@]}"; do
      pat=${ex% *}; want=${ex##* }
      got=$(grep -E "$pat " "$tmp/a.all" | awk '{print $2}' | sort -u | paste -sd, -)
      [ -z "$got" ] || [ "$got" = "$want" ] || { echo "FAIL $label: rkmojo's rule gives ${pat#^} $want, got $got"; fail=1; }
    done
    pairs=$((pairs + 1))
    # the same names, types and checksums (the offsets differ: llama.cpp
    # writes the tensors in its own order)
    if ! diff <(cut -d' ' -f1-3 "$tmp/a.txt") <(cut -d' ' -f1-3 "$tmp/b.txt") >"$tmp/diff.txt"; then
      echo "FAIL $label: rkmojo's types or bytes differ from llama.cpp's (< rkmojo, > llama.cpp):"
      grep '^[<>]' "$tmp/diff.txt" | cut -c1-100 | head -n 12
      fail=1; continue
    fi
    # and the bytes themselves: each resident tensor, every expert file
    bad=0 n_cmp=0
    while read -r nm offa len offb; do
      n_cmp=$((n_cmp + 1))
      cmp -s -n "$len" -i "$offa:$offb" "$tmp/A/resident.bin" "$B/resident.bin" || { echo "FAIL $label: bytes of $nm differ"; bad=1; }
    done < <(join <(awk 'NF == 5 {print $1, $4, $5}' "$tmp/a.txt") <(awk 'NF == 5 {print $1, $4}' "$tmp/b.txt"))
    [ $n_cmp -eq "$(awk 'NF == 5' "$tmp/a.txt" | wc -l)" ] || { echo "FAIL $label: $n_cmp resident tensors compared"; bad=1; }
    for f in "$tmp"/A/experts/*.bin; do
      [ -e "$f" ] || continue
      cmp -s "$f" "$B/experts/${f##*/}" || { echo "FAIL $label: ${f##*/} differs"; bad=1; }
    done
    [ $bad = 0 ] || { fail=1; continue; }
    if [ "$dtype" = f32 ] && in_list "$mix" "$synth_mixes" && { [ "$name" = tiny ] || [ "$mix" = q4_k_m ]; }; then
      d=$tmp/d.gguf
      rm -rf "$tmp/D" "$d"
      # shellcheck disable=SC2086  # $sets is a list of options
      if ! $RKMOJO synth --preset "$preset" --dtype "$mix" -o "$d" --quiet --vocab-from "$vocab" $sets ||
         ! $RKMOJO convert "$d" "$tmp/D" --quant keep --quiet 2>"$tmp/d.err"; then
        echo "FAIL $label: synth --dtype $mix, or its conversion:"; tail -n 3 "$tmp/d.err"; fail=1; continue
      fi
      if ! diff <(types "$tmp/A") <(types "$tmp/D") >"$tmp/diff.txt"; then
        echo "FAIL $label: synth --dtype $mix differs from convert --quant $mix (< convert, > synth):"
        grep '^[<>]' "$tmp/diff.txt" | cut -c1-100 | head -n 12
        fail=1; continue
      fi
      cmp -s "$tmp/A/resident.bin" "$tmp/D/resident.bin" || { echo "FAIL $label: synth's resident.bin differs"; bad=1; }
      for f in "$tmp"/A/experts/*.bin; do
        [ -e "$f" ] || continue
        cmp -s "$f" "$tmp/D/experts/${f##*/}" || { echo "FAIL $label: synth's ${f##*/} differs"; bad=1; }
      done
      if ! "$REF" "$LIB" "$d" meta >"$tmp/d.meta" 2>"$tmp/ref.err" || ! "$REF" "$LIB" "$y" meta >"$tmp/y.meta" 2>>"$tmp/ref.err"; then
        echo "FAIL $label: llama.cpp did not load synth's file:"; tail -n 3 "$tmp/ref.err"; bad=1
      elif ! diff <(sort "$tmp/y.meta") <(sort "$tmp/d.meta") >"$tmp/diff.txt"; then
        echo "FAIL $label: llama.cpp reads other metadata in synth's file (< its own quantization, > synth):"
        grep '^[<>]' "$tmp/diff.txt" | cut -c1-100 | head -n 6; bad=1
      elif ! "$REF" "$LIB" "$d" ids "$ids" 8 >"$tmp/d.ids" 2>"$tmp/ref.err" || ! "$REF" "$LIB" "$y" ids "$ids" 8 >"$tmp/y.ids" ||
           [ "$(wc -l <"$tmp/d.ids")" -ne 8 ] || ! cmp -s "$tmp/d.ids" "$tmp/y.ids"; then
        echo "FAIL $label: llama.cpp's greedy ids from synth's file differ from those of its own quantization"; bad=1
      fi
      [ $bad = 0 ] || { fail=1; continue; }
      direct=$((direct + 1))
      echo "ok   $label: synth --dtype $mix writes the same types and bytes; llama.cpp reads it as $(sed -n 's/^desc = .*B //p' "$tmp/d.meta"), with the metadata and greedy ids of its own quantization"
    fi
    if [ ${#hf[@]} -gt 0 ]; then
      rm -rf "$tmp/C"
      if ! $RKMOJO convert "$tmp/hf" "$tmp/C" --quant "$mix" --quiet 2>"$tmp/c.err"; then
        echo "FAIL $label: convert of the Hugging Face directory:"; tail -n 3 "$tmp/c.err"; fail=1; continue
      fi
      if ! diff <(cut -d' ' -f1-3 "$tmp/a.all") <(types "$tmp/C" | cut -d' ' -f1-3) >"$tmp/diff.txt"; then
        echo "FAIL $label: the Hugging Face directory converts otherwise than the GGUF (< GGUF, > HF):"
        grep '^[<>]' "$tmp/diff.txt" | cut -c1-100 | head -n 12
        fail=1; continue
      fi
    fi
    n=$(grep -cv ' - ' "$tmp/a.txt"); compared=$((compared + n))
    echo "ok   $label: $n tensors and expert parts, the same types and bytes$([ ${#exc[@]} -gt 0 ] && echo ", rkmojo's q4_0 rules aside")$([ ${#hf[@]} -gt 0 ] && echo "; from safetensors too")"
  done
  [ ${#hf[@]} -eq 0 ] || rm -f "$x"
done
echo "$pairs conversions compared, $compared tensors and expert parts; $direct mixes written by synth itself (tier $tier)"
[ $pairs -eq $planned ] || { echo "FAIL: $pairs of the $planned conversions planned compared"; fail=1; }
[ $direct -eq $planned_direct ] || { echo "FAIL: $direct of the $planned_direct mixes planned from synth compared"; fail=1; }
if [ "$tier" = full ]; then
  [ $pairs -ge 90 ] || { echo "FAIL: fewer than 90 conversions compared"; fail=1; }
  [ $direct -ge 20 ] || { echo "FAIL: fewer than 20 mixes written by synth compared"; fail=1; }
fi
exit $fail

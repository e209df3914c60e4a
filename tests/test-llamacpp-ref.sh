#!/usr/bin/env bash
# test-llamacpp-ref.sh - every `rkmojo synth` preset against llama.cpp
# itself: the prebuilt library of the npm package @node-llama-cpp/linux-x64
# (pinned in tests/js/package.json), driven by tests/ref/llama_cpp_ref.c
# with flash attention off, as the fixtures' goldens were made.
#
# Each preset, shrunk (2 layers, hidden 256, small FFNs, the tiny preset's
# 512-token vocabulary; the gemma4 one keeps 6 layers so that its global
# layer exists) and written as f32, q8_0 and q4_0 GGUF, must
#   - load in llama.cpp and decode 96 greedy steps: the metadata keys and
#     tensor shapes synth writes are the ones llama.cpp reads;
#   - agree teacher-forced as the mixes below do (at most one of the 96
#     positions apart outside output near-ties and router ties);
#   - give, converted (--quant keep) and run by rkmojo from the same prompt
#     ids, the same 48 greedy ids as llama.cpp up to the first step where the
#     two may part: an output near-tie (llama.cpp's top-1/top-2 logit gap
#     under 0.005 for f32, 0.05 for q8_0 and q4_0: two engines round 8-bit
#     activations and sum blocks in different orders), or a router tie: a
#     step that rkmojo's own analysis (`rkmojo perplexity --router-ties`,
#     on llama.cpp's greedy ids) shows a close routing decision can
#     change: forced, one at a time, to the runner-up expert at every
#     decision whose margin (k-th minus best left-out router probability)
#     is under 2e-3 in f32 files and 5e-3 in quantized ones
#     ($RKM_ROUTER_TIE_F32, $RKM_ROUTER_TIE_Q), a step whose top-1 changes
#     or whose top two come within the near-tie gap. Every family is gated
#     so, Gemma 4 included. The thresholds come from the two engines'
#     margins at the same positions (`llama-cpp-ref margins` against
#     `rkmojo perplexity --margins-out`): on the qwen3moe shape in f32 they
#     differ by 4e-6 on average and 7e-5 at most; on the Gemma 4 shapes,
#     whose peaked attention amplifies f16 KV rounding, by 8e-5 in f32 and
#     by 4e-4 (q8_0) to 3e-3 (the 4-bit mixes) on average, and decisions
#     with margins of 2e-3 to 5e-3 are seen to part the two there.
# Across the f32 runs, at least 150 steps must have been compared, so that
# near-ties cannot make the test vacuous.
# Then every preset in the mixes people download, written by llama.cpp's
# own quantizer from the f32 file (llama_model_quantize, its per-tensor
# rules, no importance matrix): Q4_K_M, Q5_K_M, Q6_K, Q3_K_M, Q2_K, IQ4_XS
# and MXFP4_MOE; and the MoE presets with their routed experts in
# each grid type (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S),
# written by ggml's quantizer with a uniform importance matrix (the
# harness's experts mode: llama.cpp's mixes of these need a real one).
# Each, converted with --quant keep (every tensor keeps its type: the
# native kernels run the file's own bytes), must
#   - agree teacher-forced: fed llama.cpp's 96 greedy ids, rkmojo's argmax
#     after each position (`rkmojo perplexity --router-ties`) equals
#     llama.cpp's next id at 95 of the 96 positions or more, a position
#     where llama.cpp's top two logits are within 0.05 (a near-tie, where
#     two engines' roundings may pick either) or a router tie (as above,
#     gap 0.05) counting as agreement; across all of them at least 97% of
#     the positions that are not router ties must agree outright;
#   - give the same greedy ids up to the first near-tie or router tie;
#   - give the same ids streamed through 10 expert-cache slots per layer
#     as resident (the MoE presets).
#   Positions set aside (output near-ties, router ties) are counted and
#   printed ("table" lines: steps compared and cut, per preset and type).
# An OLMoE layer at full width (8 experts of 2048 x 1024) in Q4_K_M must
# convert to within 2% of the GGUF's bytes (the small presets are mostly
# alignment padding).
# How much runs depends on RKM_TEST_TIER (tests/run.sh, tests/tiers):
#   quick  every preset in Q4_K_M only, the mix people download most (all
#          of the checks of a mix above, greedy and streamed included);
#   ci     (the default) the greedy and teacher-forced f32, q8_0 and
#          q4_0 runs of every preset, Q4_K_M for every preset, each other
#          mix for a third of the presets (mix j on preset i when
#          (i + j) % 3 == 0, so every mix and every preset are in it),
#          gpt-oss in MXFP4_MOE (its published type) too, the hybrid
#          entries but Qwen3.5-35B-A3B in f32 and Q4_K_M only,
#          each grid type for one of its two presets, and the width
#          check; the 128-expert gemma4-26b-a4b shape (about a minute of
#          router analysis a file) in f32 and Q4_K_M only;
#   full   every preset in every mix and both presets in every grid type.
# The models (synth, llama.cpp's quantizations and outputs, conversions)
# come from tests/common/models.sh, made once and shared.
# Skips (77) where the package or the harness is missing (non-x86-64).
set -u
cd "$(dirname "$0")/.."
. tests/common/llamacpp_ref.sh
. tests/common/models.sh
tier=${RKM_TEST_TIER:-ci}

N=48
T=96
ids=$(seq 3 7 150 | paste -sd, -) # 22 prompt ids, valid in every vocabulary
small="--set n_layer=2 --set n_embd=256"
presets=(
  "tiny|"
  "tiny-gemma4|"
  "olmoe-1b-7b|$small --set n_head=2 --set n_head_kv=2 --set n_ff_exp=128"
  "qwen3-30b-a3b|$small --set n_ff_exp=128"
  "gemma4-26b-a4b|--set n_layer=6 --set n_embd=256 --set n_ff_exp=128 --set n_ff=256"
  "mixtral-8x7b|$small --set n_ff_exp=128"
  "qwen2moe-a2.7b|$small --set n_head=2 --set n_head_kv=2 --set n_ff_exp=128 --set n_ff_shexp=256"
  "llama-dense|$small --set n_ff=256"
  "qwen3-dense|$small --set n_ff=256"
  "tiny-qwen3vl|$small --set n_ff=256 --set n_deepstack=1"
  "qwen3-vl-30b-a3b|$small --set n_ff_exp=128 --set n_deepstack=1"
  "qwen3-dense+yarn|$small --set n_ff=256 --set rope_scaling=yarn --set rope_freq_scale=0.25 --set rope_orig_ctx=64"
  "llama-dense+linear|$small --set n_ff=256 --set rope_scaling=linear --set rope_freq_scale=0.5"
  "gpt-oss-20b|$small --set n_head=8 --set n_head_kv=2 --set n_ff_exp=128 --set sliding_window=16"
  "glm-4.5-air|$small --set n_head=4 --set n_head_kv=2 --set n_ff_exp=128 --set n_ff_shexp=128 --set n_ff=256"
  "deepseek-v2-lite|$small --set n_head=4 --set kv_lora_rank=64 --set n_ff_exp=128 --set n_ff_shexp=256 --set n_ff=256"
  "deepseek-v3|$small --set n_head=4 --set kv_lora_rank=64 --set q_lora_rank=96 --set n_ff_exp=128 --set n_ff_shexp=128 --set n_ff=256 --set n_expert=32 --set n_layer_dense_lead=1"
  "qwen3.5-27b|--set n_layer=4 --set n_embd=256 --set n_head=4 --set n_head_kv=2 --set head_dim=64 --set head_dim_v=64 --set rope_dim=16 --set n_ff=256 --set ssm_d_state=32 --set ssm_n_group=2 --set ssm_dt_rank=6 --set ssm_d_inner=192"
  "qwen3-next-80b-a3b|--set n_layer=4 --set n_embd=256 --set n_head=4 --set n_head_kv=2 --set head_dim=64 --set head_dim_v=64 --set rope_dim=16 --set n_ff_exp=128 --set n_ff_shexp=128 --set n_expert=32 --set n_expert_used=4 --set ssm_d_state=32 --set ssm_n_group=2 --set ssm_dt_rank=6 --set ssm_d_inner=192"
  "qwen3-next-80b-a3b+fused|--set n_layer=4 --set n_embd=256 --set n_head=4 --set n_head_kv=2 --set head_dim=64 --set head_dim_v=64 --set rope_dim=16 --set n_ff_exp=128 --set n_ff_shexp=128 --set n_expert=32 --set n_expert_used=4 --set ssm_d_state=32 --set ssm_n_group=2 --set ssm_dt_rank=6 --set ssm_d_inner=192 --set ssm_fused_in=1"
  "lfm2-1.2b|--set n_layer=6 --set n_embd=256 --set n_head=4 --set n_head_kv=2 --set head_dim=64 --set head_dim_v=64 --set rope_dim=64 --set n_ff=256"
  "lfm2-8b-a1b|--set n_layer=4 --set n_embd=256 --set n_head=4 --set n_head_kv=2 --set head_dim=64 --set head_dim_v=64 --set rope_dim=64 --set n_ff=256 --set n_ff_exp=128 --set n_expert=16"
  "granite-4.0-h-tiny|--set n_layer=6 --set n_embd=256 --set n_head=4 --set n_head_kv=2 --set head_dim=64 --set head_dim_v=64 --set n_ff_exp=128 --set n_ff_shexp=128 --set n_expert=16 --set ssm_d_state=32 --set ssm_n_group=2 --set ssm_dt_rank=8 --set ssm_d_inner=512"
  "qwen3.5-35b-a3b|--set n_layer=4 --set n_embd=256 --set n_head=4 --set n_head_kv=2 --set head_dim=64 --set head_dim_v=64 --set rope_dim=16 --set n_ff_exp=128 --set n_ff_shexp=128 --set n_expert=16 --set ssm_d_state=32 --set ssm_n_group=2 --set ssm_dt_rank=4 --set ssm_d_inner=128"
)
# an entry NAME+VARIANT is preset NAME with the variant's options (RoPE
# scaling: YaRN with its ramp over the first pairs, linear)
# RKM_REF_PRESETS="p1 p2": only these presets (a partial run; the floors
# below still apply)
if [ -n "${RKM_REF_PRESETS:-}" ]; then
  keep=()
  for e in "${presets[@]}"; do case " $RKM_REF_PRESETS " in *" ${e%%|*} "*) keep+=("$e") ;; esac; done
  presets=("${keep[@]}")
fi
fail=0
f32_steps=0
# light PRESET: outside the full tier, only f32 and Q4_K_M for the hybrid
# entries but Qwen3.5-35B-A3B, which runs in every type (to keep CI under
# its time: the others' recurrent layers share its code paths or are
# exact in f32)
light() {
  [ "$tier" != full ] && case $1 in
    qwen3.5-27b | qwen3-next-80b-a3b | qwen3-next-80b-a3b+fused | lfm2-1.2b | lfm2-8b-a1b | granite-4.0-h-tiny) true ;;
    *) false ;;
  esac
}
# a router decision closer than this (probability) is flipped in rkmojo's
# analysis (rkmojo perplexity --router-ties): f32 files, quantized files
RT_F32=${RKM_ROUTER_TIE_F32:-2e-3}
RT_Q=${RKM_ROUTER_TIE_Q:-5e-3}
# greedy_cmp REF OUR TIES TIE: the first greedy step where llama.cpp's top
# two logits are within TIE ("tie"), where a flip of a close router
# decision changes rkmojo's top-1 or brings its top two within TIE
# ("router"), or where the ids differ ("diff"): "STEP KIND REF GAP OURS"
greedy_cmp() {
  paste -d' ' "$1" "$2" "$3" | awk -v tie="$4" '
    { if ($3 < tie) { print NR - 1, "tie", $1, $3, $4; exit }
      if ($9 == "router") { print NR - 1, "router", $1, $3, $4; exit }
      if ($1 != $4) { print NR - 1, "diff", $1, $3, $4; exit } }'
}
# forced_cmp TIES REF TIE: over the teacher-forced positions (rkmojo's
# router-ties lines beside llama.cpp's ids), "AGREE CUT_OUT CUT_ROUTER HARD
# N_FREE AGREE_FREE": the positions that agree, those set aside as output
# near-ties (llama.cpp's top two logits within TIE) and, of the others,
# as router ties, those apart outside both; and the positions that are
# not router ties with how many of them agree
forced_cmp() {
  paste -d' ' "$1" "$2" | awk -v tie="$3" '
    $1 == $6 {a++}
    $5 != "router" {nf++; if ($1 == $6) af++}
    $8 < tie {o++; next}
    $5 == "router" {r++; next}
    $1 != $6 {h++}
    END {print a + 0, o + 0, r + 0, h + 0, nf + 0, af + 0}'
}
# router_ties MODEL IDS NP STEPS TIE OUT RT: rkmojo's router-tie analysis
# of the forced ids, the STEPS lines from the prompt's last position on
router_ties() {
  $RKMOJO perplexity -m "$1" --ids "$2" --router-ties "$7" --tie-gap "$5" -q 2>>"$tmp/our.err" >"$tmp/ties.all" &&
    tail -n +"$3" "$tmp/ties.all" | head -n "$4" >"$6"
}
np=$(echo "$ids" | tr , '\n' | wc -l)
# one 512-token vocabulary for all (the presets' own are up to 262,144
# tokens, which would make this test mostly embedding tables)
vocab=$(model_synth --preset tiny --dtype f32) || { echo "FAIL: synth tiny"; exit 1; }
greedy_types="f32 q8_0 q4_0"
[ "$tier" = quick ] && greedy_types=
for dt in $greedy_types; do
  tie=0.005
  [ $dt = f32 ] || tie=0.05
  for entry in "${presets[@]}"; do
    p=${entry%%|*}
    sets=${entry#*|}
    name="$p $dt"
    # the 128-expert shape's router analysis takes a minute a file (500
    # close decisions): outside the full tier, f32 only here
    [ "$tier" != full ] && [ "$p" = gemma4-26b-a4b ] && [ $dt != f32 ] && continue
    light "$p" && [ $dt != f32 ] && continue
    # shellcheck disable=SC2086  # $sets is a list of options
    if ! g=$(model_synth --preset "${p%%+*}" --dtype $dt --vocab-from "$vocab" $sets); then
      echo "FAIL $name: synth"; fail=1; continue
    fi
    if ! r=$(model_ref_out "$g" ids "$ids" $T 2>"$tmp/ref.err") || [ "$(wc -l <"$r")" -ne $T ]; then
      echo "FAIL $name: llama.cpp did not load or run it:"; tail -n 3 "$tmp/ref.err"; fail=1; continue
    fi
    cp "$r" "$tmp/ref96.txt"
    head -n $N "$r" >"$tmp/ref.txt"
    forced=$ids,$(head -n $((T - 1)) "$r" | cut -d' ' -f1 | paste -sd, -)
    if ! m=$(model_convert "$g" --quant keep 2>"$tmp/our.err") ||
       ! $RKMOJO run -m "$m" --prompt-ids "$ids" --print-ids --temp 0 -n $N -q >"$tmp/our.txt" 2>"$tmp/our.err" ||
       ! router_ties "$m" "$forced" "$np" $T $tie "$tmp/ties96.txt" "$([ $dt = f32 ] && echo "$RT_F32" || echo "$RT_Q")"; then
      echo "FAIL $name: rkmojo could not convert or run it:"; tail -n 3 "$tmp/our.err"; fail=1; continue
    fi
    head -n $N "$tmp/ties96.txt" >"$tmp/ties.txt"
    # teacher-forced over llama.cpp's 96 ids: positions set aside (output
    # near-ties under $tie, router ties) and those apart outside them
    read -r agree cut_out cut_router hard _ <<<"$(forced_cmp "$tmp/ties96.txt" "$tmp/ref96.txt" $tie)"
    echo "table forced $p $dt $T agree=$agree cut_output=$cut_out cut_router=$cut_router apart=$hard"
    if [ "$hard" -gt $((T - 95)) ]; then
      echo "FAIL $name: teacher-forced $agree/$T, set aside $cut_out output ties and $cut_router router ties, $hard apart outside them"
      fail=1
    fi
    # compared steps, and the first disagreement outside a near-tie
    res=$(greedy_cmp "$tmp/ref.txt" "$tmp/our.txt" "$tmp/ties.txt" $tie)
    read -r at kind rid gap oid <<<"${res:-$N end - - -}"
    [ "$(wc -l <"$tmp/our.txt")" -eq $N ] || { kind=short; }
    case $kind in
      end)  echo "ok   $name: $N of $N greedy ids equal" ;;
      tie)  echo "ok   $name: ids equal up to step $at, a near-tie (logit gap $gap) from which the two may part" ;;
      router) echo "ok   $name: ids equal up to step $at, a router tie (a flipped close decision changes it)" ;;
      short) echo "FAIL $name: rkmojo printed $(wc -l <"$tmp/our.txt") ids, not $N"; fail=1 ;;
      diff) echo "FAIL $name: at step $at llama.cpp has $rid (logit gap $gap), rkmojo $oid"; fail=1 ;;
    esac
    echo "table greedy $p $dt $N compared=$at cut=$kind"
    [ $dt = f32 ] && [ "$kind" != short ] && f32_steps=$((f32_steps + at))
  done
done
if [ -n "$greedy_types" ]; then
  echo "f32: $f32_steps greedy steps compared"
  if [ $f32_steps -lt 150 ]; then echo "FAIL: fewer than 150 f32 steps compared"; fail=1; fi
fi

# check_mix PRESET F32.gguf MIX: the agreement checks above, one mix
check_mix() {
  local p=$1 g32=$2 mix=$3 name g m r forced agree hard cut_out cut_router res at kind msg n_free agree_free
  name="$p $mix"
  # llama.cpp's mix, or (experts-TYPE) the routed experts in a grid type
  if [ "${mix#experts-}" != "$mix" ]; then g=$(model_ref "$g32" experts "${mix#experts-}" 2>"$tmp/ref.err")
  else g=$(model_ref "$g32" quantize "$mix" 2>"$tmp/ref.err"); fi
  # shellcheck disable=SC2181  # the assignment's status
  if [ $? -ne 0 ] || ! r=$(model_ref_out "$g" ids "$ids" $T 2>>"$tmp/ref.err") || [ "$(wc -l <"$r")" -ne $T ]; then
    echo "FAIL $name: llama.cpp could not quantize or run it:"; tail -n 3 "$tmp/ref.err"; fail=1; return
  fi
  cp "$r" "$tmp/ref.txt"
  forced=$ids,$(head -n $((T - 1)) "$tmp/ref.txt" | cut -d' ' -f1 | paste -sd, -)
  if ! m=$(model_convert "$g" --quant keep 2>"$tmp/our.err") ||
     ! $RKMOJO run -m "$m" --prompt-ids "$ids" --print-ids --temp 0 -n $N -q >"$tmp/our.txt" 2>"$tmp/our.err" ||
     ! router_ties "$m" "$forced" "$np" $T 0.05 "$tmp/top1.txt" "$RT_Q"; then
    echo "FAIL $name: rkmojo could not convert or run it:"; tail -n 3 "$tmp/our.err"; fail=1; return
  fi
  # streamed through a small expert cache (reads, checksums, slots):
  # the kernels are the same, so the ids must be too
  if [ -d "$m/experts" ] && ls "$m/experts"/*.bin >/dev/null 2>&1; then
    if ! $RKMOJO run -m "$m" --prompt-ids "$ids" --print-ids --temp 0 -n $N -q --expert-cache-slots 10 \
         >"$tmp/streamed.txt" 2>>"$tmp/our.err" || ! cmp -s "$tmp/our.txt" "$tmp/streamed.txt"; then
      echo "FAIL $name: streamed through 10 cache slots, the ids differ from the resident run"; tail -n 3 "$tmp/our.err"; fail=1
    fi
  fi
  # output near-ties within 0.05, as for q8_0 and q4_0 above
  read -r agree cut_out cut_router hard n_free agree_free <<<"$(forced_cmp "$tmp/top1.txt" "$tmp/ref.txt" 0.05)"
  res=$(greedy_cmp <(head -n $N "$tmp/ref.txt") "$tmp/our.txt" <(head -n $N "$tmp/top1.txt") 0.05)
  read -r at kind _ <<<"${res:-$N end}"
  msg="teacher-forced $agree/$T, set aside $cut_out output ties and $cut_router router ties, $hard apart outside them; greedy ids equal to step $at ($kind)"
  if [ "$hard" -gt $((T - 95)) ] || [ "$kind" = diff ]; then
    echo "FAIL $name: $msg"; fail=1
  else
    echo "ok   $name: $msg"
  fi
  echo "table forced $p $mix $T agree=$agree cut_output=$cut_out cut_router=$cut_router apart=$hard"
  mix_agree=$((mix_agree + agree_free)); mix_total=$((mix_total + n_free))
}

mixes=(q4_k_m q5_k_m q6_k q3_k_m q2_k iq4_xs mxfp4_moe)
mix_agree=0; mix_total=0
i=0
for entry in "${presets[@]}"; do
  p=${entry%%|*}
  sets=${entry#*|}
  # shellcheck disable=SC2086  # $sets is a list of options
  if ! g32=$(model_synth --preset "${p%%+*}" --dtype f32 --vocab-from "$vocab" $sets); then
    echo "FAIL $p: synth"; fail=1; continue
  fi
  for j in "${!mixes[@]}"; do
    case $tier in
      quick) [ "$j" -eq 0 ] || continue ;;
      ci) [ "$j" -eq 0 ] || { [ $(((i + j) % 3)) -eq 0 ] && [ "$p" != gemma4-26b-a4b ] && ! light "$p"; } ||
          { [ "${p%%+*}" = gpt-oss-20b ] && [ "${mixes[$j]}" = mxfp4_moe ]; } || continue ;;
    esac
    check_mix "$p" "$g32" "${mixes[$j]}"
  done
  i=$((i + 1))
done
# the grid types, as the low-bit mixes people download put them in the
# routed experts (expert rows of 256 so that the down projection has them
# too; at most 16 experts, as ggml's grid searches take a second or more
# per million weights)
grids=(iq1_s iq1_m iq2_xxs iq2_xs iq2_s iq3_xxs iq3_s)
[ "$tier" = quick ] && grids=()
i=0
for p in qwen3-30b-a3b mixtral-8x7b; do
  [ ${#grids[@]} -gt 0 ] || break
  printf '%s\n' "${presets[@]}" | grep -q "^$p|" || continue
  sets=$(printf '%s\n' "${presets[@]}" | sed -n "s/^$p|//p")
  # shellcheck disable=SC2086  # $sets is a list of options
  if ! g32=$(model_synth --preset "$p" --dtype f32 --vocab-from "$vocab" $sets --set n_ff_exp=256 --set n_expert=$([ $p = mixtral-8x7b ] && echo 8 || echo 16)); then
    echo "FAIL $p: synth"; fail=1; continue
  fi
  for j in "${!grids[@]}"; do
    [ "$tier" = full ] || [ $(((i + j) % 2)) -eq 0 ] || continue
    check_mix "$p" "$g32" "experts-${grids[$j]}"
  done
  i=$((i + 1))
done
echo "mixes: $mix_agree of $mix_total teacher-forced positions outside router ties agree outright"
if [ $((mix_agree * 100)) -lt $((mix_total * 97)) ]; then echo "FAIL: under 97%"; fail=1; fi

# size: one OLMoE layer at full width, Q4_K_M, converted
if [ "$tier" = quick ]; then
  :
elif g32=$(model_synth --preset olmoe-1b-7b --dtype f32 --vocab-from "$vocab" \
     --set n_layer=1 --set n_expert=8 --set n_expert_used=2) &&
   g=$(model_ref "$g32" quantize q4_k_m 2>"$tmp/ref.err") &&
   m=$(model_convert "$g" --quant keep); then
  ours=$(du -sb --apparent-size "$m" | cut -f1); theirs=$(stat -c %s "$g")
  size=$(awk -v a="$ours" -v b="$theirs" 'BEGIN {printf "%.4f", a / b}')
  if awk -v r="$size" 'BEGIN {exit !(r <= 1.02)}'; then echo "ok   olmoe layer q4_k_m: $ours bytes, $size x the GGUF's $theirs"
  else echo "FAIL olmoe layer q4_k_m: $ours bytes, $size x the GGUF's $theirs"; fail=1; fi
else
  echo "FAIL olmoe layer q4_k_m: could not make or convert it"; tail -n 3 "$tmp/ref.err"; fail=1
fi
[ $fail -eq 0 ] && echo "PASS"
exit $fail

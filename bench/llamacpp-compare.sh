#!/usr/bin/env bash
# llamacpp-compare.sh - llama.cpp and rkmojo on the same weights, the same
# threads and the same hour: pp (one batch of N_PROMPT random ids) and tg
# (N_GEN greedy steps from an empty context, as llama-bench's tg; rkmojo
# `bench --depth 0`), alternating ROUNDS times so that the host's drift
# hits both alike.
#
#   bench/llamacpp-compare.sh MODEL.gguf MODEL.rkmojo [ROUNDS] [THREADS] [N_PROMPT] [N_GEN]
#
# llama.cpp is the prebuilt library of tests/js's @node-llama-cpp/linux-x64
# (x86-64; run scripts/setup.sh), or LLAMA_LIB=DIR: a folder with
# libggml.v0.5.0.so and libllama.v0.5.0.so (e.g. symlinks to a build of
# the same llama.cpp release from source, for this CPU: bench/README.md),
# driven by build/tests/llama-cpp-ref in
# its bench mode: per round one process, a warm-up rep (page faults,
# weight repacking) and REPS timed reps on fresh contexts, flash attention
# off. rkmojo: `rkmojo bench --warm --depth 0 -r REPS`. Each prints its
# per-rep figures; the last lines are the medians over all rounds.
set -euo pipefail
cd "$(dirname "$0")/.."
GGUF=${1:?usage: bench/llamacpp-compare.sh MODEL.gguf MODEL.rkmojo [ROUNDS] [THREADS] [N_PROMPT] [N_GEN]}
RKM=${2:?MODEL.rkmojo}
ROUNDS=${3:-3}
T=${4:-2}
NP=${5:-128}
NG=${6:-128}
REPS=3
LIB=${LLAMA_LIB:-tests/js/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64}
[ -f "$LIB/libllama.v0.5.0.so" ] || { echo "llama.cpp's library is missing in $LIB: run scripts/setup.sh (x86-64 only) or set LLAMA_LIB"; exit 1; }
echo "llama.cpp: $LIB"
[ -x build/tests/llama-cpp-ref ] && [ -x build/rkmojo ] || make -j"$(nproc)" build/rkmojo build/tests/llama-cpp-ref
lpp=(); ltg=(); rpp=(); rtg=()
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
for r in $(seq "$ROUNDS"); do
  echo "round $r, $(date -u +%H:%M:%S) UTC"
  out=$(build/tests/llama-cpp-ref "$LIB" "$GGUF" bench "$NP" "$NG" $((REPS + 1)) "$T")
  echo "$out" | tail -n "$REPS" | sed 's/^/  /'
  while read -r pp tg; do lpp+=("$pp"); ltg+=("$tg"); done < <(echo "$out" | tail -n "$REPS" |
    sed -E 's/.*pp[0-9]+ ([0-9.]+) tok\/s, tg[0-9]+ ([0-9.]+) tok\/s.*/\1 \2/')
  out=$(build/rkmojo bench -m "$RKM" --prompt-tokens "$NP" -n "$NG" -t "$T" --warm --depth 0 -r "$REPS" 2>&1)
  p=$(echo "$out" | sed -nE 's/^prefill tok\/s over [0-9]+ runs:.*\((.*)\)$/\1/p')
  d=$(echo "$out" | sed -nE 's/^decode tok\/s over [0-9]+ runs:.*\((.*)\)$/\1/p')
  echo "  rkmojo: pp$NP $p tok/s, tg$NG $d tok/s ($T threads)"
  # shellcheck disable=SC2206  # the runs' figures, space-separated
  rpp+=($p); rtg+=($d)
done
echo "median over $((ROUNDS * REPS)) reps each: llama.cpp pp$NP $(median "${lpp[@]}") tg$NG $(median "${ltg[@]}");" \
     "rkmojo pp$NP $(median "${rpp[@]}") tg$NG $(median "${rtg[@]}") tok/s"

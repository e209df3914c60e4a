#!/usr/bin/env bash
# test-bench.sh - `rkmojo bench` as a user runs it on a small synthetic
# model: the text and JSON reports carry every streaming figure (tok/s,
# hit rate, bytes and IO wait per token, peak RSS), a budget
# is honoured (peak RSS under it, fewer slots than experts) and planned for
# the --ctx given, --limits
# prints the probed memory/disk bandwidths and the decode bound they set,
# --repeat reports every run and their spread, --limits reads the same
# weights alone after each run (the weights pass), --parallel decodes
# several sequences together, and bad options fail with a message.
set -u
B=${RKM_BUILD:-build}
R="${RKM_RUNNER:-} $B/rkmojo"
T=$(mktemp -d -p "${TMPDIR:-/var/tmp}")
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }
num() { grep -o "\"$1\":[[:space:]]*[-0-9.e+]*" "$2" | head -1 | sed 's/.*:[[:space:]]*//'; }
gt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a > b) }'; }

$R synth --preset tiny -o "$T/a.gguf" --seed 3 --quiet && $R convert "$T/a.gguf" "$T/m" --quant q8_0 --quiet \
  || { echo "FAIL: synth/convert"; exit 1; }

# text report with a budget that holds only part of the experts
if $R bench -m "$T/m" --expert-cache-slots 3 --prompt-tokens 12 -n 6 -t 2 --limits > "$T/out.txt" 2> "$T/err.txt"; then
  grep -Eq '^prefill +12 tok .* tok/s .* hit .* read .* IO wait' "$T/out.txt" && ok "prefill line" || fail "prefill line: $(cat "$T/out.txt")"
  grep -Eq '^decode +6 tok .* tok/s' "$T/out.txt" && ok "decode line" || fail "decode line"
  grep -q 'expert cache: 3 of 8 slots per layer' "$T/out.txt" && ok "slots honoured" || fail "slots: $(head -3 "$T/out.txt")"
  grep -Eq '^limits: memory [0-9.]+ GB/s' "$T/out.txt" && ok "--limits probes memory" || fail "limits line: $(grep limits "$T/out.txt")"
  grep -Eq '^limits: decode at most [0-9.]+ tok/s' "$T/out.txt" && ok "--limits prints the bound" || fail "bound line"
else
  fail "bench with 3 slots: $(cat "$T/err.txt")"
fi

# JSON report under a memory budget
if $R bench -m "$T/m" --mem-budget 96M --prompt-tokens 8 -n 4 -t 2 --limits --json > "$T/o.json" 2> "$T/err.txt"; then
  rss=$(num peak_rss_bytes "$T/o.json"); budget=$(num mem_budget_bytes "$T/o.json")
  [ -n "$rss" ] && gt "$rss" 0 && ! gt "$rss" "$budget" && ok "peak RSS $rss <= budget $budget" || fail "RSS $rss budget $budget"
  for k in tok_s hit_rate bytes_per_token io_wait_ms_per_token read_mb_s ttft_s mem_read_gb_s weight_bytes_per_token \
           decode_tok_s_overlapped decode_tok_s_serial; do
    v=$(num "$k" "$T/o.json")
    [ -n "$v" ] && ok "json has $k ($v)" || fail "json lacks $k"
  done
  gt "$(num mem_read_gb_s "$T/o.json")" 0.1 && ok "memory probe measured" || fail "memory probe"
  # the weight bytes a token reads: at least the routed experts' share
  gt "$(num weight_bytes_per_token "$T/o.json")" 10000 && ok "weight bytes per token" || fail "weight bytes per token"
  # serial bound never above the overlapped one
  ! gt "$(num decode_tok_s_serial "$T/o.json")" "$(num decode_tok_s_overlapped "$T/o.json")" && ok "serial <= overlapped" \
    || fail "serial bound above overlapped"
else
  fail "bench --json: $(cat "$T/err.txt")"
fi

# --warm: the prompt ran once before, so the timed prefill finds every
# expert it needs in the (fully resident) cache
if $R bench -m "$T/m" --prompt-tokens 8 -n 2 -t 2 --warm --json > "$T/w.json" 2> "$T/err.txt"; then
  grep -q '"warm":[[:space:]]*true' "$T/w.json" && ok "json says warm" || fail "no warm flag"
  [ "$(num hit_rate "$T/w.json")" = 1 ] && ok "warm prefill hits every expert" \
    || fail "warm prefill hit rate $(num hit_rate "$T/w.json")"
else
  fail "bench --warm: $(cat "$T/err.txt")"
fi

# --warm also waits for the background read of every expert (no budget:
# all resident), so decode reads nothing, whatever it routes to
if $R bench -m "$T/m" --prompt-tokens 2 -n 12 -t 2 --warm > "$T/out.txt" 2> "$T/err.txt"; then
  grep -Eq '^decode +12 tok .* hit 100.0% +read 0 B' "$T/out.txt" && ok "warm decode reads nothing (filled)" \
    || fail "warm decode: $(grep '^decode' "$T/out.txt")"
else
  fail "bench --warm: $(cat "$T/err.txt")"
fi
$R bench -m "$T/m" --prompt-tokens 4 -n 2 -t 2 --lazy-experts > /dev/null 2> "$T/err.txt" && ok "--lazy-experts accepted" \
  || fail "--lazy-experts: $(cat "$T/err.txt")"
# --depth: decode from the prompt's first N tokens (0: an empty context)
for d in 0 3; do
  if $R bench -m "$T/m" --prompt-tokens 8 -n 2 -t 2 --depth $d --json > "$T/d.json" 2> "$T/err.txt"; then
    [ "$(num decode_depth "$T/d.json")" = $d ] && ok "--depth $d" || fail "--depth $d: $(num decode_depth "$T/d.json")"
  else
    fail "bench --depth $d: $(cat "$T/err.txt")"
  fi
done
[ "$($R bench -m "$T/m" --prompt-tokens 8 -n 2 -t 2 --json | grep -o '"decode_depth":[^,]*' | tr -dc 0-9)" = 8 ] \
  && ok "decode follows the whole prompt by default" || fail "default decode depth"
$R bench -m "$T/m" --depth -2 > /dev/null 2>&1 && fail "--depth -2 accepted" || ok "--depth -2 refused"

# --cache-scope: one pool of slots for every MoE layer by default
for sc in shared layer; do
  if $R bench -m "$T/m" --expert-cache-slots 3 --cache-scope $sc --prompt-tokens 4 -n 2 -t 2 --json > "$T/c.json" 2> "$T/err.txt"; then
    grep -q "\"cache_scope\":[[:space:]]*\"$sc\"" "$T/c.json" && ok "--cache-scope $sc" || fail "--cache-scope $sc: $(grep cache_scope "$T/c.json")"
  else
    fail "bench --cache-scope $sc: $(cat "$T/err.txt")"
  fi
done
# the default pools from 4 x top-k slots per layer (top-2 here: from 8 = all experts,
# which needs no cache: so 3 and 7 slots stay per layer)
for n in 3 7; do
  $R bench -m "$T/m" --expert-cache-slots $n --prompt-tokens 4 -n 2 -t 2 --json 2> /dev/null \
    | grep -q '"cache_scope":[[:space:]]*"layer"' && ok "$n slots: per layer by default" || fail "$n slots: default scope"
done
$R bench -m "$T/m" --cache-scope global > /dev/null 2> "$T/err.txt" && fail "bad scope accepted" \
  || { grep -q "layer|shared" "$T/err.txt" && ok "bad scope refused" || fail "scope message: $(cat "$T/err.txt")"; }

# --prefetch on: the layer-ahead hints scored (named / requested), in text
# and JSON, and in the trace's prediction records that trace-sim scores
if $R bench -m "$T/m" --expert-cache-slots 3 --prefetch on --prompt-tokens 4 -n 6 -t 2 --per-layer --json \
    > "$T/p.json" 2> "$T/err.txt"; then
  [ "$(jq '.decode_prediction | (.requested > 0 and .named <= .requested and .accuracy == .named / .requested
        and (.layers | length) > 0)' "$T/p.json")" = true ] \
    && ok "prefetch accuracy in JSON" || fail "prediction: $(jq -c '.decode_prediction' "$T/p.json")"
else
  fail "bench --prefetch on: $(cat "$T/err.txt")"
fi
$R bench -m "$T/m" --expert-cache-slots 3 --prompt-tokens 4 -n 6 -t 2 --json 2> /dev/null \
  | jq -e 'has("decode_prediction") | not' > /dev/null && ok "no prediction without prefetch" || fail "prediction without prefetch"
if $R run -m "$T/m" --expert-cache-slots 3 --prefetch on -n 6 --temp 0 --trace-out "$T/tr.bin" -p "hello there" \
    > /dev/null 2> "$T/err.txt"; then
  $R trace-sim "$T/tr.bin" --json > "$T/ts.json" 2> "$T/err.txt" || fail "trace-sim: $(cat "$T/err.txt")"
  [ "$(jq '.prediction | (.hints > 0 and .requested > 0 and .named <= .requested and (.layers | length) > 0)' "$T/ts.json")" = true ] \
    && ok "trace-sim scores the trace's hints" || fail "trace-sim prediction: $(jq -c '.prediction' "$T/ts.json")"
  $R trace-sim "$T/tr.bin" | grep -q "prediction a layer ahead: .* named .*% of the" && ok "trace-sim prediction line" \
    || fail "trace-sim text: $($R trace-sim "$T/tr.bin" | tail -2)"
else
  fail "run --trace-out: $(cat "$T/err.txt")"
fi

# rkmojo plan: the memory plan bench runs with, bytes per token from the
# hit rate, the hit rate of a recorded trace as trace-sim replays it, the
# device profiles and "this" machine measured, and bad input refused
$R plan --devices > "$T/dev.txt" 2> "$T/err.txt" && grep -q '^rk3588-nvme ' "$T/dev.txt" && grep -q '^rk3576-emmc ' "$T/dev.txt" \
  && ok "plan --devices lists the boards" || fail "plan --devices: $(cat "$T/dev.txt" "$T/err.txt")"
# (at 64 tokens of context 49.4 MiB hold 2 of the 8 slots per layer, 112
# KiB each: 49.8 MiB 5)
if $R plan -m "$T/m" --device rk3588-nvme --mem-budget 49.8M --ctx 64 --json > "$T/pl.json" 2> "$T/err.txt" \
    && $R bench -m "$T/m" --mem-budget 49.8M --ctx 64 --prompt-tokens 4 -n 2 -t 2 --json > "$T/b.json" 2>> "$T/err.txt"; then
  [ "$(jq .slots_per_layer "$T/pl.json")" = "$(jq .slots_per_layer "$T/b.json")" ] \
    && ok "plan's slots are the ones bench runs with ($(jq .slots_per_layer "$T/pl.json"))" \
    || fail "plan slots $(jq .slots_per_layer "$T/pl.json"), bench $(jq .slots_per_layer "$T/b.json")"
  [ "$(jq '.slots_per_layer < .n_expert and .budget_bytes == (49.8 * 1048576 | floor) and .device.name == "rk3588-nvme" and .device.disk_read_mb_s == 2000' "$T/pl.json")" = true ] \
    && ok "plan takes the budget and the profile" || fail "plan json: $(jq -c . "$T/pl.json")"
  [ "$(jq '.hit_rate_from | test("uniform")' "$T/pl.json")" = true ] \
    && [ "$(jq '(.hit_rate * .n_expert - .slots_per_layer) | fabs < 1e-9' "$T/pl.json")" = true ] \
    && ok "without a trace: the uniform floor, slots / experts" || fail "floor: $(jq -c '[.hit_rate, .slots_per_layer]' "$T/pl.json")"
  # the token's memory bytes are those bench --limits counts
  $R bench -m "$T/m" --prompt-tokens 4 -n 2 -t 2 --limits --json > "$T/bl.json" 2> /dev/null
  [ "$(jq .mem_bytes_per_token "$T/pl.json")" = "$(jq .limits.weight_bytes_per_token "$T/bl.json")" ] \
    && ok "memory bytes per token as bench --limits counts them" \
    || fail "bytes per token: plan $(jq .mem_bytes_per_token "$T/pl.json"), bench $(jq .limits.weight_bytes_per_token "$T/bl.json")"
else
  fail "plan/bench at 49.8M: $(cat "$T/err.txt")"
fi
h0=$($R plan -m "$T/m" --device rk3588-sd --mem-budget 49.8M --ctx 64 --hit-rate 0 --json 2> /dev/null)
h50=$($R plan -m "$T/m" --device rk3588-sd --mem-budget 49.8M --ctx 64 --hit-rate 50 --json 2> /dev/null)
h100=$($R plan -m "$T/m" --device rk3588-sd --mem-budget 49.8M --ctx 64 --hit-rate 100 --json 2> /dev/null)
[ "$(jq -n --argjson a "$h0" --argjson b "$h50" --argjson c "$h100" '$a.disk_bytes_per_token > 0
    and ($b.disk_bytes_per_token * 2 - $a.disk_bytes_per_token | fabs) < 1 and $c.disk_bytes_per_token == 0
    and $a.decode_tok_s_serial < $b.decode_tok_s_serial and $c.decode_tok_s_serial == $c.decode_tok_s_overlapped
    and $a.decode_tok_s_serial <= $a.decode_tok_s_overlapped')" = true ] \
  && ok "disk bytes and speed follow the hit rate" || fail "hit-rate sweep: $h0 $h50 $h100"
if [ -f "$T/tr.bin" ]; then
  # at a budget that holds part of the experts, the trace's LFU rate is
  # trace-sim's at the plan's slots and scope
  for b in 49.8M 50M 51M 52M; do
    $R plan -m "$T/m" --device rk3588-nvme --mem-budget $b --ctx 64 --trace "$T/tr.bin" --json > "$T/pt.json" 2> "$T/err.txt" \
      && [ "$(jq '.slots_per_layer < .n_expert' "$T/pt.json")" = true ] && break
  done
  s=$(jq .slots_per_layer "$T/pt.json"); g=$([ "$(jq -r .cache_scope "$T/pt.json")" = shared ] && echo --global)
  # plan predicts decode: the decoded tokens' requests' rate
  want=$($R trace-sim "$T/tr.bin" --slots "$s" $g --json | jq '.results[0].lfu.decode_hit_rate // .results[0].lfu.hit_rate')
  [ "$(jq --argjson w "$want" '.hit_rate_from == "trace, LFU" and .slots_per_layer < .n_expert
        and (.hit_rate - $w | fabs) < 1e-9' "$T/pt.json")" = true ] \
    && ok "plan --trace at $b: trace-sim's LFU decode hit rate at $s slots ($want)" || fail "plan --trace: $(jq -c . "$T/pt.json") want $want"
  $R synth --preset tiny-gemma4 -o "$T/o.gguf" --seed 3 --quiet 2> /dev/null && $R convert "$T/o.gguf" "$T/o" --quiet 2> /dev/null \
    && { $R plan -m "$T/o" --device rk3588-nvme --mem-budget 64M --trace "$T/tr.bin" > /dev/null 2> "$T/err.txt" \
           && fail "a trace of another model accepted" \
           || { grep -q "was recorded on" "$T/err.txt" && ok "a trace of another model refused" || fail "trace message: $(cat "$T/err.txt")"; }; }
fi
if $R plan -m "$T/m" --json > "$T/this.json" 2> "$T/err.txt"; then
  [ "$(jq '.device.name == "this" and .device.mem_read_gb_s > 0 and .device.disk_read_mb_s > 0 and .device.mem_bytes > 0' "$T/this.json")" = true ] \
    && ok "plan on this machine measures it" || fail "this: $(jq -c .device "$T/this.json")"
  # the prediction: the token's matmuls at the kernel rates measured here,
  # then the misses at the disk's rate and their checksums at the hash's
  [ "$(jq '.compute_s_per_token > 0 and .decode_tok_s_predicted > 0
        and .device.checksum_gb_s > 0
        and (.checksum_s_per_token - .disk_bytes_per_token / (.device.checksum_gb_s * 1e9) | fabs) < 1e-12
        and (1 / (.compute_s_per_token + .disk_bytes_per_token / (.device.disk_read_mb_s * 1e6) + .checksum_s_per_token)
             - .decode_tok_s_predicted | fabs)
            < 1e-6 * .decode_tok_s_predicted' "$T/this.json")" = true ] \
    && ok "plan on this machine predicts decode from its kernel rates ($(jq .decode_tok_s_predicted "$T/this.json") tok/s)" \
    || fail "prediction: $(jq -c '{compute_s_per_token, disk_bytes_per_token, decode_tok_s_predicted}' "$T/this.json")"
  [ "$(jq '.decode_tok_s_predicted' "$T/pl.json")" = null ] \
    && ok "a board profile (kernels not measured) predicts nothing" || fail "profile prediction: $(jq .decode_tok_s_predicted "$T/pl.json")"
else
  fail "plan (this): $(cat "$T/err.txt")"
fi
$R plan -m "$T/m" --device rk9999 > /dev/null 2> "$T/err.txt" && fail "unknown device accepted" \
  || { grep -q "unknown device 'rk9999'" "$T/err.txt" && ok "unknown device refused" || fail "device message: $(cat "$T/err.txt")"; }
$R plan -m "$T/m" --device rk3588-nvme --mem-budget 8M > /dev/null 2> "$T/err.txt" && fail "8M plan accepted" \
  || { grep -q "too small: needs at least" "$T/err.txt" && ok "plan: a budget too small, with the numbers" || fail "plan budget: $(cat "$T/err.txt")"; }
$R plan -m "$T/m" --trace "$T/none.bin" --hit-rate 5 > /dev/null 2> "$T/err.txt" && fail "--trace with --hit-rate accepted" \
  || { grep -q "exclude each other" "$T/err.txt" && ok "--trace and --hit-rate exclusive" || fail "excl: $(cat "$T/err.txt")"; }

# a budget below the resident core: refused up front with the numbers
if $R bench -m "$T/m" --mem-budget 8M -n 2 > /dev/null 2> "$T/err.txt"; then fail "8M budget accepted"
else grep -q "too small: needs at least" "$T/err.txt" && ok "small budget refused with the numbers" || fail "message: $(cat "$T/err.txt")"; fi
# the budget plans for the context asked for: 50 MiB is too small for the
# default 2048-token KV cache of this model, enough for 64 tokens
if $R bench -m "$T/m" --mem-budget 50M -n 2 --prompt-tokens 4 > /dev/null 2> "$T/err.txt"; then
  fail "50M with the default context accepted (the test needs a budget between the two plans)"
elif $R bench -m "$T/m" --mem-budget 50M --ctx 64 -n 2 --prompt-tokens 4 > "$T/out.txt" 2> "$T/err.txt"; then
  grep -q "kv 64.00 KiB" "$T/out.txt" && ok "--ctx 64 fits a budget the default context does not" \
    || fail "plan: $(grep plan "$T/out.txt")"
else
  fail "--ctx 64 under 50M: $(cat "$T/err.txt")"
fi
# --repeat: every run's tok/s, their median inside [min, max], phase
# totals over the runs
if $R bench -m "$T/m" --prompt-tokens 8 -n 4 -t 2 -r 3 --json > "$T/r.json" 2> "$T/err.txt"; then
  [ "$(jq '.repeat' "$T/r.json")" = 3 ] && ok "json says 3 runs" || fail "repeat: $(jq '.repeat' "$T/r.json")"
  [ "$(jq '.decode_tok_s.runs | length' "$T/r.json")" = 3 ] && [ "$(jq '.prefill_tok_s.runs | length' "$T/r.json")" = 3 ] \
    && ok "3 tok/s figures per phase" || fail "runs: $(jq -c '.decode_tok_s' "$T/r.json")"
  [ "$(jq '.decode_tok_s | (.min <= .median and .median <= .max and .min > 0 and .sd >= 0)' "$T/r.json")" = true ] \
    && ok "median within [min, max]" || fail "spread: $(jq -c '.decode_tok_s' "$T/r.json")"
  [ "$(jq '.decode.tokens' "$T/r.json")" = 12 ] && [ "$(jq '.prefill.tokens' "$T/r.json")" = 24 ] \
    && ok "phase totals over the runs" || fail "totals: $(jq -c '[.prefill.tokens, .decode.tokens]' "$T/r.json")"
else
  fail "bench -r 3: $(cat "$T/err.txt")"
fi
$R bench -m "$T/m" -n 2 --prompt-tokens 4 -r 2 > "$T/out.txt" 2> "$T/err.txt" \
  && grep -Eq '^decode tok/s over 2 runs: median [0-9.]+' "$T/out.txt" && ok "text report of the runs" \
  || fail "text -r 2: $(cat "$T/out.txt" "$T/err.txt")"
$R bench -m "$T/m" -r 0 > /dev/null 2> "$T/err.txt" && fail "-r 0 accepted" \
  || { grep -q "rkmojo bench: --repeat: '0' is out of range \[1, " "$T/err.txt" && ok "-r 0 refused" || fail "repeat message: $(cat "$T/err.txt")"; }

# --limits with every expert in memory: after each run the same weights
# are read alone (one pass = the bytes a token reads: resident matrices,
# top-k experts per layer, LM head) and the decode is given as a share of
# that; with part of the experts cached, or none loaded ahead, the pass is
# skipped with the reason
if $R bench -m "$T/m" --prompt-tokens 8 -n 4 -t 2 -r 2 --warm --limits --json > "$T/l.json" 2> "$T/err.txt"; then
  [ "$(jq '.limits.weights_pass_bytes == .limits.weight_bytes_per_token' "$T/l.json")" = true ] \
    && ok "the weights pass reads the bytes a token reads" \
    || fail "pass bytes: $(jq -c '[.limits.weights_pass_bytes, .limits.weight_bytes_per_token]' "$T/l.json")"
  [ "$(jq '.limits.weights_pass_tok_s.runs | length == 2 and all(. > 0)' "$T/l.json")" = true ] \
    && ok "a weights pass after each run" || fail "pass runs: $(jq -c '.limits.weights_pass_tok_s' "$T/l.json")"
  [ "$(jq '.limits.decode_share_of_weights_pass.median > 0' "$T/l.json")" = true ] \
    && ok "decode share of the pass" || fail "share: $(jq -c '.limits.decode_share_of_weights_pass' "$T/l.json")"
else
  fail "bench --limits (resident): $(cat "$T/err.txt")"
fi
$R bench -m "$T/m" --prompt-tokens 8 -n 2 -t 2 --warm --limits > "$T/out.txt" 2> "$T/err.txt" \
  && grep -Eq '^limits: the same [0-9.]+ MB read alone .*: [0-9.]+ tok/s; decode reached [0-9.]+% of it' "$T/out.txt" \
  && ok "text report of the weights pass" || fail "pass text: $(grep limits "$T/out.txt") $(cat "$T/err.txt")"
$R bench -m "$T/m" --expert-cache-slots 3 --prompt-tokens 8 -n 2 -t 2 --limits > "$T/out.txt" 2> "$T/err.txt" \
  && grep -q '^limits: no weights-only pass: the expert cache holds only part of the experts' "$T/out.txt" \
  && ok "no weights pass with part of the experts" || fail "partial cache: $(grep limits "$T/out.txt")"
$R bench -m "$T/m" --lazy-experts --prompt-tokens 8 -n 2 -t 2 --limits --json > "$T/l.json" 2> "$T/err.txt" \
  && jq -e '.limits.weights_pass_skipped | test("not all in memory")' "$T/l.json" > /dev/null \
  && ok "no weights pass with experts loaded on demand" || fail "lazy: $(jq -c '.limits' "$T/l.json")"

# --parallel: sequences decoding together, with a cache of 3 slots for 8
# experts (so the step's union is read once for all of them)
if $R bench -m "$T/m" --expert-cache-slots 3 --prompt-tokens 10 -n 5 -t 2 --parallel 3 --json > "$T/p.json" 2> "$T/err.txt"; then
  [ "$(jq '.parallel.sequences == 3 and .parallel.prefill_tok_s > 0 and .parallel.decode_tok_s > 0' "$T/p.json")" = true ]     && ok "json parallel figures" || fail "parallel json: $(jq -c '.parallel' "$T/p.json")"
  # 5 steps of 3 sequences, each step's union of experts read at most once per layer slot miss
  [ "$(jq '(.parallel.decode_tok_s / .parallel.decode_steps_s) | . > 2.99 and . < 3.01' "$T/p.json")" = true ]     && ok "three tokens per step" || fail "tokens per step: $(jq -c '.parallel' "$T/p.json")"
  [ "$(jq '.parallel.decode_hits + .parallel.decode_misses > 0' "$T/p.json")" = true ]     && ok "parallel decode used the expert cache" || fail "parallel cache counters: $(jq -c '.parallel' "$T/p.json")"
else
  fail "bench --parallel 3: $(cat "$T/err.txt")"
fi
$R bench -m "$T/m" --prompt-tokens 10 -n 4 -t 2 --parallel 2 > "$T/out.txt" 2> "$T/err.txt"   && grep -Eq '^parallel 2 sequences: prefill 20 tok [0-9.]+ tok/s; decode 4 steps, [0-9.]+ tok/s in total \([0-9.]+ per sequence\)' "$T/out.txt"   && ok "text report of --parallel" || fail "parallel text: $(grep parallel "$T/out.txt") $(cat "$T/err.txt")"
$R bench -m "$T/m" --parallel 1 > /dev/null 2> "$T/err.txt" && fail "--parallel 1 accepted" || ok "--parallel 1 refused"

# bad options
$R bench -m "$T/m" --cache-policy mru > /dev/null 2> "$T/err.txt" && fail "bad policy accepted" \
  || { grep -Eq "lfu( or |[|])lru" "$T/err.txt" && ok "bad policy refused" || fail "policy message"; }
$R bench > /dev/null 2> "$T/err.txt" && fail "bench without a model accepted" || ok "bench without -m refused"

echo "$fails failed"
[ "$fails" -eq 0 ]

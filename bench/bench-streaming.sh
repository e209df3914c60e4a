#!/usr/bin/env bash
# bench-streaming.sh - the streaming figures of docs/STATUS.md: for one
# model and each memory budget, drops the page cache (when run as root),
# runs `rkmojo bench --limits --json` and prints one markdown row: decode
# and prefill tok/s, decode hit rate, MB read per token, IO wait per token,
# peak RSS, and the decode bound of the probed memory and disk bandwidths.
#
#   bench/bench-streaming.sh MODEL.rkmojo [BUDGET ...]     (default 2G 4G 8G)
#   env: RKMOJO (binary, default build/rkmojo), CTX (default 1024: the
#        smallest budgets need a short context), PROMPT (tokens, 32),
#        N (decode tokens, 128), THREADS (2), EXTRA (more bench options)
# Needs jq. Measures only; asserts nothing.
set -eu
M=${1:?usage: bench-streaming.sh MODEL.rkmojo [BUDGET ...]}
shift
BUDGETS=${*:-2G 4G 8G}
BIN=${RKMOJO:-build/rkmojo}
command -v jq > /dev/null || { echo "bench-streaming.sh needs jq (apt-get install jq)" >&2; exit 2; }
echo "model $M, ctx ${CTX:-1024}, prompt ${PROMPT:-32} + decode ${N:-128} tokens, ${THREADS:-2} threads, $(date -u +%FT%TZ)"
echo "| budget | slots | decode tok/s | prefill tok/s | decode hit | MB read/tok | IO wait ms/tok | CPU ms/tok | peak RSS GiB | bound tok/s (overlapped / serial) | share of bound |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for b in $BUDGETS; do
  if [ -w /proc/sys/vm/drop_caches ]; then sync; echo 3 > /proc/sys/vm/drop_caches; fi
  out=$(mktemp)
  # shellcheck disable=SC2086
  if ! "$BIN" bench -m "$M" --mem-budget "$b" --ctx "${CTX:-1024}" --prompt-tokens "${PROMPT:-32}" -n "${N:-128}" \
      -t "${THREADS:-2}" --limits --json ${EXTRA:-} > "$out" 2> "$out.err"; then
    echo "| $b | - | failed: $(tail -1 "$out.err") |"
    rm -f "$out" "$out.err"
    continue
  fi
  jq -r --arg b "$b" '"| \($b) | \(.slots_per_layer)/\(.n_expert) | \(.decode.tok_s*100|round/100) | \(.prefill.tok_s*100|round/100) | \(.decode.hit_rate*1000|round/10)% | \(.decode.bytes_per_token/1e6*10|round/10) | \(.decode.io_wait_ms_per_token*10|round/10) | \(.decode.cpu_s/.decode.tokens*1000|round) | \(.peak_rss_bytes/1073741824*100|round/100) | \(.limits.decode_tok_s_overlapped*100|round/100) / \(.limits.decode_tok_s_serial*100|round/100) | \(.limits.decode_share_of_overlapped*100|round)% |"' "$out"
  jq -r '"  (memory \(.limits.mem_read_gb_s*10|round/10) GB/s, disk \(.limits.disk_read_mb_s|round) MB/s, \(.limits.weight_bytes_per_token/1e6|round) MB of weights per token)"' "$out" >&2
  rm -f "$out" "$out.err"
done

#!/usr/bin/env bash
# test-soak.sh - the bounded short version of the server soak: 16 streaming
# clients for 20 s against the release server with a prompt-cache directory
# capped at 8 MiB (bench/load-server.sh: multi-turn conversations through
# both APIs, one request in 7 cancelled after its first token). Checks: no
# request failed, every client was served, the server still answers, its
# descriptors are back to where they started, the prompt cache stayed
# within its cap and its RSS within a bound. The 10-minute run is the same
# script with DURATION=600 (figures in docs/SERVER.md).
# Exit 0 pass, 1 fail, 77 skip.
set -u
cd "$(dirname "$0")/.."
BUILD=${RKM_BUILD:-build}
skip() { echo "skip: $1"; exit 77; }
[ -x "$BUILD/rkmojo" ] || skip "no $BUILD/rkmojo"
[ -z "${RKM_RUNNER:-}" ] || skip "server tests run natively only"
command -v node >/dev/null || skip "node missing"
command -v curl >/dev/null || skip "curl missing"
out=$(BUILD=$BUILD CLIENTS=16 DURATION=${RKM_SOAK_SECONDS:-20} SAMPLE=5 PCACHE=1 PCACHE_MAX=8M MAX_TOKENS=24 \
  bash bench/load-server.sh 2>&1)
echo "$out" | tail -n 12
sum=$(echo "$out" | tail -n 1)
fails=0
check() {
  if node -e 'const r=JSON.parse(process.argv[1]);process.exit(('"$2"')?0:1)' "$sum" 2>/dev/null; then
    echo "ok   $1"
  else
    echo "FAIL $1"; fails=$((fails + 1))
  fi
}
check "no request failed" 'r.errors === 0'
check "every client was served (at least 16 replies)" 'r.requests >= 16 && r.tokens > 0'
check "requests were cancelled mid-stream" 'r.cancelled > 0'
check "the server still answers /health" 'r.health === 200'
check "descriptors back to the start (no leak)" 'r.fds_last <= r.fds_first + 1'
check "the prompt cache was used and stayed within its cap" 'r.pcache_files_last > 0'
pc=$(echo "$out" | awk '$1 ~ /^[0-9]+$/ && NF == 5 {print $5}' | sort -n | tail -1)
if awk -v b="$pc" 'BEGIN { exit !(b <= 8.5) }'; then echo "ok   prompt cache at most 8.5 MiB ($pc)"; else echo "FAIL prompt cache $pc MiB over its 8 MiB cap"; fails=$((fails + 1)); fi
check "RSS bounded (last <= 2 x first + 64 MiB)" 'r.rss_last_mib <= 2 * r.rss_first_mib + 64'
echo "$fails failed"
[ "$fails" -eq 0 ]

#!/usr/bin/env bash
# load-server.sh - a small load run of `rkmojo serve` on loopback: N
# concurrent streaming chat clients (default 8) for DURATION seconds
# (default 60), each sending requests back to back. Reports requests,
# errors, generated tokens, throughput, p50/p99 time to first token (queue
# wait included: one generation runs at a time) and the server's RSS before
# and after.
#
# usage: bench/load-server.sh [MODEL.rkmojo]
#   env: BUILD (build), CLIENTS (8), DURATION (60), MAX_TOKENS (64)
# Without MODEL a synthetic tiny model is generated. Needs node (>= 18).
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BIN=$PWD/$BUILD/rkmojo
CLIENTS=${CLIENTS:-8}
DURATION=${DURATION:-60}
MAX_TOKENS=${MAX_TOKENS:-64}
T=$(mktemp -d)
SRV=
cleanup() { [ -n "$SRV" ] && kill "$SRV" 2>/dev/null; wait 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT

MODEL=${1:-}
if [ -z "$MODEL" ]; then
  "$BIN" synth --preset tiny -o "$T/t.gguf" --quiet
  "$BIN" convert "$T/t.gguf" "$T/tiny.rkmojo" >/dev/null
  MODEL=$T/tiny.rkmojo
fi

"$BIN" serve -m "$MODEL" --port 0 --port-file "$T/port" --queue $((CLIENTS * 2)) >"$T/server.log" 2>&1 &
SRV=$!
for _ in $(seq 300); do [ -s "$T/port" ] && break; sleep 0.1; done
URL=http://127.0.0.1:$(cat "$T/port")
rss() { awk '/^VmRSS/ {print $2 * 1024}' "/proc/$SRV/status"; }
# one warm-up request loads the model
curl -s "$URL/v1/chat/completions" -d '{"messages":[{"role":"user","content":"hi"}],"max_tokens":4}' >/dev/null
RSS0=$(rss)

cat >"$T/client.mjs" <<'EOF'
const [url, clients, duration, maxTokens] = process.argv.slice(2).map((x, i) => (i ? Number(x) : x));
const end = Date.now() + duration * 1000;
const ttft = [];
let requests = 0, errors = 0, tokens = 0;
const prompts = ['Tell me a story.', 'List some prime numbers.', 'Describe the sea.', 'What is a tree?'];
async function one(i) {
  const t0 = performance.now();
  let first = -1;
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({
      messages: [{ role: 'user', content: prompts[i % prompts.length] }],
      max_tokens: maxTokens, stream: true, stream_options: { include_usage: true }, temperature: 0.7,
    }),
  });
  if (res.status !== 200) { errors++; await res.text(); return; }
  const dec = new TextDecoder();
  let buf = '', done = false;
  for await (const chunk of res.body) {
    buf += dec.decode(chunk, { stream: true });
    let k;
    while ((k = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, k); buf = buf.slice(k + 2);
      if (!ev.startsWith('data: ')) continue;
      const data = ev.slice(6);
      if (data === '[DONE]') { done = true; continue; }
      const o = JSON.parse(data);
      if (o.error) { errors++; return; }
      if (first < 0 && o.choices?.[0]?.delta?.content) first = performance.now() - t0;
      if (o.usage) tokens += o.usage.completion_tokens;
    }
  }
  if (!done) { errors++; return; }
  requests++;
  if (first >= 0) ttft.push(first);
}
async function loop(i) { while (Date.now() < end) { try { await one(i); } catch { errors++; } } }
const t0 = performance.now();
await Promise.all(Array.from({ length: clients }, (_, i) => loop(i)));
const secs = (performance.now() - t0) / 1000;
ttft.sort((a, b) => a - b);
const pct = (p) => (ttft.length ? ttft[Math.min(ttft.length - 1, Math.floor(p * ttft.length))] : NaN);
console.log(JSON.stringify({ clients, seconds: +secs.toFixed(1), requests, errors, tokens,
  tokens_per_s: +(tokens / secs).toFixed(1), ttft_p50_ms: +pct(0.5).toFixed(1), ttft_p99_ms: +pct(0.99).toFixed(1) }));
EOF

RESULT=$(node "$T/client.mjs" "$URL" "$CLIENTS" "$DURATION" "$MAX_TOKENS")
RSS1=$(rss)
echo "model: $MODEL"
echo "result: $RESULT"
echo "server RSS: before $((RSS0 / 1048576)) MiB, after $((RSS1 / 1048576)) MiB"
curl -s "$URL/metrics" | grep -E '^rkmojo_(decode|prefill)_tokens_per_second|^rkmojo_rejected_total|^rkmojo_canceled_total'

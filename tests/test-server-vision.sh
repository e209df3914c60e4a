#!/usr/bin/env bash
# test-server-vision.sh - images through `rkmojo serve` (tests/js/server-
# vision.mjs with the official openai and ollama clients) on synth's
# tiny-gemma4 converted with its vision tower (convert --mmproj), beside a
# text-only model: OpenAI image_url parts and Ollama images give, under
# greedy decoding, the text `rkmojo run` gives for the same prompt; a
# repeated request reuses the image; bad images are 400s and the server
# goes on. `rkmojo chat` with /image, on its own and through the server
# (--url), answers as run does and keeps images across /save and /load.
# --image-urls fetches images by URL; --vision-idle frees an idle tower;
# the prompt cache on disk keeps an image's rows across a restart (and
# the tower is not read for an image whose rows all come from it); with
# Qwen3-VL's tiny model, a text request is answered while another
# request's image is in the tower.
# Exit 0 pass, 1 fail, 77 skip.
set -u
cd "$(dirname "$0")/.."
BUILD=${RKM_BUILD:-build}
BIN=$PWD/$BUILD/rkmojo
skip() { echo "skip: $1"; exit 77; }
[ -x "$BIN" ] || skip "no $BIN"
[ -z "${RKM_RUNNER:-}" ] || skip "server tests run natively only"
command -v node >/dev/null || skip "node missing"
[ -d tests/js/node_modules/openai ] && [ -d tests/js/node_modules/ollama ] || skip "npm packages missing (cd tests/js && npm ci)"
[ -x "$BUILD/tests/make-image" ] || { echo "FAIL: $BUILD/tests/make-image not built"; exit 1; }
T=$(mktemp -d)
PID=
trap '[ -n "$PID" ] && kill $PID 2>/dev/null; wait 2>/dev/null; rm -rf "$T"' EXIT
mkdir -p "$T/models"
"$BIN" synth --preset tiny-gemma4 --dtype f32 -o "$T/g.gguf" --mmproj-out "$T/g-mmproj.gguf" --quiet &&
  "$BIN" convert "$T/g.gguf" "$T/models/vis.rkmojo" --quant keep --mmproj "$T/g-mmproj.gguf" --quiet > /dev/null &&
  "$BIN" synth --preset tiny -o "$T/t.gguf" --quiet && "$BIN" convert "$T/t.gguf" "$T/models/text.rkmojo" --quiet > /dev/null ||
  { echo "FAIL: synth / convert"; exit 1; }
"$BUILD/tests/make-image" "$T/a.png" 320 240 7 || { echo "FAIL: make-image"; exit 1; }
run() { "$BIN" run -m "$T/models/vis.rkmojo" --image "$T/a.png" -n 12 --temp 0 -q "$@" 2> "$T/run.err" | head -c -1; }
chat_ref=$(run --chat -p "What is in <__media__> this?") || { cat "$T/run.err"; exit 1; }
gen_ref=$(run -p "<__media__>Look: ") || { cat "$T/run.err"; exit 1; }
ochat_ref=$(run --chat -p "<__media__>Describe it.") || { cat "$T/run.err"; exit 1; }
"$BIN" serve --models-dir "$T/models" --port 0 --port-file "$T/port" > "$T/serve.log" 2>&1 &
PID=$!
for _ in $(seq 300); do [ -s "$T/port" ] && break; sleep 0.1; done
[ -s "$T/port" ] || { echo "FAIL: the server did not start"; cat "$T/serve.log"; exit 1; }
fail=0
if ! (cd tests/js && node server-vision.mjs "http://127.0.0.1:$(cat "$T/port")" vis text "$T/a.png" "$chat_ref" "$gen_ref" "$ochat_ref"); then
  echo "--- server log"; tail -20 "$T/serve.log"; fail=1
fi
# rkmojo chat's /image, here and through the server: the first answer is
# run's for the same conversation, the follow-up does not encode the
# image again, the conversation saved with its image files loads back
chat_in="/image $T/a.png\nWhat is in this?\nAnd now?\n/save $T/conv.json\n/bye\n"
first_ref=$(run --chat -p "<__media__>What is in this?") || { cat "$T/run.err"; exit 1; }
printf "$chat_in" | RKM_CHAT_DEBUG=1 "$BIN" chat -m "$T/models/vis.rkmojo" -n 12 --temp 0 -q > "$T/chat.out" 2> "$T/chat.err"
got=$(sed -n 2p "$T/chat.out")
if [ "$got" = "$first_ref" ] && grep -q "1 images encoded" "$T/chat.err" && grep -q "0 images encoded" "$T/chat.err"; then
  echo "ok   chat /image: run's answer, the follow-up reuses the image"
else
  echo "FAIL chat /image: got '$got', want '$first_ref'"; cat "$T/chat.err"; fail=1
fi
if grep -q "\"$T/a.png\"" "$T/conv.json" && printf "/load $T/conv.json\nagain\n/bye\n" | "$BIN" chat -m "$T/models/vis.rkmojo" -n 4 --temp 0 -q > "$T/load.out" 2>&1 &&
   grep -q "loaded from" "$T/load.out" && ! grep -q "rkmojo chat:" "$T/load.out"; then
  echo "ok   chat /save and /load keep the images"
else
  echo "FAIL chat /save and /load with images"; cat "$T/conv.json" "$T/load.out"; fail=1
fi
printf "$chat_in" | "$BIN" chat --url "http://127.0.0.1:$(cat "$T/port")" -m vis -n 12 --temp 0 > "$T/rchat.out" 2> "$T/rchat.err"
if [ "$(sed -n 2p "$T/rchat.out")" = "$(sed -n 2p "$T/chat.out")" ]; then
  echo "ok   chat --url /image: the same answer through the server"
else
  echo "FAIL chat --url /image: '$(sed -n 2p "$T/rchat.out")'"; cat "$T/rchat.err"; fail=1
fi
printf "/image $T/missing.png\n/image $T/t.gguf\n/bye\n" | "$BIN" chat -m "$T/models/vis.rkmojo" -q > "$T/bad.out" 2>&1
if grep -q "missing.png: No such file" "$T/bad.out" && grep -q "t.gguf.*not an image" "$T/bad.out"; then
  echo "ok   chat /image of a missing file or a non-image: named"
else
  echo "FAIL chat /image errors"; cat "$T/bad.out"; fail=1
fi
# images by URL: fetched by a server started with --image-urls (the
# same answer as the data: URI), refused without it (the suite above)
node -e "const fs=require('fs');const s=require('http').createServer((q,r)=>{if(q.url==='/a.png'){r.end(fs.readFileSync('$T/a.png'))}else if(q.url==='/big'){r.writeHead(200,{'Content-Length':String(40<<20)});r.end(Buffer.alloc(40<<20))}else{r.statusCode=404;r.end()}}).listen(0,'127.0.0.1',()=>fs.writeFileSync('$T/web.port',String(s.address().port)))" &
WEB=$!
"$BIN" serve -m "$T/models/vis.rkmojo" --image-urls --vision-idle 1s --port 0 --port-file "$T/port2" > "$T/serve2.log" 2>&1 &
PID2=$!
for _ in $(seq 300); do [ -s "$T/port2" ] && [ -s "$T/web.port" ] && break; sleep 0.1; done
img_req() { printf '{"temperature":0,"max_tokens":12,"messages":[{"role":"user","content":[{"type":"text","text":"What is in "},{"type":"image_url","image_url":{"url":"%s"}},{"type":"text","text":" this?"}]}]}' "$1"; }
W=http://127.0.0.1:$(cat "$T/web.port")
got=$(img_req "$W/a.png" | curl -s "http://127.0.0.1:$(cat "$T/port2")/v1/chat/completions" -d @- | node -e "let s='';process.stdin.on('data',d=>s+=d).on('end',()=>{try{process.stdout.write(JSON.parse(s).choices[0].message.content)}catch(e){process.stdout.write('BAD '+s)}})")
if [ "$got" = "$chat_ref" ]; then echo "ok   an image by URL (--image-urls): the same answer"; else echo "FAIL image by URL: '$got'"; fail=1; fi
for u in "$W/missing.png|HTTP 404" "$W/big|larger than" "file:///etc/passwd|data: URI"; do
  out=$(img_req "${u%%|*}" | curl -s -w ' %{http_code}' "http://127.0.0.1:$(cat "$T/port2")/v1/chat/completions" -d @-)
  case $out in *"${u#*|}"*" 400") echo "ok   image URL ${u%%|*}: 400 (${u#*|})" ;; *) echo "FAIL image URL ${u%%|*}: $out"; fail=1 ;; esac
done
# --vision-idle: the tower freed after a second without images; the same
# image again is answered from the rows a slot holds without reading it,
# a new image reads it again
for _ in $(seq 50); do grep -q "vision tower of vis freed (idle)" "$T/serve2.log" && break; sleep 0.1; done
got=$(img_req "$W/a.png" | curl -s "http://127.0.0.1:$(cat "$T/port2")/v1/chat/completions" -d @- | node -e "let s='';process.stdin.on('data',d=>s+=d).on('end',()=>{try{process.stdout.write(JSON.parse(s).choices[0].message.content)}catch(e){process.stdout.write('BAD '+s)}})")
n_same=$(grep -c "vision tower of vis loaded" "$T/serve2.log")
"$BUILD/tests/make-image" "$T/b.png" 200 150 3
new=$(img_req "data:image/png;base64,$(base64 -w0 "$T/b.png")" | curl -s "http://127.0.0.1:$(cat "$T/port2")/v1/chat/completions" -d @- | node -e "let s='';process.stdin.on('data',d=>s+=d).on('end',()=>{try{process.stdout.write(JSON.parse(s).choices[0].message.content)}catch(e){process.stdout.write('BAD '+s)}})")
n_new=$(grep -c "vision tower of vis loaded" "$T/serve2.log")
if grep -q "vision tower of vis freed (idle)" "$T/serve2.log" && [ "$n_same" = 1 ] && [ "$n_new" = 2 ] && [ "$got" = "$chat_ref" ] &&
   [ -n "$new" ] && [ "${new#BAD}" = "$new" ]; then
  echo "ok   --vision-idle: the tower freed when idle, not read for rows a slot holds, read again for a new image"
else
  echo "FAIL --vision-idle: read $n_same then $n_new times; '$got' / '$new'"; cat "$T/serve2.log"; fail=1
fi
kill $PID2 $WEB 2>/dev/null
# the prompt cache on disk keeps an image's rows: after a restart the same
# request finds them (cached tokens), with the same answer
cached_req() {
  img_req "data:image/png;base64,$(base64 -w0 "$T/a.png")" | curl -s "http://127.0.0.1:$(cat "$T/port3")/v1/chat/completions" -d @- |
    node -e "let s='';process.stdin.on('data',d=>s+=d).on('end',()=>{const r=JSON.parse(s);process.stdout.write(r.usage.prompt_tokens+' '+r.usage.prompt_tokens_details.cached_tokens+' '+r.choices[0].message.content)})"
}
for round in 1 2; do
  rm -f "$T/port3"
  "$BIN" serve -m "$T/models/vis.rkmojo" --prompt-cache-dir "$T/pc" --port 0 --port-file "$T/port3" > "$T/serve3.log" 2>&1 &
  PID3=$!
  for _ in $(seq 300); do [ -s "$T/port3" ] && break; sleep 0.1; done
  out[$round]=$(cached_req)
  kill $PID3; wait $PID3 2>/dev/null
  loaded[$round]=$(grep -c "vision tower of vis loaded" "$T/serve3.log")
done
read -r n1 c1 _ <<<"${out[1]}"
read -r n2 c2 _ <<<"${out[2]}"
t1=${out[1]#* * } t2=${out[2]#* * } # the answers as they are (read would trim their spaces)
if [ "$c1" = 0 ] && [ "$c2" -ge $((n2 - 1)) ] && [ "$t1" = "$t2" ] && [ "$t1" = "$chat_ref" ] &&
   [ "${loaded[1]}" = 1 ] && [ "${loaded[2]}" = 0 ]; then
  echo "ok   the disk prompt cache keeps the image's rows across a restart ($c2 of $n2 cached; the tower not read)"
else
  echo "FAIL disk prompt cache with an image: '${out[1]}' then '${out[2]}', the tower read ${loaded[1]} then ${loaded[2]} times"
  cat "$T/serve3.log"; fail=1
fi
# Qwen3-VL in the server, its image encoded off the worker: a request
# with a 1600x1600 image (2500 rows, seconds in the tower) and a text
# request sent while the tower runs: the text request is answered while
# the image one is still encoding, and the image one gets run's answer
# (multi-axis positions and deep-stack rows through the server)
"$BIN" synth --preset tiny-qwen3vl --dtype f32 -o "$T/q.gguf" --mmproj-out "$T/q-mmproj.gguf" --quiet &&
  "$BIN" convert "$T/q.gguf" "$T/models/qvl.rkmojo" --quant keep --mmproj "$T/q-mmproj.gguf" --quiet > /dev/null &&
  "$BUILD/tests/make-image" "$T/big.png" 1600 1600 9 || { echo "FAIL: tiny-qwen3vl synth / convert"; exit 1; }
q_ref=$("$BIN" run -m "$T/models/qvl.rkmojo" -c 4096 --image "$T/big.png" -n 2 --temp 0 -q --chat -p "What is in <__media__> this?" 2> "$T/run.err" | head -c -1) ||
  { cat "$T/run.err"; exit 1; }
rm -f "$T/port4"
"$BIN" serve -m "$T/models/qvl.rkmojo" -c 4096 --parallel 2 --port 0 --port-file "$T/port4" > "$T/serve4.log" 2>&1 &
PID4=$!
for _ in $(seq 300); do [ -s "$T/port4" ] && break; sleep 0.1; done
U4="http://127.0.0.1:$(cat "$T/port4")/v1/chat/completions"
printf '{"temperature":0,"max_tokens":2,"messages":[{"role":"user","content":[{"type":"text","text":"What is in "},{"type":"image_url","image_url":{"url":"data:image/png;base64,%s"}},{"type":"text","text":" this?"}]}]}' \
  "$(base64 -w0 "$T/big.png")" > "$T/big.json"
curl -s "$U4" -d @"$T/big.json" > "$T/big.out" &
CURL_A=$!
for _ in $(seq 300); do grep -q "vision tower of qvl loaded" "$T/serve4.log" && break; sleep 0.05; done
text_out=$(curl -s "$U4" -d '{"temperature":0,"max_tokens":8,"messages":[{"role":"user","content":"Hello there"}]}')
kill -0 $CURL_A 2>/dev/null && a_running=1 || a_running=0
wait $CURL_A
got=$(node -e "try{process.stdout.write(JSON.parse(require('fs').readFileSync('$T/big.out','utf8')).choices[0].message.content)}catch(e){process.stdout.write('BAD')}")
case $text_out in *'"choices"'*) text_ok=1 ;; *) text_ok=0 ;; esac
if [ "$a_running" = 1 ] && [ "$text_ok" = 1 ] && [ "$got" = "$q_ref" ]; then
  echo "ok   qwen3vl: a text request answered while an image encodes; the image request gets run's answer"
else
  echo "FAIL qwen3vl in the server: image request still running when the text one ended: $a_running; text: $text_out; image: '$got' (run: '$q_ref')"
  tail -5 "$T/serve4.log"; fail=1
fi
kill $PID4 2>/dev/null; wait $PID4 2>/dev/null
[ $fail -eq 0 ] && echo PASS
exit $fail

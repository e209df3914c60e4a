#!/usr/bin/env bash
# test-server-vision.sh - images through `rkmojo serve` (tests/js/server-
# vision.mjs with the official openai and ollama clients) on synth's
# tiny-gemma4 converted with its vision tower (convert --mmproj), beside a
# text-only model: OpenAI image_url parts and Ollama images give, under
# greedy decoding, the text `rkmojo run` gives for the same prompt; a
# repeated request reuses the image; bad images are 400s and the server
# goes on. Exit 0 pass, 1 fail, 77 skip.
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
if (cd tests/js && node server-vision.mjs "http://127.0.0.1:$(cat "$T/port")" vis text "$T/a.png" "$chat_ref" "$gen_ref" "$ochat_ref"); then
  echo PASS
else
  echo "--- server log"; tail -20 "$T/serve.log"; exit 1
fi

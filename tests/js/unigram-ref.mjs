// unigram-ref.mjs - writes a small but real SentencePiece Unigram
// tokenizer.json (+ tokenizer_config.json) for tests/test-tokenizer-ref.sh.
//
// usage: node unigram-ref.mjs OUTDIR VARIANT [CORPUS]
//   VARIANT "metaspace-bf": Metaspace pre-tokenizer (prepend "always",
//           split false), byte_fallback on, <0x00>..<0xFF> byte pieces;
//   VARIANT "replace-unk": no pre-tokenizer, Prepend("▁") + Replace(" ",
//           "▁") normalizers, byte_fallback off (unknown runs -> <unk>);
//   VARIANT "t5": what Hugging Face's converter writes for T5: a
//           Precompiled normalizer (a charsmap built by charsmap.mjs from
//           jsPrecompiledRules()), WhitespaceSplit + Metaspace (always,
//           split true) pre-tokenizers, <unk>;
//   VARIANT "t5-new": the newer converter's form: Precompiled, Strip
//           (right), Replace(Regex " {2,}", "▁") normalizers, Metaspace.
// For the t5 variants with CORPUS, also writes OUTDIR/charsmap-check.txt
// (per corpus string: hex of the string and of its naive charsmap
// normalization, for test-tokenizer --charsmap-check) and OUTDIR/corpus.txt:
// the corpus strings on which the charsmap agrees with what
// @huggingface/tokenizers' Precompiled does (it ignores the charsmap: see
// charsmap.mjs), the only ones its ids can be compared on.
// The pieces come from the word list below: "▁word", "word", every 2..4
// character prefix and suffix of each word, and single characters (ASCII
// and a few Latin-1 letters; everything else in the corpus is unknown).
// Scores are deterministic pseudo log-probabilities from a hash of the
// piece (whole numbers, so equal scores and tied paths are common and the tie
// rule is exercised). The reference ids come from tokenizer-ref.mjs.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { Tokenizer } from "@huggingface/tokenizers";
import { applyCharsmap, buildCharsmap, jsPrecompiledRules } from "./charsmap.mjs";

const [outDir, variant, corpusPath] = process.argv.slice(2);
if (!outDir || !["metaspace-bf", "replace-unk", "t5", "t5-new"].includes(variant)) {
  console.error("usage: node unigram-ref.mjs OUTDIR metaspace-bf|replace-unk|t5|t5-new [CORPUS]");
  process.exit(2);
}
const t5 = variant.startsWith("t5");
const rules = t5 ? jsPrecompiledRules() : null;
const precompiled = t5 ? { type: "Precompiled", precompiled_charsmap: buildCharsmap(rules).toString("base64") } : null;
const words = `the of and to in is was for on that with as by at it from be this are or an
have not but had his they you were which one all we there been can her has more if will
when would who what so no out up into than them only time some could new about other
these two may first then do any like my now over such our man me even most made after
also did many before must through back years where much your way well down should because
each just those people how too little state good very make world still own see men work
long get here between both life being under never day same another know while last might
us great old year off come since against go came right used take three quick brown fox
jumps lazy dog hello once upon land far away lived king who three daughters mixture
experts models route token tokens few rest stay disk year followed price mail visit
example path query went line bullet list item nested markdown bold italic code link
tab separated values trailing leading spaces sentence beautiful isn don won can shouldn
clock rock roll timestamp function return value print def class import self true false
none null string number float int char void struct include define static const`
  .split(/\s+/)
  .filter((w) => w);

function score(piece) {
  // FNV-1a over the UTF-16 code units, mapped to -2 .. -11
  let h = 0x811c9dc5;
  for (let i = 0; i < piece.length; i++) {
    h ^= piece.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return -(2 + (h % 10));
}

const W = "\u2581";
const pieces = new Map(); // piece -> score, in insertion order
const add = (p, s = score(p)) => {
  if (p && !pieces.has(p)) pieces.set(p, s);
};
add(W, -3.5);
for (const w of words) {
  add(W + w);
  add(w);
  const chars = Array.from(w);
  for (let k = 2; k <= 4 && k < chars.length; k++) {
    add(chars.slice(0, k).join(""));
    add(chars.slice(-k).join(""));
  }
}
for (let c = 0x21; c < 0x7f; c++) add(String.fromCharCode(c), -9 - (c % 7) / 4);
for (const c of "éèàüöäßçñ") add(c, -11);

const vocab = [
  ["<pad>", 0],
  ["</s>", 0],
  ["<unk>", 0],
];
const bf = variant === "metaspace-bf";
if (bf)
  for (let b = 0; b < 256; b++) vocab.push([`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`, -20]);
for (const [p, s] of pieces) vocab.push([p, s]);

const special = (id, content) => ({
  id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true,
});
const tok = {
  version: "1.0",
  truncation: null,
  padding: null,
  added_tokens: [special(0, "<pad>"), special(1, "</s>"), special(2, "<unk>")],
  normalizer: bf
    ? null
    : variant === "t5"
    ? precompiled
    : variant === "t5-new"
    ? {
        type: "Sequence",
        normalizers: [
          precompiled,
          { type: "Strip", strip_left: false, strip_right: true },
          { type: "Replace", pattern: { Regex: " {2,}" }, content: W },
        ],
      }
    : {
        type: "Sequence",
        normalizers: [
          { type: "Prepend", prepend: W },
          { type: "Replace", pattern: { String: " " }, content: W },
        ],
      },
  pre_tokenizer: bf
    ? { type: "Metaspace", replacement: W, prepend_scheme: "always", split: false }
    : variant === "t5"
    ? {
        type: "Sequence",
        pretokenizers: [
          { type: "WhitespaceSplit" },
          { type: "Metaspace", replacement: W, prepend_scheme: "always", split: true },
        ],
      }
    : variant === "t5-new"
    ? { type: "Metaspace", replacement: W, prepend_scheme: "always", split: true }
    : null,
  post_processor: null,
  decoder: bf || t5
    ? { type: "Metaspace", replacement: W, prepend_scheme: "always", split: false }
    : {
        type: "Sequence",
        decoders: [
          { type: "Replace", pattern: { String: W }, content: " " },
          { type: "ByteFallback" },
          { type: "Fuse" },
          { type: "Strip", content: " ", start: 1, stop: 0 },
        ],
      },
  model: { type: "Unigram", unk_id: 2, vocab, byte_fallback: bf },
};
const cfg = {
  add_bos_token: false,
  add_eos_token: false,
  eos_token: "</s>",
  pad_token: "<pad>",
  unk_token: "<unk>",
  tokenizer_class: "T5Tokenizer",
};
mkdirSync(outDir, { recursive: true });
writeFileSync(`${outDir}/tokenizer.json`, JSON.stringify(tok, null, 1));
writeFileSync(`${outDir}/tokenizer_config.json`, JSON.stringify(cfg, null, 1));

if (t5 && corpusPath) {
  const sep = "\n__ggml_vocab_test__\n";
  const parts = readFileSync(corpusPath, "utf8").split(sep);
  parts.pop();
  const hex = (x) => Buffer.from(x, "utf8").toString("hex");
  writeFileSync(`${outDir}/charsmap-check.txt`, parts.map((x) => hex(x) + "\t" + hex(applyCharsmap(rules, x)) + "\n").join(""));
  // the JS Precompiled normalizer, run per section (between added tokens)
  const tk = new Tokenizer(tok, cfg);
  const pc = variant === "t5" ? tk.normalizer : tk.normalizer.normalizers[0];
  const agree = parts.filter((x) => x.split(/<pad>|<\/s>|<unk>/).every((sec) => pc.normalize(sec) === applyCharsmap(rules, sec)));
  writeFileSync(`${outDir}/corpus.txt`, agree.map((x) => x + sep).join(""));
  console.log(`${variant}: the charsmap agrees with the JS Precompiled normalizer on ${agree.length} of ${parts.length} corpus strings`);
}

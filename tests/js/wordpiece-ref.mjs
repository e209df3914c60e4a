// wordpiece-ref.mjs - writes a BERT-style WordPiece tokenizer.json (+
// tokenizer_config.json) built from the test corpus, for
// tests/test-tokenizer-ref.sh (the reference ids come from
// tokenizer-ref.mjs, i.e. @huggingface/tokenizers).
//
// usage: node wordpiece-ref.mjs OUTDIR VARIANT CORPUS
//   VARIANT "uncased": BertNormalizer (clean_text, handle_chinese_chars,
//           lowercase, strip_accents null = follows lowercase),
//           BertPreTokenizer, max_input_chars_per_word 100;
//   VARIANT "cased": BertNormalizer without lowercase / accent stripping,
//           Sequence[WhitespaceSplit, BertPreTokenizer], "##" pieces,
//           max_input_chars_per_word 12 (long words become [UNK]).
// The vocabulary: [PAD] [UNK] [CLS] [SEP] [MASK], then, from the corpus
// (normalized the way the variant does), the most frequent words, their
// 2..5 character prefixes, "##" + their 1..4 character suffixes, and every
// character seen at least twice alone and as "##c": a few thousand pieces,
// so that words split into several pieces and some are unknown.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";

const [outDir, variant, corpusPath] = process.argv.slice(2);
if (!outDir || !["uncased", "cased"].includes(variant) || !corpusPath) {
  console.error("usage: node wordpiece-ref.mjs OUTDIR uncased|cased CORPUS");
  process.exit(2);
}
const uncased = variant === "uncased";
const parts = readFileSync(corpusPath, "utf8").split("\n__ggml_vocab_test__\n");
parts.pop();
let text = parts.join(" ");
if (uncased) text = text.toLowerCase().normalize("NFD").replace(/\p{Mn}/gu, "");
const words = text.split(/[\s\p{P}\u0021-\u002F\u003A-\u0040\u005B-\u0060\u007B-\u007E]+/u).filter((w) => w);
const freq = new Map();
for (const w of words) freq.set(w, (freq.get(w) ?? 0) + 1);
const byFreq = [...freq.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
const charFreq = new Map();
for (const c of text) charFreq.set(c, (charFreq.get(c) ?? 0) + 1);

const vocab = new Map();
const add = (p) => {
  if (p && !vocab.has(p)) vocab.set(p, vocab.size);
};
for (const s of ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]) add(s);
for (const [c, n] of [...charFreq.entries()].sort((a, b) => (a[0] < b[0] ? -1 : 1)))
  if (n >= 2 && !/\s/u.test(c)) {
    add(c);
    add("##" + c);
  }
for (const [w] of byFreq.slice(0, 600)) add(w);
for (const [w] of byFreq.slice(0, 1500)) {
  const ch = Array.from(w);
  for (let k = 2; k <= 5 && k < ch.length; k++) add(ch.slice(0, k).join(""));
  for (let k = 1; k <= 4 && k < ch.length; k++) add("##" + ch.slice(-k).join(""));
}

const special = (id, content) => ({
  id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true,
});
const tok = {
  version: "1.0",
  truncation: null,
  padding: null,
  added_tokens: ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"].map((s, i) => special(i, s)),
  normalizer: {
    type: "BertNormalizer",
    clean_text: true,
    handle_chinese_chars: true,
    strip_accents: uncased ? null : false,
    lowercase: uncased,
  },
  pre_tokenizer: uncased
    ? { type: "BertPreTokenizer" }
    : { type: "Sequence", pretokenizers: [{ type: "WhitespaceSplit" }, { type: "BertPreTokenizer" }] },
  post_processor: {
    type: "TemplateProcessing",
    single: [{ SpecialToken: { id: "[CLS]", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }, { SpecialToken: { id: "[SEP]", type_id: 0 } }],
    pair: [],
    special_tokens: {
      "[CLS]": { id: "[CLS]", ids: [2], tokens: ["[CLS]"] },
      "[SEP]": { id: "[SEP]", ids: [3], tokens: ["[SEP]"] },
    },
  },
  decoder: { type: "WordPiece", prefix: "##", cleanup: true },
  model: {
    type: "WordPiece",
    unk_token: "[UNK]",
    continuing_subword_prefix: "##",
    max_input_chars_per_word: uncased ? 100 : 12,
    vocab: Object.fromEntries(vocab),
  },
};
const cfg = {
  do_lower_case: uncased,
  cls_token: "[CLS]",
  sep_token: "[SEP]",
  unk_token: "[UNK]",
  pad_token: "[PAD]",
  mask_token: "[MASK]",
  tokenizer_class: "BertTokenizer",
};
mkdirSync(outDir, { recursive: true });
writeFileSync(`${outDir}/tokenizer.json`, JSON.stringify(tok, null, 1));
writeFileSync(`${outDir}/tokenizer_config.json`, JSON.stringify(cfg, null, 1));
console.log(`wordpiece ${variant}: ${vocab.size} pieces`);

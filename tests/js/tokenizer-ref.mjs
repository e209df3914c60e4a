// tokenizer-ref.mjs - reference token ids from @huggingface/tokenizers.
//
// usage: node tokenizer-ref.mjs tokenizer.json tokenizer_config.json CORPUS [--decode]
// CORPUS holds strings separated by "\n__ggml_vocab_test__\n" (the file ends
// with a separator), the format of ../shared/vocab/*.inp. Prints one line
// per string: its ids (no BOS/EOS added; added-token text is recognised),
// each preceded by a space, as tests/test-tokenizer-ref.sh compares with
// `rkmojo tokenize --corpus`.
import { readFileSync } from "node:fs";
import { Tokenizer } from "@huggingface/tokenizers";

const [tokPath, cfgPath, corpusPath] = process.argv.slice(2);
const tokenizer = new Tokenizer(
  JSON.parse(readFileSync(tokPath, "utf8")),
  JSON.parse(readFileSync(cfgPath, "utf8")),
);
// @huggingface/tokenizers' Unigram ignores byte_fallback; the Rust
// reference (tokenizers' Unigram::tokenize) replaces a piece that is not in
// the vocabulary (a fused run of unknown characters) with the <0xXX> tokens
// of its UTF-8 bytes when all of them exist, else <unk>. Do the same here.
const model = tokenizer.model;
if (model.config?.type === "Unigram" && model.config.byte_fallback) {
  const call = model._call.bind(model);
  const hex = (b) => `<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`;
  model._call = (tokens) =>
    call(tokens).flatMap((s) => {
      if (model.tokens_to_ids.has(s)) return [s];
      const bytes = [...Buffer.from(s, "utf8")].map(hex);
      return bytes.every((b) => model.tokens_to_ids.has(b)) ? bytes : [s];
    });
}
// Where the JS port departs from the Rust library (tokenizers, what the
// models' own tokenizer.json files are run with), follow the Rust rules:
//  - WhitespaceSplit splits on Unicode White_Space (Rust's
//    char::is_whitespace); the JS port uses /\S+/ (JavaScript's \s adds
//    U+FEFF and lacks U+0085);
//  - BertNormalizer pads CJK ideographs of every plane (the JS port
//    walks UTF-16 code units, so U+20000.. are never padded) and lowercases
//    character by character (Rust), where JS toLowerCase on the whole string
//    applies the Final_Sigma rule; the Lowercase normalizer likewise.
const WS = /[^\t-\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+/gu;
const lower = (x) => Array.from(x, (c) => c.toLowerCase()).join("");
const isCJK = (cp) =>
  (cp >= 0x4e00 && cp <= 0x9fff) || (cp >= 0x3400 && cp <= 0x4dbf) || (cp >= 0x20000 && cp <= 0x2a6df) ||
  (cp >= 0x2a700 && cp <= 0x2b73f) || (cp >= 0x2b740 && cp <= 0x2b81f) || (cp >= 0x2b820 && cp <= 0x2ceaf) ||
  (cp >= 0xf900 && cp <= 0xfaff) || (cp >= 0x2f800 && cp <= 0x2fa1f);
const patchPre = (p) => {
  if (!p) return;
  if (p.constructor.name === "WhitespaceSplit") p.pre_tokenize_text = (text) => text.match(WS) || [];
  for (const q of p.tokenizers ?? []) patchPre(q);
};
const patchNorm = (n) => {
  if (!n) return;
  if (n.constructor.name === "Lowercase") n.normalize = lower;
  if (n.constructor.name === "BertNormalizer")
    n.normalize = function (text) {
      if (this.config.clean_text) text = this.clean_text(text);
      if (this.config.handle_chinese_chars)
        text = Array.from(text, (c) => (isCJK(c.codePointAt(0)) ? ` ${c} ` : c)).join("");
      if (this.config.lowercase) {
        text = lower(text);
        if (this.config.strip_accents !== false) text = this.strip_accents(text);
      } else if (this.config.strip_accents) {
        text = this.strip_accents(text);
      }
      return text;
    };
  for (const q of n.normalizers ?? []) patchNorm(q);
};
patchPre(tokenizer.pre_tokenizer);
patchNorm(tokenizer.normalizer);
const sep = "\n__ggml_vocab_test__\n";
const parts = readFileSync(corpusPath, "utf8").split(sep);
parts.pop(); // the text after the last separator
// with a 4th argument "--decode": one line per string, the hex of the
// UTF-8 of decode(encode(string)) (no tokenizer-level clean-up; the
// decoder's own rules apply)
const decode = process.argv[5] === "--decode";
const out = [];
for (const s of parts) {
  const { ids } = tokenizer.encode(s, { add_special_tokens: false });
  if (decode)
    out.push(ids.length ? Buffer.from(tokenizer.decode(ids, { clean_up_tokenization_spaces: false }), "utf8").toString("hex") : "");
  else out.push(ids.map((x) => " " + x).join(""));
}
process.stdout.write(out.join("\n") + "\n");

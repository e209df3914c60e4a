// tokenizer-ref.mjs - reference token ids from @huggingface/tokenizers.
//
// usage: node tokenizer-ref.mjs tokenizer.json tokenizer_config.json CORPUS
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
const sep = "\n__ggml_vocab_test__\n";
const parts = readFileSync(corpusPath, "utf8").split(sep);
parts.pop(); // the text after the last separator
const out = [];
for (const s of parts) {
  const { ids } = tokenizer.encode(s, { add_special_tokens: false });
  out.push(ids.map((x) => " " + x).join(""));
}
process.stdout.write(out.join("\n") + "\n");

// pretok-variants.mjs OUTDIR BASE_DIR < pre-types.jsonl
// Writes OUTDIR/<type>/tokenizer.json (+ tokenizer_config.json): the
// byte-level BPE vocabulary of BASE_DIR/tokenizer.json with the regexes of
// one llama.cpp pre-tokenizer type (as `rkmojo tokenize --pre-types` lists
// them) as a Sequence of Isolated Splits before ByteLevel, and the type's
// ignore_merges. Types for a BPE over UTF-8 ("raw") are skipped.
import fs from "node:fs";
import path from "node:path";

const [out, base] = process.argv.slice(2);
const tok = JSON.parse(fs.readFileSync(path.join(base, "tokenizer.json"), "utf8"));
const config = fs.readFileSync(path.join(base, "tokenizer_config.json"), "utf8");
const lines = fs.readFileSync(0, "utf8").split("\n").filter((l) => l.trim());
for (const line of lines) {
  const t = JSON.parse(line);
  if (t.raw) continue;
  const name = t.names[0];
  const v = structuredClone(tok);
  v.pre_tokenizer = {
    type: "Sequence",
    pretokenizers: [
      ...t.regex.map((re) => ({ type: "Split", pattern: { Regex: re }, behavior: "Isolated", invert: false })),
      { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: false },
    ],
  };
  v.model.ignore_merges = t.ignore_merges;
  const dir = path.join(out, name);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, "tokenizer.json"), JSON.stringify(v));
  fs.writeFileSync(path.join(dir, "tokenizer_config.json"), config);
  console.log(name);
}

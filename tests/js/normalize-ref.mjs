// normalize-ref.mjs - reference Unicode normalization from JavaScript's
// String.prototype.normalize (V8 + ICU), for test-tokenizer --norm-check.
//
// usage: node normalize-ref.mjs CORPUS > expected.txt
// Prints one line per case, tab-separated, every string as the hex of its
// UTF-8 bytes:
//   c CP NFC NFD NFKC NFKD   for each code point (no surrogates) where one
//                            of the four forms differs from the character
//                            itself (all others are their own normal form);
//   s INPUT NFC NFD NFKC NFKD for each string of CORPUS (the
//                            "\n__ggml_vocab_test__\n"-separated format)
//                            and for 3000 seeded random strings built from
//                            decomposable characters, combining marks,
//                            Hangul jamo and syllables, and ASCII letters.
// Node's ICU may know a newer Unicode than the C tables; the C side skips
// (and counts) only cases involving code points it considers unassigned.
import { readFileSync } from "node:fs";

const hex = (s) => Buffer.from(s, "utf8").toString("hex");
const forms = ["NFC", "NFD", "NFKC", "NFKD"];
const out = [];
const interesting = [];
for (let cp = 0; cp <= 0x10ffff; cp++) {
  if (cp >= 0xd800 && cp <= 0xdfff) continue;
  const s = String.fromCodePoint(cp);
  const f = forms.map((x) => s.normalize(x));
  if (f.some((x) => x !== s)) {
    out.push(["c", cp.toString(16), ...f.map(hex)].join("\t"));
    interesting.push(s);
  }
}
const strings = [];
if (process.argv[2]) {
  const parts = readFileSync(process.argv[2], "utf8").split("\n__ggml_vocab_test__\n");
  parts.pop();
  strings.push(...parts);
}
// xorshift32, seeded: the same strings on every run
let seed = 0x9e3779b9;
const rnd = (n) => {
  seed ^= seed << 13;
  seed >>>= 0;
  seed ^= seed >>> 17;
  seed ^= seed << 5;
  seed >>>= 0;
  return seed % n;
};
const marks = [];
for (let cp = 0x300; cp < 0x370; cp++) marks.push(String.fromCodePoint(cp));
for (const cp of [0x591, 0x5b0, 0x64b, 0x93c, 0x94d, 0x9bc, 0x1dc0, 0x20d0, 0x302a, 0x3099, 0x309a, 0x1d165, 0x1d16d])
  marks.push(String.fromCodePoint(cp));
const jamo = [];
for (let cp = 0x1100; cp < 0x1113; cp++) jamo.push(String.fromCodePoint(cp));
for (let cp = 0x1161; cp < 0x1176; cp++) jamo.push(String.fromCodePoint(cp));
for (let cp = 0x11a8; cp < 0x11c3; cp++) jamo.push(String.fromCodePoint(cp));
const letters = [..."aeiouAEIOUcnsyzkhw ."];
const pools = [interesting, marks, jamo, letters, ["\uac00", "\ud55c", "\uae00", "\u1e9b", "\u0344", "\u0f73"]];
for (let i = 0; i < 3000; i++) {
  let s = "";
  const len = 1 + rnd(8);
  for (let k = 0; k < len; k++) {
    const p = pools[rnd(pools.length)];
    s += p[rnd(p.length)];
  }
  strings.push(s);
}
for (const s of strings) out.push(["s", hex(s), ...forms.map((x) => hex(s.normalize(x)))].join("\t"));
process.stdout.write(out.join("\n") + "\n");

// charsmap.mjs - builds SentencePiece precompiled_charsmap blobs from a rule
// map, and applies rules the naive way, for the Precompiled normalizer
// tests. Written from the blob layout documented in src/text/charsmap.h
// (u32 trie size, darts-clone style XOR double array, NUL-terminated
// replacement strings); the naive application (try every key length at
// each position, longest first) shares nothing with the C trie walk.
//
// buildCharsmap(rules: Map<string, string>) -> Buffer
// applyCharsmap(rules, text) -> string   (longest match, else one character)
// jsPrecompiledRules() -> Map            (rules that mimic what
//   @huggingface/tokenizers' Precompiled normalizer does: it ignores the
//   charsmap and removes some controls, maps some spaces to ' ', and NFKC;
//   here as per-character rules plus base+mark and half-width kana pairs)

export function buildCharsmap(rules) {
  const strOffset = new Map();
  const strParts = [];
  let off = 0;
  for (const v of rules.values()) {
    if (strOffset.has(v)) continue;
    strOffset.set(v, off);
    const b = Buffer.from(v + "\0", "utf8");
    strParts.push(b);
    off += b.length;
  }
  // byte trie of the keys
  const root = { kids: new Map(), value: -1 };
  for (const [k, v] of rules) {
    let n = root;
    for (const byte of Buffer.from(k, "utf8")) {
      if (!n.kids.has(byte)) n.kids.set(byte, { kids: new Map(), value: -1 });
      n = n.kids.get(byte);
    }
    n.value = strOffset.get(v);
  }
  // double array: node at p with base b = p ^ offset; child c at b ^ c
  // (its unit carries label c), the node's value unit at b (bit 31 set)
  const units = [0];
  const used = new Set([0]);
  const usedBase = new Set();
  const queue = [[root, 0]];
  let searchFrom = 1;
  while (queue.length) {
    const [node, pos] = queue.shift();
    const labels = [...node.kids.keys()].sort((a, b) => a - b);
    const need = node.value >= 0 ? [0, ...labels] : labels;
    if (!need.length) continue;
    while (used.has(searchFrom)) searchFrom++;
    let base = searchFrom ^ need[0];
    for (let cand = searchFrom; ; cand++) {
      base = cand ^ need[0];
      if (base === 0 || usedBase.has(base)) continue;
      if (need.every((l) => !used.has(base ^ l))) break;
    }
    usedBase.add(base);
    const offset = base ^ pos;
    if (offset >= 1 << 21) throw new Error("charsmap too large for this builder");
    units[pos] = (units[pos] | (offset << 10) | (node.value >= 0 ? 1 << 8 : 0)) >>> 0;
    if (node.value >= 0) {
      units[base] = ((1 << 31) | node.value) >>> 0;
      used.add(base);
    }
    for (const l of labels) {
      const idx = base ^ l;
      units[idx] = l;
      used.add(idx);
      queue.push([node.kids.get(l), idx]);
    }
  }
  for (let i = 0; i < units.length; i++) units[i] = units[i] ?? 0;
  const trie = Buffer.alloc(units.length * 4);
  units.forEach((u, i) => trie.writeUInt32LE(u >>> 0, 4 * i));
  const head = Buffer.alloc(4);
  head.writeUInt32LE(trie.length, 0);
  return Buffer.concat([head, trie, ...strParts]);
}

export function applyCharsmap(rules, text) {
  const byKey = new Map();
  let maxLen = 0;
  for (const [k, v] of rules) {
    const kb = Buffer.from(k, "utf8");
    byKey.set(kb.toString("latin1"), Buffer.from(v, "utf8"));
    maxLen = Math.max(maxLen, kb.length);
  }
  const s = Buffer.from(text, "utf8");
  const out = [];
  for (let i = 0; i < s.length; ) {
    let done = false;
    for (let L = Math.min(maxLen, s.length - i); L > 0 && !done; L--) {
      const r = byKey.get(s.subarray(i, i + L).toString("latin1"));
      if (r) {
        out.push(r);
        i += L;
        done = true;
      }
    }
    if (done) continue;
    const b = s[i];
    const len = b < 0x80 ? 1 : b < 0xe0 ? 2 : b < 0xf0 ? 3 : 4;
    out.push(s.subarray(i, i + len));
    i += len;
  }
  return Buffer.concat(out).toString("utf8");
}

export function jsPrecompiledRules() {
  const rules = new Map();
  const removed = /[\u0001-\u0008\u000B\u000E-\u001F\u007F\u008F\u009F]/;
  const spaces = /[\u0009\u000A\u000C\u000D\u00A0\u1680\u2000-\u200F\u2028\u2029\u202F\u205F\u2581\u3000\uFEFF\uFFFD]/;
  const ranges = [
    [0x01, 0x3400],
    [0xf900, 0xfb50],
    [0xfe30, 0xfe70],
    [0xff00, 0xfff0],
    [0x1d400, 0x1d800],
  ];
  for (const [a, b] of ranges)
    for (let cp = a; cp < b; cp++) {
      if (cp >= 0xd800 && cp <= 0xdfff) continue;
      const c = String.fromCodePoint(cp);
      if (removed.test(c)) rules.set(c, "");
      else if (spaces.test(c)) rules.set(c, " ");
      else if (cp !== 0xff5e && c.normalize("NFKC") !== c) rules.set(c, c.normalize("NFKC"));
    }
  // the removed and space characters outside those ranges
  for (const cp of [0xfeff, 0xfffd]) rules.set(String.fromCodePoint(cp), " ");
  // base + combining mark -> the precomposed character NFKC makes of it
  for (const base of "AEIOUCNSYZaeiouncsyz")
    for (let m = 0x300; m <= 0x328; m++) {
      const pair = base + String.fromCodePoint(m);
      const n = pair.normalize("NFKC");
      if ([...n].length === 1) rules.set(pair, n);
    }
  // half-width katakana + (semi-)voiced sound mark -> one full-width kana
  for (let k = 0xff66; k <= 0xff9d; k++)
    for (const mark of ["\uff9e", "\uff9f"]) {
      const pair = String.fromCodePoint(k) + mark;
      const n = pair.normalize("NFKC");
      if ([...n].length === 1) rules.set(pair, n);
    }
  return rules;
}

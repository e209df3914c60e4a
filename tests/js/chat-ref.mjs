// chat-ref.mjs - renders chat templates with @huggingface/jinja (the
// reference) and writes one case per render for tests/test-chat-ref.sh:
//   OUT/NNN.tmpl       template source
//   OUT/NNN.vars.json  variables (messages, add_generation_prompt, ...)
//   OUT/NNN.out        expected render, or OUT/NNN.err (reference failed)
//   OUT/NNN.name       what the case is
// Templates: every chat_template in node_modules' tokenizer_config.json
// files, tests/js/chat-templates/*.jinja, the built-in templates passed as
// extra files on the command line, tests/js/jinja-features.json (small
// templates exercising single features) and seeded random expressions.
//
// usage: node chat-ref.mjs OUT_DIR [EXTRA_TEMPLATE_FILE...]
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Template } from "@huggingface/jinja";

const here = path.dirname(fileURLToPath(import.meta.url));
const out = process.argv[2];
if (!out) {
  console.error("usage: node chat-ref.mjs OUT_DIR [TEMPLATE...]");
  process.exit(2);
}
fs.mkdirSync(out, { recursive: true });

// ---- templates
const templates = []; // {name, src, bos, eos}
function tokenStr(t) {
  if (t == null) return undefined;
  return typeof t === "string" ? t : t.content;
}
function walk(dir, depth) {
  if (depth > 6) return;
  let ents;
  try { ents = fs.readdirSync(dir, { withFileTypes: true }); } catch { return; }
  for (const e of ents) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) walk(p, depth + 1);
    else if (e.name === "tokenizer_config.json") {
      let cfg;
      try { cfg = JSON.parse(fs.readFileSync(p, "utf8")); } catch { continue; }
      const rel = path.relative(here, p);
      const add = (name, src) => templates.push({ name, src, bos: tokenStr(cfg.bos_token), eos: tokenStr(cfg.eos_token) });
      if (typeof cfg.chat_template === "string") add(rel, cfg.chat_template);
      else if (Array.isArray(cfg.chat_template))
        for (const t of cfg.chat_template) if (t && typeof t.template === "string") add(`${rel}#${t.name}`, t.template);
    }
  }
}
walk(path.join(here, "node_modules"), 0);
const nReal = templates.length;
const tdir = path.join(here, "chat-templates");
if (fs.existsSync(tdir))
  for (const f of fs.readdirSync(tdir).sort())
    if (f.endsWith(".jinja")) templates.push({ name: `chat-templates/${f}`, src: fs.readFileSync(path.join(tdir, f), "utf8"), bos: "<s>", eos: "</s>" });
for (const f of process.argv.slice(3))
  templates.push({ name: path.basename(f), src: fs.readFileSync(f, "utf8"), bos: "<s>", eos: "</s>" });

// ---- conversations
const tricky = "Quotes ' \" and \\ backslash, {{ not_a_var }} {% raw %} <|im_start|>, tabs\tand\nnew\nlines, unicode é 中文 😀 ﷽ , trailing spaces   ";
const conversations = {
  user_only: [{ role: "user", content: "Hello!" }],
  system_user: [
    { role: "system", content: "You are a helpful assistant." },
    { role: "user", content: "What is 2+2?" },
  ],
  multi_turn: [
    { role: "system", content: "Be brief." },
    { role: "user", content: "Hi" },
    { role: "assistant", content: "Hello! How can I help?" },
    { role: "user", content: "Tell me a joke." },
    { role: "assistant", content: "Why did the chicken cross the road?" },
    { role: "user", content: "Why?" },
  ],
  no_system_multi: [
    { role: "user", content: "  leading and trailing whitespace \n\n" },
    { role: "assistant", content: "\nOK\n" },
    { role: "user", content: tricky },
  ],
  special_chars: [
    { role: "system", content: "System with \"quotes\" and 'apostrophes'\nand a second line" },
    { role: "user", content: tricky },
  ],
  empty_content: [
    { role: "user", content: "" },
    { role: "assistant", content: "" },
    { role: "user", content: "x" },
  ],
  thinking: [
    { role: "user", content: "Solve it" },
    { role: "assistant", content: "<think>\nLet me think.\n</think>\n\nThe answer is 4." },
    { role: "user", content: "Thanks" },
  ],
  tools: [
    { role: "user", content: "Weather in Paris?" },
    {
      role: "assistant", content: "",
      tool_calls: [{ type: "function", function: { name: "get_weather", arguments: { city: "Paris", unit: "celsius", days: 3 } } }],
    },
    { role: "tool", content: "{\"temp\": 21.5, \"sky\": \"clear\"}" },
    { role: "assistant", content: "It is 21.5 °C and clear." },
  ],
  content_parts: [
    { role: "system", content: [{ type: "text", text: "Sys part" }] },
    { role: "user", content: [{ type: "image" }, { type: "text", text: "  Describe this.  " }] },
    { role: "assistant", content: [{ type: "text", text: "A cat." }] },
  ],
  bad_alternation: [
    { role: "user", content: "one" },
    { role: "user", content: "two" },
  ],
};
const toolsList = [{
  type: "function",
  function: {
    name: "get_weather", description: "Get the weather",
    parameters: { type: "object", properties: { city: { type: "string" }, days: { type: "integer" } }, required: ["city"] },
  },
}];

let n = 0;
function emit(name, src, vars) {
  const id = String(n++).padStart(4, "0");
  const base = path.join(out, id);
  fs.writeFileSync(base + ".tmpl", src);
  fs.writeFileSync(base + ".vars.json", JSON.stringify(vars));
  fs.writeFileSync(base + ".name", name);
  try {
    const r = new Template(src).render(vars);
    fs.writeFileSync(base + ".out", r);
  } catch (e) {
    fs.writeFileSync(base + ".err", String(e && e.message));
  }
}

for (const t of templates) {
  for (const [cname, msgs] of Object.entries(conversations)) {
    for (const agp of [false, true]) {
      const vars = { messages: msgs, add_generation_prompt: agp };
      if (t.bos !== undefined) vars.bos_token = t.bos;
      if (t.eos !== undefined) vars.eos_token = t.eos;
      if (cname === "tools") vars.tools = toolsList;
      emit(`${t.name} / ${cname} / agp=${agp}`, t.src, vars);
    }
  }
  // template-specific switches
  emit(`${t.name} / enable_thinking=false`, t.src, { messages: conversations.thinking, add_generation_prompt: true, enable_thinking: false, bos_token: t.bos, eos_token: t.eos });
  // gpt-oss's harmony switches: reasoning effort, built-in tools, identity,
  // a developer message and an assistant turn with its analysis ("thinking")
  emit(`${t.name} / harmony`, t.src, {
    messages: [
      { role: "developer", content: "Answer in French." },
      { role: "user", content: "Weather in Paris?" },
      { role: "assistant", thinking: "The user wants weather; call the tool.", content: "",
        tool_calls: [{ type: "function", function: { name: "get_weather", arguments: "{\"city\": \"Paris\"}" } }] },
      { role: "tool", content: "sunny" },
      { role: "assistant", thinking: "Now answer.", content: "Il fait beau." },
      { role: "user", content: "Merci" },
    ],
    tools: toolsList, add_generation_prompt: true, reasoning_effort: "high", builtin_tools: ["browser", "python"],
    model_identity: "You are a test model.", bos_token: t.bos, eos_token: t.eos,
  });
}

const featFile = path.join(here, "jinja-features.json");
let nFeat = 0;
if (fs.existsSync(featFile)) {
  for (const f of JSON.parse(fs.readFileSync(featFile, "utf8"))) {
    emit(`feature: ${f.name}`, f.template, f.vars || {});
    nFeat++;
  }
}

// ---- random expressions (seeded, so every run checks the same cases):
// combinations of literals, variables, filters, tests, operators and
// methods that the hand-written features do not pair up.
function mulberry32(a) {
  return () => {
    a |= 0; a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rnd = mulberry32(20261129);
const pick = (xs) => xs[Math.floor(rnd() * xs.length)];
const rvars = {
  s: "Hello World", u: "héllo 😀 中文", e: "", ws: "  a b  ", n: 3, m: -2, f: 2.5, z: 0, big: 12345678901,
  t: true, fl: false, nn: null, xs: [3, 1, 2], ys: ["b", "A", "c"], em: [], d: { k: "v", a: 1, b: [1, 2] },
  ed: {}, ms: [{ role: "user", content: "hi" }, { role: "assistant", content: "yo", x: 1 }],
  nested: { a: { b: { c: 5 } } }, fs: [1.5, 2.0, -0.5],
};
const atoms = [...Object.keys(rvars), "'lit'", '"dq"', "1", "0", "-1", "2.0", "0.5", "true", "false", "none", "[1, 'a']", "{'x': 1}", "(1, 2)", "''", "range(3)"];
const filters = ["length", "upper", "lower", "title", "capitalize", "trim", "first", "last", "list", "string", "int", "float", "abs",
  "tojson", "tojson(indent=2)", "join", "join(', ')", "reverse", "sort", "unique", "items", "default('D')", "default('D', true)",
  "safe", "indent", "indent(2, true)", "replace('l', 'L')", "map(attribute='role')", "selectattr('role', 'equalto', 'user')",
  "rejectattr('x')", "dictsort", "sort(reverse=true)"];
const tests = ["defined", "undefined", "none", "string", "number", "integer", "mapping", "iterable", "sequence", "boolean", "true",
  "false", "odd", "even", "lower", "upper", "callable"];
const binops = ["+", "-", "*", "/", "//", "%", "**", "~", "==", "!=", "<", ">", "<=", ">=", "in", "not in", "and", "or"];
const methods = ["upper()", "lower()", "strip()", "title()", "split()", "split('l')", "startswith('H')", "endswith('d')",
  "replace('o', '0')", "lstrip()", "rstrip()", "capitalize()", "get('k')", "get('zz', 7)", "keys()", "values()", "items()", "length"];
const suffixes = [".k", "[0]", "[-1]", "[1:]", "[::-1]", ".content", "['a']", ".length"];
function rexpr(d) {
  const r = rnd();
  if (d > 1 || r < 0.35) return pick(atoms) + (rnd() < 0.3 ? pick(suffixes) : "");
  if (r < 0.5) return `${rexpr(d + 1)} | ${pick(filters)}`;
  if (r < 0.6) return `${rexpr(d + 1)} is ${rnd() < 0.3 ? "not " : ""}${pick(tests)}`;
  if (r < 0.8) return `(${rexpr(d + 1)} ${pick(binops)} ${rexpr(d + 1)})`;
  if (r < 0.9) return `${pick(["s", "u", "ws", "d", "e", "nn"])}.${pick(methods)}`;
  if (r < 0.95) return `(${rexpr(d + 1)} if ${rexpr(d + 1)} else ${rexpr(d + 1)})`;
  return `not ${rexpr(d + 1)}`;
}
function rstmt(d) {
  const r = rnd();
  if (d > 2 || r < 0.4) return "{{ " + rexpr(0) + " }}" + pick(["", " ", "\n", "|"]);
  if (r < 0.55) return "{% if " + rexpr(0) + " %}" + rstmt(d + 1) + "{% else %}" + rstmt(d + 1) + "{% endif %}";
  if (r < 0.7) return "{% for x in " + pick(["xs", "ys", "ms", "d", "em", "range(3)", "d.items()", "s", "nn"]) + " %}{{ x }}{{ loop.index }}" + rstmt(d + 1) + "{% else %}E{% endfor %}";
  if (r < 0.8) return "{% set v = " + rexpr(0) + " %}{{ v }}";
  if (r < 0.9) return pick(["  {%- if true -%}  x  {%- endif -%}  ", "\n  {% if true %}\n  y\n  {% endif %}\n", "{# c #}", " {{- 'a' -}} "]);
  return rstmt(d + 1) + rstmt(d + 1);
}
const nRandom = 600;
for (let i = 0; i < nRandom; i++) emit(`random #${i}`, rstmt(0), rvars);
console.log(`${n} cases: ${templates.length} templates (${nReal} from node_modules), ${nFeat} feature templates, ${nRandom} random expressions`);

// server-openai.mjs - drives a running `rkmojo serve` with the official
// OpenAI Node SDK (tests/js/node_modules/openai): models list, chat
// completions (plain and streamed, which must agree token for token under
// greedy decoding), stream usage, completions, embeddings, and errors
// surfacing as the SDK's typed exceptions.
//
// usage: node server-openai.mjs BASE_URL API_KEY MODEL
// Prints one line per check; exits 1 if any failed.
import OpenAI from 'openai';

const [base, apiKey, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey, maxRetries: 0, timeout: 120000 });
let failed = 0;
function check(cond, what, extra) {
  console.log(`${cond ? 'ok  ' : 'FAIL'} ${what}${extra !== undefined ? ': ' + JSON.stringify(extra) : ''}`);
  if (!cond) failed++;
}

const messages = [
  { role: 'system', content: 'You are a terse assistant.' },
  { role: 'user', content: 'Name three colors.' },
];

// models list
const models = await client.models.list();
const ids = models.data.map((m) => m.id);
check(ids.includes(model), 'models.list contains the model', ids);
check(models.data.every((m) => m.object === 'model'), 'models have object "model"');

// non-streaming chat
const plain = await client.chat.completions.create({ model, messages, temperature: 0, max_tokens: 24 });
const text = plain.choices[0].message.content;
check(plain.object === 'chat.completion', 'chat object', plain.object);
check(plain.choices[0].message.role === 'assistant', 'assistant role');
check(typeof text === 'string', 'content is a string');
check(['stop', 'length'].includes(plain.choices[0].finish_reason), 'finish_reason', plain.choices[0].finish_reason);
check(plain.usage.prompt_tokens > 0, 'usage.prompt_tokens > 0', plain.usage);
check(plain.usage.completion_tokens > 0 && plain.usage.completion_tokens <= 24, 'completion_tokens in 1..24', plain.usage);
check(plain.usage.total_tokens === plain.usage.prompt_tokens + plain.usage.completion_tokens, 'total_tokens');
check(typeof plain.usage.prompt_tokens_details?.cached_tokens === 'number', 'cached_tokens reported');

// streaming chat: same greedy output, usage chunk when asked
const stream = await client.chat.completions.create({
  model, messages, temperature: 0, max_tokens: 24, stream: true, stream_options: { include_usage: true },
});
let streamed = '', roleSeen = false, finish = null, usage = null, chunks = 0;
for await (const chunk of stream) {
  chunks++;
  if (chunk.usage) usage = chunk.usage;
  for (const c of chunk.choices) {
    if (c.delta?.role === 'assistant') roleSeen = true;
    if (c.delta?.content) streamed += c.delta.content;
    if (c.finish_reason) finish = c.finish_reason;
  }
}
check(chunks >= 2, 'several stream chunks', chunks);
check(roleSeen, 'stream announces the assistant role');
check(streamed === text, 'streamed text equals the non-streamed text', { streamed, text });
check(finish === plain.choices[0].finish_reason, 'stream finish_reason', finish);
check(usage && usage.completion_tokens === plain.usage.completion_tokens, 'stream usage chunk', usage);

// the same request without include_usage has no usage chunk
const s2 = await client.chat.completions.create({ model, messages, temperature: 0, max_tokens: 4, stream: true });
let usage2 = null;
for await (const chunk of s2) if (chunk.usage) usage2 = chunk.usage;
check(usage2 === null, 'no usage chunk unless asked');

// stop sequence: the text ends before it
if (text.length > 4) {
  const stopAt = text.slice(2, 4);
  const st = await client.chat.completions.create({ model, messages, temperature: 0, max_tokens: 24, stop: [stopAt] });
  const t2 = st.choices[0].message.content;
  check(!t2.includes(stopAt) && text.startsWith(t2) && st.choices[0].finish_reason === 'stop',
        'stop sequence cuts the text', { stopAt, t2 });
}

// seeded sampling is reproducible
const a = await client.chat.completions.create({ model, messages, temperature: 0.9, seed: 42, max_tokens: 16 });
const b = await client.chat.completions.create({ model, messages, temperature: 0.9, seed: 42, max_tokens: 16 });
check(a.choices[0].message.content === b.choices[0].message.content, 'same seed, same text');

// legacy completions
const comp = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 8, temperature: 0 });
check(comp.object === 'text_completion' && typeof comp.choices[0].text === 'string', 'completions', comp.object);
check(comp.usage.completion_tokens > 0, 'completions usage');

// embeddings (the SDK asks for base64 and decodes it)
const emb = await client.embeddings.create({ model, input: ['hello world', 'goodbye'] });
check(emb.data.length === 2, 'two embeddings');
const v = emb.data[0].embedding;
const norm = Math.sqrt(v.reduce((s, x) => s + x * x, 0));
check(v.length > 0 && Math.abs(norm - 1) < 1e-3, 'embedding is unit length', { dim: v.length, norm });
const embf = await client.embeddings.create({ model, input: 'hello world', encoding_format: 'float' });
const maxdiff = Math.max(...embf.data[0].embedding.map((x, i) => Math.abs(x - v[i])));
check(maxdiff < 1e-6, 'float and base64 encodings agree', maxdiff);
// dimensions: the first N values, renormalised; more than the model has is a 400
const short = await client.embeddings.create({ model, input: 'hello world', dimensions: 16, encoding_format: 'float' });
const sv = short.data[0].embedding;
const snorm = Math.sqrt(sv.reduce((s, x) => s + x * x, 0));
const ratio = sv.map((x, i) => x / embf.data[0].embedding[i]);
check(sv.length === 16 && Math.abs(snorm - 1) < 1e-5 && ratio.every((r) => Math.abs(r - ratio[0]) < 1e-4 * Math.abs(ratio[0])),
  'dimensions 16: the first 16 values, unit length', { len: sv.length, snorm });
try {
  await client.embeddings.create({ model, input: 'x', dimensions: v.length + 1 });
  check(false, 'too many dimensions refused');
} catch (e) {
  check(e.status === 400 && /dimensions/.test(e.message), 'dimensions over the model\'s -> 400', e.message);
}
// one model by id
const one = await client.models.retrieve(model);
check(one.id === model && one.object === 'model', 'models.retrieve', one);
try {
  await client.models.retrieve('no-such-model');
  check(false, 'unknown model id rejected');
} catch (e) {
  check(e instanceof OpenAI.NotFoundError && e.code === 'model_not_found', 'unknown model id -> 404 model_not_found', e.code);
}

// logprobs: one entry per generated token, its text joining to the reply,
// log-probabilities <= 0, the sampled token among the top ones under
// greedy decoding, alternatives sorted; streamed, the same entries
{
  const r = await client.chat.completions.create({ model, messages, temperature: 0, max_tokens: 12, logprobs: true, top_logprobs: 3 });
  const lc = r.choices[0].logprobs?.content ?? [];
  const joined = lc.map((e) => e.token).join('');
  check(lc.length === r.usage.completion_tokens && joined === r.choices[0].message.content, 'logprobs: one entry per token, texts join to the reply',
    { n: lc.length, joined, content: r.choices[0].message.content });
  check(lc.every((e) => e.logprob <= 0 && e.top_logprobs.length === 3 && e.top_logprobs[0].token === e.token &&
    Math.abs(e.top_logprobs[0].logprob - e.logprob) < 1e-6 && e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob &&
    e.top_logprobs[1].logprob >= e.top_logprobs[2].logprob && Array.isArray(e.bytes)),
    'logprobs: greedy picks the top alternative; alternatives sorted, <= 0', lc[0]);
  const st = await client.chat.completions.create({ model, messages, temperature: 0, max_tokens: 12, logprobs: true, top_logprobs: 3, stream: true });
  const got = [];
  for await (const c of st) for (const e of c.choices[0]?.logprobs?.content ?? []) got.push(e);
  check(JSON.stringify(got.map((e) => [e.token, e.logprob])) === JSON.stringify(lc.map((e) => [e.token, e.logprob])),
    'logprobs streamed equal the non-streamed ones', got.length);
  const cp = await client.completions.create({ model, prompt: 'The quick brown fox', temperature: 0, max_tokens: 6, logprobs: 2 });
  const lg = cp.choices[0].logprobs;
  check(lg && lg.tokens.length === cp.usage.completion_tokens && lg.token_logprobs.every((x) => x <= 0) &&
    lg.top_logprobs.every((m) => Object.keys(m).length >= 1 && Object.keys(m).length <= 2) && lg.tokens.join('') === cp.choices[0].text,
    'completions logprobs: tokens, token_logprobs, top_logprobs maps', lg);
}

// structured outputs: with random weights, every reply must still be JSON
// the schema describes (the grammar holds the sampler to it)
const person = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 10 },
    age: { type: 'integer' },
    pets: { type: 'array', items: { enum: ['cat', 'dog'] }, maxItems: 2 },
  },
  required: ['name', 'age'],
  additionalProperties: false,
};
function isPerson(o) {
  return o && typeof o === 'object' && !Array.isArray(o) && typeof o.name === 'string' && [...o.name].length <= 10 &&
    Number.isInteger(o.age) && Object.keys(o).every((k) => ['name', 'age', 'pets'].includes(k)) &&
    (o.pets === undefined || (Array.isArray(o.pets) && o.pets.length <= 2 && o.pets.every((p) => p === 'cat' || p === 'dog')));
}
for (const [i, temperature] of [0, 0.7, 1.2].entries()) {
  const r = await client.chat.completions.create({
    model, messages, temperature, seed: 11 + i, max_tokens: 200,
    response_format: { type: 'json_schema', json_schema: { name: 'person', strict: true, schema: person } },
  });
  let o = null;
  try { o = JSON.parse(r.choices[0].message.content); } catch { /* checked below */ }
  check(isPerson(o) && r.choices[0].finish_reason === 'stop', `json_schema reply is schema-valid (temperature ${temperature})`,
    r.choices[0].message.content);
}
{
  let acc = '';
  const stream = await client.chat.completions.create({
    model, messages, temperature: 1, seed: 5, max_tokens: 200, stream: true,
    response_format: { type: 'json_schema', json_schema: { name: 'person', schema: person } },
  });
  for await (const c of stream) acc += c.choices[0]?.delta?.content ?? '';
  let o = null;
  try { o = JSON.parse(acc); } catch { /* checked below */ }
  check(isPerson(o), 'json_schema streamed reply is schema-valid', acc);
  // json_object: every reply that ends by itself (not cut by max_tokens:
  // a random model may write a long string) is a JSON object; of six
  // seeds, some end
  let ended = 0, bad = null;
  for (let seed = 1; seed <= 6; seed++) {
    const jo = await client.chat.completions.create({
      model, messages, temperature: 1, seed, max_tokens: 200, response_format: { type: 'json_object' },
    });
    if (jo.choices[0].finish_reason !== 'stop') continue;
    ended++;
    let v = null;
    try { v = JSON.parse(jo.choices[0].message.content); } catch { /* checked below */ }
    if (!(v !== null && typeof v === 'object' && !Array.isArray(v))) bad = jo.choices[0].message.content;
  }
  check(ended > 0 && bad === null, 'json_object replies that end are JSON objects', { ended, bad });
}
try {
  await client.chat.completions.create({
    model, messages, max_tokens: 8,
    response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', pattern: '^a+$' } } },
  });
  check(false, 'an unsupported schema keyword is refused');
} catch (e) {
  check(e.status === 400 && /'pattern' is not supported/.test(e.message), 'unsupported schema keyword -> 400 naming it', e.message);
}

// errors are typed by the SDK
try {
  await client.chat.completions.create({ model, messages: [], max_tokens: 4 });
  check(false, 'empty messages rejected');
} catch (e) {
  check(e instanceof OpenAI.BadRequestError && e.status === 400, 'empty messages -> 400 BadRequestError', e.status);
}
try {
  await client.chat.completions.create({ model, messages, temperature: 7 });
  check(false, 'temperature 7 rejected');
} catch (e) {
  check(e.status === 400 && /temperature/.test(e.message), 'out-of-range temperature -> 400 naming the field', e.message);
}
const bad = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'wrong-key', maxRetries: 0 });
try {
  await bad.models.list();
  check(false, 'wrong key rejected');
} catch (e) {
  check(e instanceof OpenAI.AuthenticationError && e.status === 401, 'wrong key -> 401 AuthenticationError', e.status);
}

console.log(failed ? `${failed} failed` : 'all passed');
process.exit(failed ? 1 : 0);

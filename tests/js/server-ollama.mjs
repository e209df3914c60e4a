// server-ollama.mjs - drives a running `rkmojo serve` with the official
// Ollama JS client (tests/js/node_modules/ollama): tags, show, ps, chat and
// generate (streamed NDJSON and not, which must agree under greedy
// decoding), embed, options, keep_alive, and errors as ResponseError.
//
// usage: node server-ollama.mjs BASE_URL API_KEY MODEL
// Prints one line per check; exits 1 if any failed.
import { Ollama } from 'ollama';

const [base, apiKey, model] = process.argv.slice(2);
const ollama = new Ollama({ host: base, headers: { Authorization: `Bearer ${apiKey}` } });
let failed = 0;
function check(cond, what, extra) {
  console.log(`${cond ? 'ok  ' : 'FAIL'} ${what}${extra !== undefined ? ': ' + JSON.stringify(extra) : ''}`);
  if (!cond) failed++;
}

// tags
const tags = await ollama.list();
const names = tags.models.map((m) => m.name);
check(names.includes(`${model}:latest`), 'list has the model', names);
check(tags.models.every((m) => m.size > 0 && m.details?.format === 'rkmojo'), 'sizes and details');

// show
const show = await ollama.show({ model });
check(typeof show.details?.family === 'string' && show.details.family.length > 0, 'show details.family', show.details);
check(show.model_info && show.model_info['general.architecture'] === show.details.family, 'show model_info');

const opts = { temperature: 0, num_predict: 20 };
const messages = [{ role: 'user', content: 'Why is the sky blue?' }];

// chat, not streamed
const chat = await ollama.chat({ model, messages, options: opts, stream: false });
check(chat.done === true && chat.message.role === 'assistant', 'chat done, assistant message');
check(typeof chat.message.content === 'string', 'chat content');
check(chat.prompt_eval_count > 0 && chat.eval_count > 0 && chat.eval_count <= 20, 'chat counts',
      { p: chat.prompt_eval_count, e: chat.eval_count });
check(chat.total_duration > 0 && ['stop', 'length'].includes(chat.done_reason), 'chat timings and done_reason', chat.done_reason);

// chat, streamed: same text
const stream = await ollama.chat({ model, messages, options: opts, stream: true });
let streamed = '', last = null, parts = 0;
for await (const part of stream) {
  parts++;
  streamed += part.message.content;
  last = part;
}
check(parts >= 2, 'several NDJSON parts', parts);
check(last && last.done === true && last.eval_count === chat.eval_count, 'last part is done with counts');
check(streamed === chat.message.content, 'streamed chat equals non-streamed', { streamed, plain: chat.message.content });

// generate, both ways
const gen = await ollama.generate({ model, prompt: 'The capital of France is', options: opts, stream: false });
check(gen.done === true && typeof gen.response === 'string', 'generate done');
const gstream = await ollama.generate({ model, prompt: 'The capital of France is', options: opts, stream: true });
let gtext = '';
for await (const part of gstream) gtext += part.response;
check(gtext === gen.response, 'streamed generate equals non-streamed', { gtext, plain: gen.response });

// raw generate differs from templated generate (the template is applied)
const raw = await ollama.generate({ model, prompt: 'The capital of France is', raw: true, options: opts, stream: false });
check(raw.prompt_eval_count < gen.prompt_eval_count, 'raw prompt is shorter than the templated one',
      { raw: raw.prompt_eval_count, templated: gen.prompt_eval_count });

// ps shows the loaded model
const ps = await ollama.ps();
check(ps.models.some((m) => m.name === `${model}:latest`), 'ps lists the loaded model', ps.models.map((m) => m.name));

// embed
const emb = await ollama.embed({ model, input: ['a', 'b c'] });
check(emb.embeddings.length === 2 && emb.embeddings[0].length > 0, 'embed returns two vectors');
const n0 = Math.sqrt(emb.embeddings[0].reduce((s, x) => s + x * x, 0));
check(Math.abs(n0 - 1) < 1e-3, 'embed vectors are unit length', n0);

// version
const ver = await ollama.version();
check(typeof ver.version === 'string' && ver.version.length > 0, 'version', ver);

// keep_alive 0 unloads after the request
await ollama.generate({ model, prompt: '', keep_alive: 0 });
const ps2 = await ollama.ps();
check(ps2.models.length === 0, 'keep_alive 0 unloads the model', ps2.models.map((m) => m.name));

// errors
try {
  await ollama.chat({ model: 'no-such-model', messages, stream: false });
  check(false, 'unknown model rejected');
} catch (e) {
  check(e.status_code === 404 && /not found/.test(e.error), 'unknown model -> 404', { s: e.status_code, e: e.error });
}
try {
  await ollama.chat({ model, messages, options: { temperature: 'hot' }, stream: false });
  check(false, 'bad option rejected');
} catch (e) {
  check(e.status_code === 400 && /temperature/.test(e.error), 'bad option -> 400 naming it', e.error);
}

// logprobs
{
  const r = await ollama.chat({ model, messages, stream: false, logprobs: true, top_logprobs: 2, options: { temperature: 0, num_predict: 10 } });
  const lp = r.logprobs ?? [];
  check(lp.length === r.eval_count && lp.map((e) => e.token).join('') === r.message.content &&
    lp.every((e) => e.logprob <= 0 && e.top_logprobs.length === 2 && e.top_logprobs[0].token === e.token),
    'logprobs: one per token, greedy picks the top one', lp[0]);
}

// structured outputs: format "json" and a schema, valid JSON even from
// random weights; an unsupported keyword is a 400 naming it
const schema = {
  type: 'object',
  properties: { city: { type: 'string', maxLength: 12 }, rain: { type: 'boolean' } },
  required: ['city', 'rain'],
  additionalProperties: false,
};
for (const [i, temperature] of [0, 1].entries()) {
  const r = await ollama.chat({ model, messages, stream: false, format: schema, options: { temperature, seed: 3 + i, num_predict: 200 } });
  let o = null;
  try { o = JSON.parse(r.message.content); } catch { /* checked below */ }
  check(o && typeof o.city === 'string' && [...o.city].length <= 12 && typeof o.rain === 'boolean' && Object.keys(o).length === 2,
    `format schema: reply is schema-valid (temperature ${temperature})`, r.message.content);
}
{
  const r = await ollama.generate({ model, prompt: 'JSON please', stream: false, format: 'json', options: { temperature: 1, seed: 9, num_predict: 200 } });
  let o = null;
  try { o = JSON.parse(r.response); } catch { /* checked below */ }
  check(o !== null && typeof o === 'object' && !Array.isArray(o), 'format "json": the reply is a JSON object', r.response);
}
try {
  await ollama.chat({ model, messages, stream: false, format: { type: 'integer', minimum: 3 } });
  check(false, 'unsupported schema keyword refused');
} catch (e) {
  check(e.status_code === 400 && /'minimum' is not supported/.test(e.error), 'unsupported schema keyword -> 400 naming it', e.error);
}

console.log(failed ? `${failed} failed` : 'all passed');
process.exit(failed ? 1 : 0);

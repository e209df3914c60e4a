// server-tools.mjs - tool calls and structured output through real
// clients against a running `rkmojo serve` whose model has random weights
// and Qwen2.5's chat template: the official `openai` and `ollama` npm
// clients and LangChain JS (@langchain/openai, @langchain/ollama:
// bindTools, withStructuredOutput). With tool_choice required or named, or
// a schema, the grammar holds even random weights to a parseable call (or
// object) whose arguments match the tool's schema, so every check below
// is on real output, not on a recorded one.
//
// usage: node server-tools.mjs BASE_URL MODEL
// Prints one line per check; exits 1 if any failed.
import OpenAI from 'openai';
import { Ollama } from 'ollama';
import { ChatOpenAI } from '@langchain/openai';
import { ChatOllama } from '@langchain/ollama';
import { HumanMessage } from '@langchain/core/messages';

const [base, model] = process.argv.slice(2);
let failed = 0;
function check(cond, what, extra) {
  console.log(`${cond ? 'ok  ' : 'FAIL'} ${what}${extra !== undefined ? ': ' + JSON.stringify(extra) : ''}`);
  if (!cond) failed++;
}

// small bounds so random weights finish a call well inside max_tokens
const params = {
  type: 'object',
  properties: { city: { type: 'string', maxLength: 8 }, days: { type: 'integer', enum: [1, 2, 3] } },
  required: ['city', 'days'],
  additionalProperties: false,
};
const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'The weather in a city', parameters: params } },
  { type: 'function', function: { name: 'get_time', description: 'The time now', parameters: { type: 'object', properties: {} } } },
];
// the schema's rules, checked here independently of the server
function weatherArgsOk(a) {
  return a !== null && typeof a === 'object' && Object.keys(a).sort().join(',') === 'city,days' &&
    typeof a.city === 'string' && [...a.city].length <= 8 && [1, 2, 3].includes(a.days);
}
function callOk(name, args) {
  if (name === 'get_weather') return weatherArgsOk(args);
  return name === 'get_time' && args !== null && typeof args === 'object' && Object.keys(args).length === 0;
}
const messages = [{ role: 'user', content: 'What is the weather in Paris for two days?' }];

// ------------------------------------------------------------- openai
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'none', maxRetries: 0, timeout: 120000 });

const req = await client.chat.completions.create({
  model, messages, tools, tool_choice: 'required', parallel_tool_calls: false, temperature: 0, max_tokens: 400,
});
const m = req.choices[0].message;
check(req.choices[0].finish_reason === 'tool_calls', 'openai required: finish_reason tool_calls', req.choices[0].finish_reason);
check(m.content === null, 'openai required: content null beside the call', m.content);
check(Array.isArray(m.tool_calls) && m.tool_calls.length === 1, 'openai required: one call (parallel_tool_calls false)', m.tool_calls);
const c0 = m.tool_calls?.[0];
let a0 = null;
try { a0 = JSON.parse(c0.function.arguments); } catch { /* checked below */ }
check(c0?.type === 'function' && /^call_/.test(c0.id) && callOk(c0.function.name, a0),
  'openai required: a named tool, arguments a JSON string matching its schema', c0);

const named = { type: 'function', function: { name: 'get_weather' } };
const plainNamed = await client.chat.completions.create({
  model, messages, tools, tool_choice: named, parallel_tool_calls: false, temperature: 0, max_tokens: 400,
});
const pc = plainNamed.choices[0].message.tool_calls ?? [];
check(pc.length === 1 && pc.every((c) => c.function.name === 'get_weather' && weatherArgsOk(JSON.parse(c.function.arguments))),
  'openai named: only get_weather, arguments valid', pc);

// streamed: deltas by index add up to the same calls as the plain reply
const stream = await client.chat.completions.create({
  model, messages, tools, tool_choice: named, parallel_tool_calls: false, temperature: 0, max_tokens: 400, stream: true,
});
const acc = [];
let finish = null, text = '';
for await (const chunk of stream) {
  const ch = chunk.choices[0];
  if (!ch) continue;
  if (ch.finish_reason) finish = ch.finish_reason;
  if (ch.delta?.content) text += ch.delta.content;
  for (const d of ch.delta?.tool_calls ?? []) {
    acc[d.index] ??= { id: '', name: '', arguments: '' };
    if (d.id) acc[d.index].id = d.id;
    if (d.function?.name) acc[d.index].name += d.function.name;
    if (d.function?.arguments) acc[d.index].arguments += d.function.arguments;
  }
}
check(finish === (plainNamed.choices[0].finish_reason) && finish === 'tool_calls', 'openai stream: finish_reason tool_calls', finish);
check(text === '', 'openai stream: no content beside the calls', text);
check(acc.length === pc.length && acc.every((c, i) => c.name === pc[i].function.name && c.arguments === pc[i].function.arguments),
  'openai stream: the same calls as the plain reply (greedy)', { acc, pc });

// parallel calls: a weak model goes on calling until max_tokens; every
// finished call is returned, the cut one is not
const par = await client.chat.completions.create({ model, messages, tools, tool_choice: 'required', temperature: 0, max_tokens: 300 });
const parc = par.choices[0].message.tool_calls ?? [];
check(parc.length >= 2 && parc.every((c) => callOk(c.function.name, JSON.parse(c.function.arguments))) &&
  new Set(parc.map((c) => c.id)).size === parc.length, 'openai parallel: several valid calls, distinct ids', parc.length);

// the call and its result passed back: the next turn takes them
const turn2 = await client.chat.completions.create({
  model, tools, temperature: 0, max_tokens: 4,
  messages: [...messages, m, { role: 'tool', tool_call_id: c0?.id, content: '{"temp_c": 21}' }],
});
check(turn2.usage.prompt_tokens > req.usage.prompt_tokens + 10, 'openai: the earlier call and the tool result reach the prompt',
  [req.usage.prompt_tokens, turn2.usage.prompt_tokens]);

// a schema keyword the grammar cannot hold: a 400 naming it
try {
  await client.chat.completions.create({
    model, messages, tool_choice: 'required', max_tokens: 4,
    tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { s: { type: 'string', pattern: 'a+' } } } } }],
  });
  check(false, 'openai: an unsupported schema keyword in a required tool is refused');
} catch (e) {
  check(e.status === 400 && /pattern/.test(e.message), 'openai: an unsupported schema keyword in a required tool is a 400 naming it', e.message);
}

// ------------------------------------------------------------- ollama
const ollama = new Ollama({ host: base });
const o1 = await ollama.chat({ model, messages, tools, tool_choice: 'required', parallel_tool_calls: false, stream: false, options: { temperature: 0, num_predict: 400 } });
const oc = o1.message.tool_calls ?? [];
check(oc.length >= 1 && oc.every((c) => callOk(c.function.name, c.function.arguments)),
  'ollama: message.tool_calls with arguments as an object matching the schema', oc);
check(o1.done_reason === 'stop', 'ollama: done_reason stop after tool calls', o1.done_reason);
const o2 = await ollama.chat({ model, messages, tools, tool_choice: 'required', parallel_tool_calls: false, stream: true, options: { temperature: 0, num_predict: 400 } });
const ostream = [];
for await (const part of o2) for (const c of part.message?.tool_calls ?? []) ostream.push(c);
check(JSON.stringify(ostream.map((c) => c.function)) === JSON.stringify(oc.map((c) => c.function)),
  'ollama stream: the same calls in the streamed lines', ostream);

// ---------------------------------------------------------- langchain
const lc = new ChatOpenAI({ model, apiKey: 'none', configuration: { baseURL: `${base}/v1` }, temperature: 0, maxTokens: 400, maxRetries: 0 });
const bound = lc.bindTools([tools[0]], { tool_choice: 'get_weather', parallel_tool_calls: false });
const ai = await bound.invoke([new HumanMessage('Weather in Oslo?')]);
check(ai.tool_calls?.length >= 1 && ai.tool_calls.every((c) => c.name === 'get_weather' && weatherArgsOk(c.args)),
  'langchain ChatOpenAI.bindTools: tool_calls with schema-valid args', ai.tool_calls);
for (const method of ['jsonSchema', 'functionCalling']) {
  const so = lc.withStructuredOutput({ title: 'weather', ...params }, { method, name: 'weather' });
  const obj = await so.invoke('Weather in Rome?');
  check(weatherArgsOk(obj), `langchain ChatOpenAI.withStructuredOutput (${method}): an object matching the schema`, obj);
}
const lo = new ChatOllama({ model, baseUrl: base, temperature: 0, numPredict: 400 });
const sol = await lo.withStructuredOutput({ title: 'weather', ...params }, { method: 'jsonSchema' }).invoke('Weather in Rome?');
check(weatherArgsOk(sol), 'langchain ChatOllama.withStructuredOutput: an object matching the schema', sol);
const plainLo = await lo.invoke('Weather?');
const toolLo = await lo.bindTools([tools[0]]).invoke('Weather?');
check(toolLo.response_metadata?.prompt_eval_count > plainLo.response_metadata?.prompt_eval_count,
  'langchain ChatOllama.bindTools: the tools reach the prompt',
  [plainLo.response_metadata?.prompt_eval_count, toolLo.response_metadata?.prompt_eval_count]);

process.exit(failed ? 1 : 0);

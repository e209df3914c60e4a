// server-vision.mjs - images through a running `rkmojo serve` with the
// official clients: OpenAI's image_url content parts (data: URIs) and
// Ollama's images (base64), in chat and generate, each reply equal under
// greedy decoding to what `rkmojo run` makes of the same prompt (given on
// the command line, worked out by test-server-vision.sh); a repeated
// request reuses the held image (cached tokens reported, same text); bad
// images (an http URL, not base64, not an image, a truncated PNG, a
// 20000x20000 or a 1x1 image, a GIF, more markers than images, a model
// without a vision tower) are 400s naming the problem, and the server
// answers normally afterwards.
//
// usage: node server-vision.mjs BASE_URL MODEL TEXT_ONLY_MODEL IMAGE.png
//        CHAT_REF GEN_REF OLLAMA_CHAT_REF
// Prints one line per check; exits 1 if any failed.
import { readFileSync } from 'node:fs';
import OpenAI from 'openai';
import { Ollama } from 'ollama';

const [base, model, textOnly, imagePath, chatRef, genRef, ochatRef] = process.argv.slice(2);
const b64 = readFileSync(imagePath).toString('base64');
const dataUri = `data:image/png;base64,${b64}`;
const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'none', maxRetries: 0 });
const ollama = new Ollama({ host: base });
let failed = 0;
function check(cond, what, extra) {
  console.log(`${cond ? 'ok  ' : 'FAIL'} ${what}${extra !== undefined ? ': ' + JSON.stringify(extra) : ''}`);
  if (!cond) failed++;
}
async function status400(what, fn, needle) {
  try {
    await fn();
    check(false, `${what}: refused`);
  } catch (e) {
    const msg = String(e?.error?.message ?? e?.message ?? e);
    check((e.status ?? e.status_code) === 400 && msg.includes(needle), `${what}: 400`, msg);
  }
}

// OpenAI chat: text, an image, text
const parts = [
  { type: 'text', text: 'What is in ' },
  { type: 'image_url', image_url: { url: dataUri } },
  { type: 'text', text: ' this?' },
];
const req = { model, messages: [{ role: 'user', content: parts }], temperature: 0, max_tokens: 12 };
const c1 = await openai.chat.completions.create(req);
check(c1.choices[0].message.content === chatRef, 'openai image_url chat equals rkmojo run --chat',
      { got: c1.choices[0].message.content, want: chatRef });
const c2 = await openai.chat.completions.create(req);
const cached = c2.usage?.prompt_tokens_details?.cached_tokens ?? 0;
check(cached >= c1.usage.prompt_tokens - 1, 'the repeated request reuses the image', { cached, prompt: c1.usage.prompt_tokens });
check(c2.choices[0].message.content === c1.choices[0].message.content, 'and says the same');
// streamed: the same text
const st = await openai.chat.completions.create({ ...req, stream: true });
let streamed = '';
for await (const ch of st) streamed += ch.choices[0]?.delta?.content ?? '';
check(streamed === chatRef, 'streamed image chat equals', streamed);

// Ollama generate (raw) and chat with images
const g = await ollama.generate({ model, prompt: 'Look: ', images: [b64], raw: true, stream: false,
                                  options: { temperature: 0, num_predict: 12 } });
check(g.response === genRef, 'ollama generate with images equals rkmojo run', { got: g.response, want: genRef });
const oc = await ollama.chat({ model, messages: [{ role: 'user', content: 'Describe it.', images: [b64] }], stream: false,
                              options: { temperature: 0, num_predict: 12 } });
check(oc.message.content === ochatRef, 'ollama chat with images equals rkmojo run --chat', { got: oc.message.content, want: ochatRef });

// bad input: 400s, named
await status400('an http image URL', () => openai.chat.completions.create({ model, messages: [{ role: 'user', content: [
  { type: 'image_url', image_url: { url: 'https://example.com/cat.png' } }] }] }), 'serve --image-urls');
await status400('not base64', () => ollama.generate({ model, prompt: 'x', images: ['!!!'], stream: false }), 'not valid base64');
await status400('not an image', () => ollama.generate({ model, prompt: 'x', images: [Buffer.from('hello world, no image').toString('base64')],
                                                          stream: false }), 'not an image');
await status400('a truncated PNG', () => ollama.generate({ model, prompt: 'x', images: [readFileSync(imagePath).subarray(0, 200).toString('base64')],
                                                             stream: false }), 'image 0');
// a PNG of w x h whose header is all there is (the decoder's limits are
// checked from it: a 20000x20000 image, a decompression bomb's shape, is
// refused before any pixel is inflated)
function pngHeader(w, h) {
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (b) => { let c = 0xffffffff; for (const x of b) c = crcTable[(c ^ x) & 0xff] ^ (c >>> 8); return (c ^ 0xffffffff) >>> 0; };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0); ihdr.writeUInt32BE(h, 4); ihdr[8] = 8; ihdr[9] = 2;
  const body = Buffer.concat([Buffer.from('IHDR'), ihdr]);
  const len = Buffer.alloc(4); len.writeUInt32BE(13);
  const c = Buffer.alloc(4); c.writeUInt32BE(crc(body));
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), len, body, c]);
}
await status400('a 20000x20000 image', () => ollama.generate({ model, prompt: 'x', images: [pngHeader(20000, 20000).toString('base64')],
                                                                 stream: false }), 'image 0');
await status400('a 1x1 image', () => ollama.generate({ model, prompt: 'x', images: [pngHeader(1, 1).toString('base64')],
                                                         stream: false }), 'image 0');
await status400('a GIF', () => ollama.generate({ model, prompt: 'x', images: [Buffer.from('GIF89a\x01\x00\x01\x00').toString('base64')],
                                                   stream: false }), 'gif images are not supported');
await status400('more markers than images', () => ollama.generate({ model, prompt: 'a <__media__> b', images: [b64], stream: false }),
                '2 image markers');
await status400('a model without a vision tower', () => ollama.generate({ model: textOnly, prompt: 'x', images: [b64], stream: false }),
                'no vision tower');
// and the server goes on
const c3 = await openai.chat.completions.create(req);
check(c3.choices[0].message.content === chatRef, 'after the errors, the same answer');

process.exit(failed ? 1 : 0);

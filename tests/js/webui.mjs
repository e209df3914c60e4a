// webui.mjs - the chat page served at / by `rkmojo serve`, driven in
// headless Chromium (Debian's chromium, through puppeteer-core): the page
// loads with the server's models, a message sent from the text box gets a
// streamed reply equal to the API's own greedy reply, Stop ends a long
// reply, conversations survive a reload (localStorage), and the renderer
// shows markdown code blocks, folded reasoning and tool calls while page
// text stays text (no HTML injection). Takes a screenshot.
//
// usage: node webui.mjs BASE_URL MODEL SCREENSHOT.png
// Prints one line per check; exits 1 if any failed.
import puppeteer from 'puppeteer-core';
import fs from 'node:fs';

const [base, model, shot] = process.argv.slice(2);
let failed = 0;
function check(cond, what, extra) {
  console.log(`${cond ? 'ok  ' : 'FAIL'} ${what}${extra !== undefined ? ': ' + JSON.stringify(extra).slice(0, 300) : ''}`);
  if (!cond) failed++;
}
const exe = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => fs.existsSync(p));
const browser = await puppeteer.launch({
  executablePath: exe, headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'],
});
try {
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  await page.setViewport({ width: 1100, height: 760 });
  await page.goto(base + '/', { waitUntil: 'load' });
  check((await page.title()) === 'rkmojo', 'the page loads', await page.title());
  await page.waitForFunction(() => document.querySelectorAll('#model option').length > 0, { timeout: 20000 });
  const models = await page.$$eval('#model option', (os) => os.map((o) => o.value));
  check(models.includes(model), 'the model list comes from /v1/models', models);
  await page.select('#model', model);

  // greedy settings through the settings panel
  await page.click('#gear');
  for (const [id, v] of [['temperature', '0'], ['max_tokens', '24']]) {
    await page.$eval('#' + id, (el, v) => { el.value = v; el.dispatchEvent(new Event('change')); }, v);
  }
  await page.type('#input', 'Hello there, who are you?');
  await page.keyboard.press('Enter');
  await page.waitForSelector('.msg.assistant[data-done="1"]', { timeout: 60000 });
  const conv = await page.evaluate(() => JSON.parse(localStorage.getItem('rkmojo.convs')));
  const reply = conv[0].messages[1];
  const api = await (await fetch(base + '/v1/chat/completions', {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'Hello there, who are you?' }], temperature: 0, top_p: 0.95, max_tokens: 24 }),
  })).json();
  check(reply.content.length > 0 && reply.content === api.choices[0].message.content,
    'the streamed reply in the page equals the API reply (greedy)', [reply.content, api.choices[0].message.content]);
  const shown = await page.$eval('.msg.assistant .stats', (e) => e.textContent);
  check(/tokens\/s/.test(shown), 'the reply shows its speed', shown);
  check(conv[0].title.startsWith('Hello there'), 'the conversation is listed by its first message', conv[0].title);

  // Stop: a long reply ends when asked, the server frees up
  await page.$eval('#max_tokens', (el) => { el.value = '4000'; el.dispatchEvent(new Event('change')); });
  await page.type('#input', 'Tell me a long story.');
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => { const m = [...document.querySelectorAll('.msg.assistant')].pop(); return m && m.textContent.length > 40; }, { timeout: 30000 });
  await page.click('#stop');
  await page.waitForSelector('.msg.assistant:last-child[data-done="1"]', { timeout: 30000 });
  const last = await page.$eval('.msg.assistant:last-child', (e) => e.querySelector('.err')?.textContent || e.textContent.slice(-80));
  check(last === 'stopped', 'Stop ends the reply', last);
  let idle = false;
  for (let i = 0; i < 100 && !idle; i++) {
    idle = !(await (await fetch(base + '/health')).json()).busy;
    if (!idle) await new Promise((r) => setTimeout(r, 100));
  }
  check(idle, 'the server is idle after Stop');

  // a reload keeps the conversations; the renderer on a stored one
  await page.evaluate(() => {
    const c = { id: 'x1', title: 'render', messages: [
      { role: 'user', content: '<img src=x onerror="window.pwned=1"> hi' },
      { role: 'assistant', reasoning: 'step **one**', content: 'Some **bold** and `code`:\n```c\nint main(void) { return 1 < 2; }\n```\n- a\n- b',
        tool_calls: [{ id: 'c', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
    ] };
    const all = JSON.parse(localStorage.getItem('rkmojo.convs'));
    all.unshift(c);
    localStorage.setItem('rkmojo.convs', JSON.stringify(all));
    localStorage.setItem('rkmojo.cur', JSON.stringify('x1'));
  });
  await page.reload({ waitUntil: 'load' });
  await page.waitForSelector('.msg.assistant');
  const r = await page.evaluate(() => ({
    convs: document.querySelectorAll('#convs li').length,
    code: document.querySelector('.msg.assistant pre code')?.textContent,
    lang: document.querySelector('.msg.assistant pre code')?.dataset.lang,
    bold: document.querySelector('.msg.assistant .body > p strong')?.textContent,
    folded: !document.querySelector('.msg.assistant details.reasoning')?.open,
    reasoning: document.querySelector('.msg.assistant details.reasoning')?.textContent,
    tool: document.querySelector('.msg.assistant .tool')?.textContent,
    items: document.querySelectorAll('.msg.assistant li').length,
    img: document.querySelectorAll('.msg img').length,
    pwned: window.pwned === 1,
    userText: document.querySelector('.msg.user')?.textContent,
  }));
  check(r.convs === 2, 'both conversations listed after a reload', r.convs);
  check(r.code === 'int main(void) { return 1 < 2; }' && r.lang === 'c', 'a fenced code block, its text intact', r);
  check(r.bold === 'bold' && r.items === 2, 'markdown bold and lists', r);
  check(r.folded && /step one/.test(r.reasoning), 'the reasoning is folded', r.reasoning);
  check(r.tool === '\u2192 get_weather({"city":"Paris"})', 'the tool call is shown', r.tool);
  check(r.img === 0 && !r.pwned && r.userText.includes('<img src=x'), 'message text is shown as text, never run as HTML', r);
  await page.screenshot({ path: shot });

  // CORS in a real browser: a page at another loopback origin may call the
  // API (its preflight and reply carry the headers), a page with an
  // opaque origin may not read it
  const other = await browser.newPage();
  const port = new URL(base).port;
  await other.goto(`http://localhost:${port}/health`, { waitUntil: 'load' }); // a document without the page's CSP
  const cross = await other.evaluate(async (u) => {
    try {
      const r = await fetch(u + '/v1/chat/completions', { method: 'POST', headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 }) });
      return r.status;
    } catch (e) { return 'blocked: ' + e.message; }
  }, base);
  check(cross === 200, 'a page at a loopback origin calls the API through CORS', cross);
  await other.goto('about:blank');
  const opaque = await other.evaluate(async (u) => {
    try { const r = await fetch(u + '/v1/models'); return 'read ' + r.status; } catch (e) { return 'blocked'; }
  }, base);
  check(opaque === 'blocked', 'a page with an opaque origin cannot read the API', opaque);
  await other.close();
  check(fs.statSync(shot).size > 5000, 'a screenshot', fs.statSync(shot).size);
  check(errors.length === 0, 'no errors in the page', errors);
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);

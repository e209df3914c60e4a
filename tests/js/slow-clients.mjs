// slow-clients.mjs - a bounded slow-client attack on a running `rkmojo
// serve` started with --header-timeout H --max-conn-per-addr C: N
// connections from 127.0.0.2 each send a request head one header line at a
// time, never finishing it, while a normal client on 127.0.0.1 keeps
// asking /health and a generation. The normal client must get every
// answer; the server must cut every slow connection once its head is late;
// a connection over the per-address cap that does send a whole head gets
// a 503.
//
// usage: node slow-clients.mjs BASE_URL N SECONDS CAP
// Prints one line per check; exits 1 if any failed.
import net from 'node:net';

const [base, nStr, secStr, capStr] = process.argv.slice(2);
const url = new URL(base);
const N = Number(nStr), SECONDS = Number(secStr), CAP = Number(capStr);
let failed = 0;
function check(cond, what, extra) {
  console.log(`${cond ? 'ok  ' : 'FAIL'} ${what}${extra !== undefined ? ': ' + JSON.stringify(extra) : ''}`);
  if (!cond) failed++;
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// the attackers
let closedByServer = 0, opened = 0;
const timers = [];
const socks = [];
for (let i = 0; i < N; i++) {
  const s = net.connect({ host: url.hostname, port: Number(url.port), localAddress: '127.0.0.2' });
  socks.push(s);
  s.on('connect', () => {
    opened++;
    s.write('GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n');
    timers.push(setInterval(() => { if (!s.destroyed) s.write(`X-Slow-${i}: ${Date.now()}\r\n`); }, 500));
  });
  s.on('error', () => {});
  s.on('close', () => { closedByServer++; });
}

// over the cap: a whole head, answered 503 at once
await sleep(300);
const over = await new Promise((resolve) => {
  const s = net.connect({ host: url.hostname, port: Number(url.port), localAddress: '127.0.0.2' }, () => {
    s.write('GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
  });
  let got = '';
  s.on('data', (d) => { got += d; });
  s.on('close', () => resolve(got.split('\r\n')[0]));
  s.on('error', () => resolve('error'));
  setTimeout(() => { s.destroy(); resolve(got.split('\r\n')[0] || 'no answer'); }, 5000);
});
check(N >= CAP && over === 'HTTP/1.1 503 Service Unavailable', `a whole head over the cap of ${CAP} gets 503`, over);

// the normal client, meanwhile
let asked = 0, answered = 0, worst = 0;
const t0 = Date.now();
while (Date.now() - t0 < SECONDS * 1000) {
  const t = Date.now();
  asked += 2;
  try {
    const h = await fetch(base + '/health');
    if (h.status === 200) answered++;
    const r = await fetch(base + '/v1/completions', {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ prompt: 'Hello', max_tokens: 2, temperature: 0 }),
    });
    if (r.status === 200 && (await r.json()).choices) answered++;
  } catch (e) { /* counted as unanswered */ }
  worst = Math.max(worst, Date.now() - t);
  await sleep(200);
}
check(asked > 0 && answered === asked, 'the normal client got every answer during the attack', { asked, answered, worst_ms: worst });
check(opened === N, `all ${N} slow connections were accepted (none starved the listener)`, opened);
check(closedByServer === N, 'the server cut every slow connection once its head was late', closedByServer);
for (const t of timers) clearInterval(t);
for (const s of socks) s.destroy();
process.exit(failed ? 1 : 0);

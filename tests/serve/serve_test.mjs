// End-to-end tests of `k3host serve` with the official OpenAI client (npm `openai`) and raw
// HTTP, on the tiny synthetic checkpoint. Each case starts its own server(s) on a free
// loopback port, and stops them with SIGINT (asserting exit code 0).
//
//   node serve_test.mjs --exe K3HOST --src SOURCE_DIR --work SCRATCH --case NAME
//
// Cases: chat, reuse, cancel, errors, queue, shipped (the shipped fortune model instead of
// tiny), batch, cluster (a model split over ranks under --mpirun MPIRUN). Exit 0 pass, 1 fail, 77 skipped (no openai
// module: tools/install-deps.sh --with-npm).
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';

const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => (a.startsWith('--') ? [...acc, [a.slice(2), all[i + 1]]] : acc), []));
const { exe, src, work } = args;
const testCase = args.case;

let OpenAI;
try {
  ({ default: OpenAI } = await import('openai'));
} catch {
  console.log('SKIP: the npm package openai is missing (tools/install-deps.sh --with-npm)');
  process.exit(77);
}

const servers = [];
function fail(msg) {
  console.error('FAIL: ' + msg);
  for (const s of servers) {
    console.error(`--- server ${s.name} stderr:\n${s.stderr}`);
    s.proc.kill('SIGKILL');
  }
  process.exit(1);
}
function check(cond, msg) { if (!cond) fail(msg); }
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A watchdog: no case may run forever.
setTimeout(() => fail('the case took longer than 240 s'), 240_000).unref();

function makeModel() {
  const dir = path.join(work, 'model');
  fs.rmSync(work, { recursive: true, force: true });
  fs.mkdirSync(work, { recursive: true });
  const r = spawnSync(exe, ['make-model', '-g', path.join(src, 'configs/models/tiny.yaml'), '-o', dir], { encoding: 'utf8' });
  check(r.status === 0, `make-model failed: ${r.stderr}`);
  return dir;
}

/** Starts `k3host serve` on port 0 (under `launcher`, e.g. mpirun, when given); resolves once /health is 200. */
async function startServer(name, model, extra = [], env = {}, launcher = []) {
  const argv = ['serve', '--config', path.join(src, 'configs/default.yaml'), '--set', `model.path=${model}`,
    '--set', 'model.generate_if_missing=false', '--set', 'memory.context=2048', '--set', 'threads=1',
    '--port', '0', ...extra];
  const [program, ...front] = launcher.length ? [...launcher, exe] : [exe];
  const proc = spawn(program, [...front, ...argv], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const s = { name, proc, stderr: '', port: 0, exited: null };
  servers.push(s);
  proc.stderr.on('data', (d) => { s.stderr += d.toString(); });
  proc.on('exit', (code, sig) => { s.exited = { code, sig }; });
  for (let i = 0; i < 600 && !s.port; ++i) {
    const m = s.stderr.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
    if (m) s.port = Number(m[1]);
    else if (s.exited) fail(`server ${name} exited early (${JSON.stringify(s.exited)})`);
    else await sleep(50);
  }
  check(s.port > 0, `server ${name} printed no port`);
  for (let i = 0; i < 600; ++i) {
    const r = await request(s, 'GET', '/health');
    if (r.status === 200) return s;
    check(r.status === 503, `/health while loading: ${r.status}`);
    await sleep(50);
  }
  fail(`server ${name} never became healthy`);
}

async function stopServer(s, { underMpirun = false } = {}) {
  s.proc.kill('SIGINT');
  for (let i = 0; i < 200 && !s.exited; ++i) await sleep(50);
  check(s.exited, `server ${s.name} did not stop within 10 s of SIGINT`);
  if (underMpirun) {
    // mpirun itself exits 1 once it has forwarded a signal, whatever its ranks return (Open
    // MPI 4.1); that every rank ended cleanly shows in their lines.
    check(/\[serve\] info: stopped/.test(s.stderr) && !/ends with exit code|\] error:/.test(s.stderr),
          `server ${s.name}: its ranks did not all end cleanly after SIGINT`);
  } else {
    check(s.exited.code === 0, `server ${s.name} exit code ${JSON.stringify(s.exited)} after SIGINT, expected 0`);
  }
  servers.splice(servers.indexOf(s), 1);
}

/** Raw HTTP: resolves {status, body, json}. */
function request(s, method, urlPath, body, headers = {}) {
  return new Promise((resolve) => {
    const req = http.request({ host: '127.0.0.1', port: s.port, method, path: urlPath, headers, agent: false }, (res) => {
      let data = '';
      res.on('data', (d) => { data += d; });
      res.on('end', () => {
        let j = null;
        try { j = JSON.parse(data); } catch { /* not JSON */ }
        resolve({ status: res.statusCode, body: data, json: j, headers: res.headers });
      });
    });
    req.on('error', (e) => resolve({ status: 0, body: String(e), json: null }));
    if (body !== undefined) req.write(body);
    req.end();
  });
}

function client(s, apiKey = 'unused') {
  return new OpenAI({ baseURL: `http://127.0.0.1:${s.port}/v1`, apiKey, maxRetries: 0, timeout: 120_000 });
}

async function metric(s, name) {
  const r = await request(s, 'GET', '/metrics');
  const m = r.body.match(new RegExp(`^${name} (\\S+)$`, 'm'));
  check(m, `/metrics has no ${name}:\n${r.body}`);
  return Number(m[1]);
}

function checkError(r, status, what) {
  check(r.status === status, `${what}: status ${r.status}, expected ${status}: ${r.body}`);
  const e = r.json && r.json.error;
  check(e && typeof e.message === 'string' && e.message.length > 0 && typeof e.type === 'string' &&
        'param' in e && 'code' in e, `${what}: not an OpenAI error object: ${r.body}`);
  return e;
}

/** Collects a streamed chat completion into the shape of a non-streamed one. */
async function collectChat(stream) {
  let content = '', reasoning = '', finish = null, usage = null, role = null, chunks = 0;
  for await (const c of stream) {
    ++chunks;
    if (c.usage) usage = c.usage;
    if (!c.choices.length) continue;
    const d = c.choices[0].delta;
    if (d.role) role = d.role;
    if (d.content) content += d.content;
    if (d.reasoning_content) reasoning += d.reasoning_content;
    if (c.choices[0].finish_reason) finish = c.choices[0].finish_reason;
  }
  return { content, reasoning, finish, usage, role, chunks };
}

// Reads through the throttle decorator with tiny budgets, so the trunk and the experts
// stream and every token waits for storage: a generation that holds the model for seconds.
const slowStorage = ['--set', 'storage.plugin=throttle', '--set', 'storage.params.latency_us=3000',
  '--set', 'memory.trunk_gb=0.00005', '--set', 'memory.expert_cache_gb=0.00005'];

const conversation = [
  { role: 'system', content: 'You are a helpful assistant.' },
  { role: 'user', content: 'Name three primary colors and explain why they are called primary.' },
];

// ---------------------------------------------------------------------------------------

async function caseChat(model) {
  const s = await startServer('chat', model);
  const ai = client(s);
  const models = await ai.models.list();
  check(models.data.length === 1 && models.data[0].id === 'model', `models: ${JSON.stringify(models.data)}`);

  const params = { model: 'model', messages: conversation, max_tokens: 24, temperature: 0 };
  const a = await ai.chat.completions.create(params);
  const msg = a.choices[0].message;
  check(a.object === 'chat.completion' && msg.role === 'assistant', `shape: ${JSON.stringify(a)}`);
  check(typeof msg.content === 'string' && typeof msg.reasoning_content === 'string', `fields: ${JSON.stringify(msg)}`);
  check(a.usage.completion_tokens >= 1 && a.usage.completion_tokens <= 24, `completion_tokens ${a.usage.completion_tokens}`);
  check(a.usage.total_tokens === a.usage.prompt_tokens + a.usage.completion_tokens, 'total_tokens');
  check(['stop', 'length'].includes(a.choices[0].finish_reason), `finish_reason ${a.choices[0].finish_reason}`);
  check(a.usage.completion_tokens < 24 || a.choices[0].finish_reason === 'length', 'length finish at max_tokens');

  // The same request streamed: the deltas add up to the same message, token counts equal.
  const b = await collectChat(await ai.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } }));
  check(b.role === 'assistant', 'first delta carries the role');
  check(b.content === msg.content, `streamed content ${JSON.stringify(b.content)} != ${JSON.stringify(msg.content)}`);
  check(b.reasoning === msg.reasoning_content, `streamed reasoning ${JSON.stringify(b.reasoning)} != ${JSON.stringify(msg.reasoning_content)}`);
  check(b.finish === a.choices[0].finish_reason, `stream finish ${b.finish}`);
  check(b.usage && b.usage.completion_tokens === a.usage.completion_tokens && b.usage.prompt_tokens === a.usage.prompt_tokens,
        `stream usage ${JSON.stringify(b.usage)} vs ${JSON.stringify(a.usage)}`);
  // Sent again, the prompt resumes from the snapshot before its last token.
  check(b.usage.prompt_tokens_details.cached_tokens === a.usage.prompt_tokens - 1,
        `a repeated prompt reuses all but its last token: ${JSON.stringify(b.usage)}`);

  // Text completions, plain and streamed, agree; a stop string cuts the text before it.
  const cp = { model: 'model', prompt: 'The three primary colors are', max_tokens: 16, temperature: 0 };
  const c = await ai.completions.create(cp);
  check(c.object === 'text_completion' && typeof c.choices[0].text === 'string', `completion: ${JSON.stringify(c)}`);
  let streamed = '';
  for await (const ch of await ai.completions.create({ ...cp, stream: true })) streamed += ch.choices.length ? ch.choices[0].text : '';
  check(streamed === c.choices[0].text, `streamed text ${JSON.stringify(streamed)} != ${JSON.stringify(c.choices[0].text)}`);
  const text = c.choices[0].text;
  const cut = [...text].slice(3, 5).join('');  // two characters from inside the text
  if (cut.length > 0 && !cut.includes('\ufffd')) {
    const d = await ai.completions.create({ ...cp, stop: [cut] });
    check(d.choices[0].text === text.slice(0, text.indexOf(cut)), `stop ${JSON.stringify(cut)}: ${JSON.stringify(d.choices[0].text)}`);
    check(d.choices[0].finish_reason === 'stop', `stop finish_reason ${d.choices[0].finish_reason}`);
  }
  // Tools declared, a call and its result in the history: rendered and answered.
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather for a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
  const withTools = await ai.chat.completions.create({ model: 'model', max_tokens: 4, temperature: 0, tools, tool_choice: 'auto',
    messages: [...conversation,
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
      { role: 'tool', tool_call_id: 'call_a', content: '{"temp": 21}' }] });
  check(withTools.usage.prompt_tokens > a.usage.prompt_tokens, 'the tools and the call are part of the prompt');
  // Thinking off: no reasoning_content, and a shorter prompt (no effort message).
  const noThink = await ai.chat.completions.create({ ...params, reasoning_effort: 'none' });
  check(!('reasoning_content' in noThink.choices[0].message), `reasoning_content with thinking off: ${JSON.stringify(noThink.choices[0].message)}`);
  check(noThink.usage.prompt_tokens < a.usage.prompt_tokens, 'thinking off drops the effort message');
  // Seeded sampling repeats itself.
  const sp = { ...params, temperature: 0.9, top_p: 0.9, seed: 7 };
  const s1 = await ai.chat.completions.create(sp), s2 = await ai.chat.completions.create(sp);
  check(s1.choices[0].message.content === s2.choices[0].message.content &&
        s1.choices[0].message.reasoning_content === s2.choices[0].message.reasoning_content, 'the same seed gives the same reply');
  check(await metric(s, 'k3_requests_total') >= 7, 'requests counted');
  check(await metric(s, 'k3_generated_tokens_total') > 0, 'tokens counted');
  await stopServer(s);
}

async function caseReuse(model) {
  const warm = await startServer('warm', model, ['--snapshot-interval', '64']);
  const cold = await startServer('cold', model, ['--no-prefix-reuse']);
  const params = { model: 'model', max_tokens: 20, temperature: 0 };
  let messages = [...conversation];
  for (let turn = 1; turn <= 3; ++turn) {
    const a = await client(warm).chat.completions.create({ ...params, messages });
    const b = await client(cold).chat.completions.create({ ...params, messages });
    const cached = a.usage.prompt_tokens_details.cached_tokens;
    check(b.usage.prompt_tokens_details.cached_tokens === 0, `cold server reused ${b.usage.prompt_tokens_details.cached_tokens}`);
    check(a.usage.prompt_tokens === b.usage.prompt_tokens, 'same prompt tokens');
    // Exactness: resuming from a saved state gives what a full prefill gives.
    check(JSON.stringify(a.choices[0].message) === JSON.stringify(b.choices[0].message) &&
          a.usage.completion_tokens === b.usage.completion_tokens,
          `turn ${turn}: reused ${JSON.stringify(a.choices[0].message)} != cold ${JSON.stringify(b.choices[0].message)}`);
    if (turn > 1) {
      check(cached > 0, `turn ${turn}: no prompt tokens reused`);
      check(cached >= messages.prevPrompt, `turn ${turn}: reused ${cached}, less than the previous prompt's ${messages.prevPrompt}`);
      check(cached < a.usage.prompt_tokens, 'the new user message is prefilled');
    }
    const reply = a.choices[0].message;
    const prev = a.usage.prompt_tokens;
    messages = [...messages, { role: 'assistant', content: reply.content },
      { role: 'user', content: `Thanks. Now tell me more, part ${turn + 1}.` }];
    messages.prevPrompt = prev;
  }
  // The streamed form of a resumed turn gives the same reply too.
  const s = await collectChat(await client(warm).chat.completions.create({ ...params, messages, stream: true, stream_options: { include_usage: true } }));
  const c = await client(cold).chat.completions.create({ ...params, messages });
  check(s.content === c.choices[0].message.content && s.reasoning === c.choices[0].message.reasoning_content,
        'streamed resumed turn equals the cold one');
  check(s.usage.prompt_tokens_details.cached_tokens > 0, 'streamed turn reused tokens');
  check(await metric(warm, 'k3_cached_prompt_tokens_total') > 0, 'metrics count reused tokens');
  // No --parallel: the plan chose the slots, the most (8) on the tiny model, and says so.
  check(await metric(warm, 'k3_sequences_parallel') === 8, 'the plan\'s default of 8 sequence slots');
  check(/8 sequences decoded together \(serve\.parallel auto\)/.test(warm.stderr), 'the log names the plan\'s slots');
  check(await metric(warm, 'k3_prefix_snapshots') > 0, 'snapshots kept');
  check(await metric(cold, 'k3_cached_prompt_tokens_total') === 0, 'cold server reused nothing');
  // Prefetch hits are requests too, and never counted as hits.
  check(await metric(cold, 'k3_prefetch_hits_total') + await metric(cold, 'k3_expert_hits_total') <=
        await metric(cold, 'k3_expert_requests_total'), 'prefetch hits and hits within the requests');
  await stopServer(warm);
  await stopServer(cold);
}

/** A completions request (prompt ids) that runs to max_tokens: found, not assumed. */
async function longRequest(s, maxTokens) {
  for (let seed = 1; seed <= 20; ++seed) {
    const prompt = Array.from({ length: 8 }, (_, i) => (seed * 37 + i * 11) % 500);
    const r = await client(s).completions.create({ model: 'model', prompt, max_tokens: maxTokens, temperature: 0 });
    if (r.choices[0].finish_reason === 'length') return prompt;
  }
  fail('no prompt ran to max_tokens');
}

async function caseCancel(model) {
  const s = await startServer('cancel', model, slowStorage);
  const max = 1500;
  const prompt = await longRequest(s, 40);
  const before = await metric(s, 'k3_requests_interrupted_total');
  const generatedBefore = await metric(s, 'k3_generated_tokens_total');
  const ac = new AbortController();
  const stream = await client(s).completions.create({ model: 'model', prompt, max_tokens: max, temperature: 0, stream: true },
    { signal: ac.signal });
  let n = 0, aborted = false;
  try {
    for await (const _ of stream) if (++n === 3) ac.abort();
  } catch (e) {
    aborted = true;
  }
  check(aborted || n >= 3, 'the stream was aborted');
  let interrupted = before;
  for (let i = 0; i < 200 && interrupted === before; ++i) {
    await sleep(50);
    interrupted = await metric(s, 'k3_requests_interrupted_total');
  }
  check(interrupted === before + 1, `the disconnect did not end the generation (interrupted ${before} -> ${interrupted})`);
  const generated = (await metric(s, 'k3_generated_tokens_total')) - generatedBefore;
  check(generated < max, `the cancelled generation ran on: ${generated} tokens`);
  check((await request(s, 'GET', '/health')).status === 200, 'healthy after a cancelled stream');

  // A plain (not streamed) request whose client goes away is stopped too (the server writes
  // a space once a second while it generates, and notices the failed write).
  const before2 = await metric(s, 'k3_requests_interrupted_total');
  const generated2 = await metric(s, 'k3_generated_tokens_total');
  const ac2 = new AbortController();
  const plain = client(s).completions.create({ model: 'model', prompt, max_tokens: max, temperature: 0 }, { signal: ac2.signal })
    .then(() => 'finished', () => 'aborted');
  for (let i = 0; i < 200 && (await metric(s, 'k3_generation_running')) !== 1; ++i) await sleep(20);
  await sleep(1500);
  ac2.abort();
  check((await plain) === 'aborted', 'the plain request finished before it could be aborted');
  let interrupted2 = before2;
  for (let i = 0; i < 200 && interrupted2 === before2; ++i) {
    await sleep(50);
    interrupted2 = await metric(s, 'k3_requests_interrupted_total');
  }
  check(interrupted2 === before2 + 1, `a plain request's disconnect did not end its generation (${before2} -> ${interrupted2})`);
  check((await metric(s, 'k3_generated_tokens_total')) - generated2 < max, 'the plain cancelled generation ran on');
  const next = await client(s).chat.completions.create({ model: 'model', messages: conversation, max_tokens: 4, temperature: 0 });
  check(next.usage.completion_tokens >= 1, 'the next request is served');

  // SIGINT during a generation: the stream ends, the server exits 0.
  const st = await client(s).completions.create({ model: 'model', prompt, max_tokens: max, temperature: 0, stream: true });
  let got = 0;
  try {
    for await (const _ of st) if (++got === 2) s.proc.kill('SIGINT');
  } catch { /* the connection may close */ }
  for (let i = 0; i < 200 && !s.exited; ++i) await sleep(50);
  check(s.exited && s.exited.code === 0, `after SIGINT mid-generation: ${JSON.stringify(s.exited)}`);
  check(/stopped/.test(s.stderr), 'the server logged its stop');
  servers.splice(servers.indexOf(s), 1);
}

async function caseErrors(model) {
  const key = 'sk-test-' + process.pid + '-secret';
  const s = await startServer('errors', model, ['--max-body', '4096'], { K3_API_KEY: key });
  const auth = { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' };
  const post = (p, body, h = auth) => request(s, 'POST', p, body, { ...h, 'Content-Length': Buffer.byteLength(body) });

  let e = checkError(await post('/v1/chat/completions', '{"messages": [', auth), 400, 'malformed JSON');
  check(e.type === 'invalid_request_error', `malformed JSON type ${e.type}`);
  e = checkError(await post('/v1/chat/completions', JSON.stringify({ messages: conversation, temperature: 5 })), 400, 'temperature 5');
  check(e.param === 'temperature', `param ${e.param}`);
  e = checkError(await post('/v1/chat/completions', JSON.stringify({ messages: conversation, frobnicate: 1 })), 400, 'unknown parameter');
  check(e.param === 'frobnicate', `param ${e.param}`);
  e = checkError(await post('/v1/chat/completions', JSON.stringify({ messages: [] })), 400, 'empty messages');
  check(e.param === 'messages', `param ${e.param}`);
  e = checkError(await post('/v1/completions', JSON.stringify({ prompt: [1, 2, 999999] })), 400, 'token id outside the vocabulary');
  checkError(await post('/v1/chat/completions', JSON.stringify({ messages: conversation, pad: 'x'.repeat(8000) })), 413, 'oversize body');
  // Without a Content-Length node sends the body chunked: read within the same limit.
  const chunked = await request(s, 'POST', '/v1/chat/completions',
                                JSON.stringify({ messages: conversation, max_tokens: 2, temperature: 0 }), auth);
  check(chunked.status === 200 && chunked.json && chunked.json.usage.completion_tokens >= 1,
        `chunked body: ${chunked.status} ${chunked.body}`);
  checkError(await request(s, 'POST', '/v1/chat/completions', JSON.stringify({ messages: conversation, pad: 'x'.repeat(8000) }),
                           auth), 413, 'oversize chunked body');
  e = checkError(await request(s, 'GET', '/v1/nothing', undefined, auth), 404, 'unknown route');
  checkError(await request(s, 'GET', '/nothing'), 404, 'unknown route outside /v1');
  e = checkError(await post('/v1/chat/completions', JSON.stringify({ messages: conversation }), { Authorization: 'Bearer wrong' }), 401, 'wrong key');
  check(e.code === 'invalid_api_key', `code ${e.code}`);
  checkError(await request(s, 'GET', '/v1/models'), 401, 'missing key');
  checkError(await request(s, 'GET', '/metrics'), 401, 'metrics without the key');
  check((await request(s, 'GET', '/health')).status === 200, '/health needs no key');
  // The official client with the right key and a wrong one.
  const ok = await client(s, key).chat.completions.create({ model: 'm', messages: conversation, max_tokens: 2, temperature: 0 });
  check(ok.usage.completion_tokens >= 1, 'authorised request');
  let status = 0;
  try { await client(s, 'nope').models.list(); } catch (err) { status = err.status; }
  check(status === 401, `client with a wrong key: ${status}`);
  check(!s.stderr.includes(key), 'the API key appears in the log');
  await stopServer(s);

  // A non-loopback address without a key is refused before anything runs.
  const r = spawnSync(exe, ['serve', '--config', path.join(src, 'configs/default.yaml'), '--set', `model.path=${model}`,
    '--host', '0.0.0.0', '--port', '0'], { encoding: 'utf8', env: { ...process.env, K3_API_KEY: '' }, timeout: 30_000 });
  check(r.status === 2 && /API key/.test(r.stderr), `non-loopback bind without a key: exit ${r.status}: ${r.stderr}`);
}

async function caseQueue(model) {
  const s = await startServer('queue', model, ['--queue', '1', '--parallel', '1', ...slowStorage]);
  const prompt = await longRequest(s, 40);
  // The first client holds the model with a long stream.
  const ac = new AbortController();
  const first = await client(s).completions.create({ model: 'model', prompt, max_tokens: 1800, temperature: 0, stream: true },
    { signal: ac.signal });
  const it = first[Symbol.asyncIterator]();
  await it.next();  // it is generating
  // The second waits in the queue ...
  const second = client(s).chat.completions.create({ model: 'model', messages: conversation, max_tokens: 3, temperature: 0 });
  let depth = 0;
  for (let i = 0; i < 200 && depth < 1; ++i) {
    depth = await metric(s, 'k3_queue_depth');
    if (depth < 1) await sleep(20);
  }
  check(depth === 1, `the second request is not queued (depth ${depth})`);
  // ... and a third finds the queue full.
  const body3 = JSON.stringify({ messages: conversation, max_tokens: 3 });
  const third = await request(s, 'POST', '/v1/chat/completions', body3,
    { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body3) });
  const e = checkError(third, 429, 'third client with a full queue');
  check(e.type === 'rate_limit_error', `429 type ${e.type}`);
  check(await metric(s, 'k3_requests_rejected_total') === 1, 'rejection counted');
  ac.abort();
  try { while (!(await it.next()).done); } catch { /* aborted */ }
  const r2 = await second;
  check(r2.usage.completion_tokens >= 1, 'the queued request was served');
  await stopServer(s);
}

/** Every sample of /metrics: name (with labels) -> its text. */
async function samples(s) {
  const r = await request(s, 'GET', '/metrics');
  const out = {};
  for (const line of r.body.split('\n')) if (line && !line.startsWith('#')) out[line.split(' ')[0]] = line.split(' ')[1];
  return out;
}

// The shipped model (configs/default.yaml's data/models/fortune, trained on plain text, its
// config.json says k3host_thinking: false): a request with nothing but its messages gets text
// in content; one that asks for thinking and ends inside the think channel says so. Metrics
// are written as what they measure allows, and the hit rate is 1 with every expert resident,
// NaN on a streaming model before its first request.
async function caseShipped(model) {
  const argv = ['serve', '--config', path.join(src, 'configs/default.yaml'), '--set', 'threads=1', '--port', '0'];
  const proc = spawn(exe, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
  const s = { name: 'shipped', proc, stderr: '', port: 0, exited: null };
  servers.push(s);
  proc.stderr.on('data', (d) => { s.stderr += d.toString(); });
  proc.on('exit', (code, sig) => { s.exited = { code, sig }; });
  for (let i = 0; i < 600 && !s.port; ++i) {
    const m = s.stderr.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
    if (m) s.port = Number(m[1]);
    else await sleep(50);
  }
  for (let i = 0; i < 600 && (await request(s, 'GET', '/health')).status !== 200; ++i) await sleep(50);
  check(/chat replies think only when a request sends reasoning_effort/.test(s.stderr),
        'the server does not say that the model answers without thinking');
  const ai = client(s);
  const plain = await ai.chat.completions.create({ model: 'fortune', messages: [{ role: 'user', content: 'Life is' }] });
  const msg = plain.choices[0].message;
  check(typeof msg.content === 'string' && msg.content.trim().length > 0, `no text in content: ${JSON.stringify(plain)}`);
  check(!('reasoning_content' in msg) && !('reasoning_unfinished' in plain.choices[0]), `thinking was on: ${JSON.stringify(plain)}`);
  const streamed = await collectChat(await ai.chat.completions.create({ model: 'fortune', stream: true,
    messages: [{ role: 'user', content: 'Life is' }] }));
  check(streamed.content === msg.content && streamed.reasoning === '', `the stream differs: ${JSON.stringify(streamed)}`);

  // Thinking asked for: the model never closes its think channel, and the reply says so.
  const ask = { model: 'fortune', messages: [{ role: 'user', content: 'Life is' }], reasoning_effort: 'max', max_tokens: 12 };
  const thought = await ai.chat.completions.create(ask);
  const choice = thought.choices[0];
  check(choice.message.reasoning_content.length > 0 && choice.message.content === '' && choice.finish_reason === 'length',
        `a reply cut in the think channel: ${JSON.stringify(thought)}`);
  check(choice.reasoning_unfinished === true, `reasoning_unfinished missing: ${JSON.stringify(choice)}`);
  let last = null;
  for await (const c of await ai.chat.completions.create({ ...ask, stream: true })) if (c.choices.length) last = c.choices[0];
  check(last && last.finish_reason === 'length' && last.reasoning_unfinished === true,
        `the stream's last chunk does not say the reasoning was cut: ${JSON.stringify(last)}`);
  check(/ended inside the think channel/.test(s.stderr), 'no log line for the reply cut in the think channel');

  // Metrics: integers, seconds to the microsecond, ratios to 6 digits; every expert resident.
  const m = await samples(s);
  check(Number(m.k3_requests_total) === 4, `k3_requests_total ${m.k3_requests_total}`);
  for (const [name, value] of Object.entries(m)) {
    // A ratio: at most 6 significant digits; anything else: at most 6 decimals (microseconds).
    const digits = name.endsWith('_rate') ? value.replace(/e.*$/, '').replace(/[-.]/g, '').replace(/^0+/, '').length
      : (value.split('.')[1] ?? '').length;
    check(value === 'NaN' || (/^-?\d+(\.\d*[1-9])?(e[-+]\d+)?$/.test(value) && digits <= 6),
          `${name} ${value}: more digits than it measures`);
  }
  check(Number(m.k3_seconds_per_token) > 0 && /^\d+\.\d{1,6}$/.test(m.k3_seconds_per_token), `k3_seconds_per_token ${m.k3_seconds_per_token}`);
  check(Number(m.k3_expert_requests_total) === 0 && m.k3_expert_hit_rate === '1',
        `every expert resident: hit rate ${m.k3_expert_hit_rate} (${m.k3_expert_requests_total} requests)`);
  await stopServer(s);

  const streaming = await startServer('streaming', model, ['--set', 'memory.trunk_gb=0.00005', '--set', 'memory.expert_cache_gb=0.00005']);
  check((await samples(streaming)).k3_expert_hit_rate === 'NaN', 'a streaming model before any request: hit rate not NaN');
  await client(streaming).chat.completions.create({ model: 'model', messages: conversation, max_tokens: 4 });
  const rate = Number((await samples(streaming)).k3_expert_hit_rate);
  check(rate >= 0 && rate <= 1, `hit rate after a request: ${rate}`);
  await stopServer(streaming);
}

/** Runs one request of the batch case; resolves to what identifies its reply. */
async function runOne(s, r) {
  const ai = client(s);
  if (r.chat) {
    const params = { model: 'model', messages: r.messages, max_tokens: r.max_tokens, temperature: r.temperature, seed: r.seed,
      top_p: r.top_p };
    if (!r.stream) {
      const a = await ai.chat.completions.create(params);
      return { text: JSON.stringify(a.choices[0].message), finish: a.choices[0].finish_reason, tokens: a.usage.completion_tokens };
    }
    const b = await collectChat(await ai.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } }));
    return { text: JSON.stringify({ role: 'assistant', content: b.content, reasoning_content: b.reasoning }), finish: b.finish,
      tokens: b.usage.completion_tokens, streamed: true };
  }
  const params = { model: 'model', prompt: r.prompt, max_tokens: r.max_tokens, temperature: r.temperature, seed: r.seed,
    top_p: r.top_p };
  if (!r.stream) {
    const c = await ai.completions.create(params);
    return { text: c.choices[0].text, finish: c.choices[0].finish_reason, tokens: c.usage.completion_tokens };
  }
  let text = '', finish = null, tokens = 0;
  for await (const ch of await ai.completions.create({ ...params, stream: true, stream_options: { include_usage: true } })) {
    if (ch.usage) tokens = ch.usage.completion_tokens;
    if (!ch.choices.length) continue;
    text += ch.choices[0].text;
    if (ch.choices[0].finish_reason) finish = ch.choices[0].finish_reason;
  }
  return { text, finish, tokens, streamed: true };
}

async function caseBatch(model) {
  // The reference serves one request at a time, resident, without drafts, with the scalar
  // kernels on 1 thread; the other decodes up to four together with drafts, prefilling
  // prompts 4 tokens per step beside them, streaming the trunk and the experts through a
  // throttle (so that steps take a few milliseconds and the requests overlap), with the best
  // kernel set this machine runs on 2 threads.
  const alone = await startServer('alone', model, ['--parallel', '1', '--draft-max', '0', '--no-prefix-reuse',
    '--set', 'kernels.set=scalar']);
  const batched = await startServer('batched', model, ['--parallel', '4', '--set', 'serve.prefill_budget=4', '--queue', '16',
    '--set', 'storage.plugin=throttle', '--set', 'storage.params.latency_us=300', '--set', 'memory.trunk_gb=0.00005',
    '--set', 'memory.expert_cache_gb=0.00005', '--set', 'threads=2']);
  const ids = (n, k) => Array.from({ length: n }, (_, i) => (k * 53 + i * 29) % 500);
  const requests = [
    { prompt: ids(8, 1), max_tokens: 40, temperature: 0 },
    { prompt: ids(30, 2), max_tokens: 12, temperature: 0.9, seed: 3, stream: true },
    { chat: true, messages: conversation, max_tokens: 20, temperature: 0 },
    { prompt: ids(3, 4), max_tokens: 25, temperature: 1.1, seed: 11 },
    { chat: true, messages: [{ role: 'user', content: 'Count from one to ten.' }], max_tokens: 16, temperature: 0.7, seed: 5, stream: true },
    { prompt: ids(60, 6), max_tokens: 6, temperature: 0, stream: true },
    { prompt: ids(12, 7), max_tokens: 30, temperature: 0.8, seed: 2 },
    { prompt: ids(5, 8), max_tokens: 9, temperature: 0 },
    { prompt: ids(9, 9), max_tokens: 14, temperature: 1.3, top_p: 0.6, seed: 8, stream: true },
  ];
  const reference = [];
  for (const r of requests) reference.push(await runOne(alone, r));
  // All at once, arriving over ~70 ms: more than four, so some wait for a slot.
  const got = await Promise.all(requests.map((r, i) => sleep(10 * i).then(() => runOne(batched, r))));
  for (let i = 0; i < requests.length; ++i) {
    check(got[i].text === reference[i].text && got[i].finish === reference[i].finish && got[i].tokens === reference[i].tokens,
          `request ${i} beside others: ${JSON.stringify(got[i])} != alone ${JSON.stringify(reference[i])}`);
    check(reference[i].tokens >= 1, `request ${i} generated nothing`);
  }
  check(await metric(batched, 'k3_sequences_parallel') === 4, 'four sequence slots');
  const steps = await metric(batched, 'k3_batch_size_count'), together = await metric(batched, 'k3_batch_size_sum');
  check(together > steps * 1.5, `the requests were not decoded together: ${together} sequences in ${steps} steps`);
  check(await metric(alone, 'k3_batch_size_sum') === await metric(alone, 'k3_batch_size_count'), 'parallel 1 steps one at a time');
  check(await metric(batched, 'k3_queue_wait_seconds_count') >= requests.length, 'queue waits observed');
  check(await metric(batched, 'k3_inter_token_seconds_count') > 0, 'token gaps observed');
  check(await metric(batched, 'k3_request_first_token_seconds_count') >= requests.length, 'first tokens observed');

  // Prefix reuse per request: two conversations' second turns, sent together, each resume
  // from its own first turn (a slot's live session or a snapshot) and reply as the
  // one-slot server without reuse does.
  const convs = [
    [{ role: 'user', content: 'Tell me about rivers and the sea, in some detail please.' }],
    [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'What is a mountain made of, and why?' }],
  ];
  const chatParams = { model: 'model', max_tokens: 10, temperature: 0 };
  const firsts = await Promise.all(convs.map((m) => client(batched).chat.completions.create({ ...chatParams, messages: m })));
  const seconds = convs.map((m, i) => [...m, { role: 'assistant', content: firsts[i].choices[0].message.content },
    { role: 'user', content: `And then, part ${i + 2}?` }]);
  const again = await Promise.all(seconds.map((m) => client(batched).chat.completions.create({ ...chatParams, messages: m })));
  for (let i = 0; i < seconds.length; ++i) {
    const ref = await client(alone).chat.completions.create({ ...chatParams, messages: seconds[i] });
    const cached = again[i].usage.prompt_tokens_details.cached_tokens;
    check(cached >= firsts[i].usage.prompt_tokens && cached < again[i].usage.prompt_tokens,
          `conversation ${i}: turn 2 reused ${cached} tokens, turn 1's prompt was ${firsts[i].usage.prompt_tokens}`);
    check(JSON.stringify(again[i].choices[0].message) === JSON.stringify(ref.choices[0].message),
          `conversation ${i}: resumed beside another ${JSON.stringify(again[i].choices[0].message)} != alone ${JSON.stringify(ref.choices[0].message)}`);
  }

  // A long prompt does not stall a running stream: it is prefilled 4 tokens per step, and
  // the stream gets a token at every one of those steps. The stream's prompt runs to its
  // max_tokens (found on the fast server), so that it is still running when the long one is done.
  const runnerPrompt = await longRequest(alone, 600);
  const ac = new AbortController();
  const runner = await client(batched).completions.create({ model: 'model', prompt: runnerPrompt, max_tokens: 600,
    temperature: 0, stream: true }, { signal: ac.signal });
  let received = 0, runnerFinish = null;
  const counting = (async () => {
    try {
      for await (const ch of runner) {
        ++received;
        if (ch.choices.length && ch.choices[0].finish_reason) runnerFinish = ch.choices[0].finish_reason;
      }
    } catch { /* aborted */ }
  })();
  for (let i = 0; i < 400 && received < 5; ++i) await sleep(10);
  check(received >= 5, 'the running stream did not start');
  const atSend = received;
  const long = await client(batched).completions.create({ model: 'model', prompt: ids(1000, 10), max_tokens: 1, temperature: 0 });
  const during = received - atSend;
  check(long.usage.prompt_tokens === 1000, `long prompt: ${JSON.stringify(long.usage)}`);
  check(runnerFinish === null, `the stream ended (${runnerFinish}) before the long prompt was done: nothing measured`);
  check(during >= 100, `the running stream got ${during} tokens (${received} in all, finish ${runnerFinish}) while a 1000-token prompt was prefilled (250 steps)`);
  ac.abort();
  await counting;
  await stopServer(alone);
  await stopServer(batched);
}

async function caseCluster(model) {
  // A model split over ranks (docs/cluster.md) serves as one process does: rank 0 runs the
  // server and its step scheduler, a pass per rank in flight; the later ranks run their
  // layers. The reference is one process serving one request at a time.
  const mpirun = args.mpirun;
  const plugin = path.join(path.dirname(exe), '..', 'lib', 'k3host', 'plugins', 'k3-transport-mpi.so');
  if (!mpirun || mpirun.endsWith('NOTFOUND') || !fs.existsSync(plugin)) {
    console.log('SKIP: mpirun or the mpi transport plugin is missing (apt install openmpi-bin libopenmpi-dev)');
    process.exit(77);
  }
  const mpiEnv = { OMPI_ALLOW_RUN_AS_ROOT: '1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM: '1' };
  const ranks = (n, ...mca) => [mpirun, '-np', String(n), '--oversubscribe', ...mca];
  const alone = await startServer('alone', model, ['--parallel', '1', '--draft-max', '0', '--no-prefix-reuse',
    '--set', 'kernels.set=scalar']);
  // Two ranks, four requests together, prompts prefilled 4 tokens per step, every rank
  // streaming through a throttle (so that passes overlap); three over TCP, uneven ranges.
  const streamed = ['--set', 'storage.plugin=throttle', '--set', 'storage.params.latency_us=300',
    '--set', 'memory.trunk_gb=0.00005', '--set', 'memory.expert_cache_gb=0.00005'];
  const two = await startServer('two ranks', model, ['--parallel', '4', '--set', 'serve.prefill_budget=4', '--queue', '16',
    '--set', 'cluster.transport=mpi', ...streamed], mpiEnv, ranks(2));
  const three = await startServer('three ranks', model, ['--parallel', '3', '--queue', '16', '--set', 'cluster.transport=mpi',
    '--set', 'cluster.layers=0-0,1-3,4-5'], mpiEnv, ranks(3, '--mca', 'btl', 'self,tcp'));
  check(two.stderr.includes('prefix reuse is off: the model is split over 2 ranks'), 'a split model keeps no snapshots');
  const ids = (n, k) => Array.from({ length: n }, (_, i) => (k * 53 + i * 29) % 500);
  const requests = [
    { prompt: ids(8, 1), max_tokens: 24, temperature: 0 },
    { prompt: ids(30, 2), max_tokens: 12, temperature: 0.9, seed: 3, stream: true },
    { chat: true, messages: conversation, max_tokens: 16, temperature: 0 },
    { prompt: ids(3, 4), max_tokens: 20, temperature: 1.1, seed: 11 },
    { chat: true, messages: [{ role: 'user', content: 'Count from one to ten.' }], max_tokens: 12, temperature: 0.7, seed: 5, stream: true },
    { prompt: ids(12, 7), max_tokens: 16, temperature: 0.8, seed: 2 },
  ];
  const reference = [];
  for (const r of requests) reference.push(await runOne(alone, r));
  for (const split of [two, three]) {
    const got = await Promise.all(requests.map((r, i) => sleep(10 * i).then(() => runOne(split, r))));
    for (let i = 0; i < requests.length; ++i)
      check(got[i].text === reference[i].text && got[i].finish === reference[i].finish && got[i].tokens === reference[i].tokens,
            `${split.name}: request ${i}: ${JSON.stringify(got[i])} != one process alone ${JSON.stringify(reference[i])}`);
  }
  // Two ranks keep two passes in flight, so four requests go two to a pass; three ranks run
  // three requests one to a pass, a pass per rank.
  const steps = await metric(two, 'k3_batch_size_count'), together = await metric(two, 'k3_batch_size_sum');
  check(together > steps, `two ranks: the requests were not decoded together: ${together} sequences in ${steps} steps`);
  await stopServer(two, { underMpirun: true });
  await stopServer(three, { underMpirun: true });
  await stopServer(alone);

  // On the shipped model, the middle rank 1 of three (layers 4-5) streams its trunk from a disk that fails on
  // layer 4's q_proj (its byte past the index and the headers): it loads, then the first
  // pass through it fails. The request fails, the server ends with exit 1 on every rank and
  // a line naming rank 1 and the read.
  const fortune = path.join(src, 'data/models/fortune');
  const tensor = 'language_model.model.layers.4.self_attn.q_proj.weight';
  const index = JSON.parse(fs.readFileSync(path.join(fortune, 'model.safetensors.index.json'), 'utf8'));
  const shard = fs.readFileSync(path.join(fortune, index.weight_map[tensor]));
  const headerLength = Number(shard.readBigUInt64LE(0));
  const header = JSON.parse(shard.subarray(8, 8 + headerLength).toString('utf8'));
  const offset = 8 + headerLength + header[tensor].data_offsets[0] + 16;
  const failing = await startServer('failing rank', fortune, ['--parallel', '2', '--set', 'cluster.transport=mpi',
    '--set', 'cluster.layers=0-3,4-5,6-7', '--set', 'cluster.ranks.1.memory.trunk_gb=0.0001',
    '--set', 'cluster.ranks.1.memory.expert_cache_gb=0.0001', '--set', 'cluster.ranks.1.storage.plugin=faulty',
    '--set', `cluster.ranks.1.storage.params.fail_offsets=${offset}`], mpiEnv, ranks(3));
  const r = await request(failing, 'POST', '/v1/completions', JSON.stringify({ model: 'model', prompt: 'Life is', max_tokens: 8 }),
    { 'content-type': 'application/json' });
  // The reply's header went first (docs/serve.md: chunked, so that a client's leaving is
  // seen), so the failure is the error object of its body.
  check(r.json && r.json.error && /^rank 1: .*injected EIO/.test(r.json.error.message),
        `a request through a failing rank: status ${r.status}: ${r.body}`);
  for (let i = 0; i < 200 && !failing.exited; ++i) await sleep(50);
  check(failing.exited, 'the server still runs 10 s after a rank failed');
  check(failing.exited.code === 1, `exit ${JSON.stringify(failing.exited)} after rank 1 failed, expected 1`);
  check(/rank 1: [^\n]*injected/.test(failing.stderr), 'no line names rank 1 and its failure');
  servers.splice(servers.indexOf(failing), 1);
}

const cases = { chat: caseChat, reuse: caseReuse, cancel: caseCancel, errors: caseErrors, queue: caseQueue,
  shipped: caseShipped, batch: caseBatch, cluster: caseCluster };
check(cases[testCase], `unknown case ${testCase}`);
const model = makeModel();
await cases[testCase](model);
fs.rmSync(work, { recursive: true, force: true });
console.log(`serve ${testCase}: passed`);
process.exit(0);

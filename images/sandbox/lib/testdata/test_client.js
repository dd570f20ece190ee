'use strict';
// Driver: checks the Node gantry client against fake_bridge.py (GANTRY_BRIDGE must point at it).
// Prints "ok node" and exits 0 if every check passes; else prints each failure to stderr
// and exits 1.

const util = require('util');
const gantry = require('gantry');

const failures = [];
const show = (v) => util.inspect(v, { depth: 6, breakLength: Infinity });
const eq = (a, b) => util.isDeepStrictEqual(a, b);

function check(name, cond, detail = '') {
  if (!cond) failures.push(`${name}: ${detail}`);
}

async function rejects(name, fn, cls, code, text, server = null, tool = null) {
  let got;
  try {
    got = await fn();
  } catch (e) {
    if (!(e instanceof gantry.ToolError)) {
      failures.push(`${name}: want ToolError(${code}), got ${show(e)}`);
      return null;
    }
    check(`${name} class`, e.constructor === cls && e.name === cls.name, `want ${cls.name}, got ${e.constructor.name}/${e.name}`);
    check(`${name} is Error`, e instanceof Error, show(e));
    check(`${name} code`, e.code === code, `want ${code}, got ${e.code}`);
    check(`${name} server/tool`, e.server === server && e.tool === tool, `got ${e.server}/${e.tool}`);
    if (text !== undefined && text !== null) check(`${name} message`, e.message === text, `want ${show(text)}, got ${show(e.message)}`);
    return e;
  }
  failures.push(`${name}: want ToolError(${code}), got result ${show(got).slice(0, 200)}`);
  return null;
}

async function run() {
  const bridge = process.env.GANTRY_BRIDGE;
  process.stderr.write(`test_client.js: gantry from ${require.resolve('gantry')}\n`);

  // The import the runner's generated servers/<name>.js wrappers use.
  const { call } = require('gantry');
  check('destructured call', call === gantry.call);
  check('snake_case aliases', gantry.search_tools === gantry.searchTools && gantry.list_servers === gantry.listServers &&
    gantry.list_tools === gantry.listTools);

  // Lookups.
  const servers = await gantry.listServers();
  check('listServers', eq(servers.map((s) => s.name), ['math', 'text']), show(servers));
  let hits = await gantry.searchTools('math', { detail: 'name', limit: 1 });
  check('searchTools detail/limit', eq(hits, [{ server: 'math', name: 'add' }]), show(hits));
  hits = await gantry.search_tools('a');
  check('searchTools defaults', hits.length === 3 && hits.every((h) => 'input_schema' in h && !('output_schema' in h)), show(hits));
  const d = await gantry.describe('math', 'add');
  check('describe', d.name === 'add' && d.output_schema.properties.sum.type === 'number', show(d));
  let tools = await gantry.listTools('math', { detail: 'full' });
  check('listTools', eq(tools.map((t) => t.name), ['add', 'mul']) && 'output_schema' in tools[0], show(tools));
  tools = await gantry.list_tools('text');
  check('listTools default detail', eq(tools, [{ server: 'text', name: 'hello', description: 'Say hello in text.', input_schema: { type: 'object' } }]), show(tools));

  // Result rules.
  let r = await call('math', 'add', { a: 2, b: 3 });
  check('call structured', eq(r, { sum: 5 }), show(r));
  r = await call('text', 'hello');
  check('call text', r === 'hello\nworld', show(r));
  r = await call('mixed', 'image');
  check('call mixed content', Array.isArray(r) && eq(r.map((b) => b.type), ['text', 'image']), show(r));
  const s = 'line1\nline2 \u00e9\u6f22 \u{1F600}';
  r = await call('echo', 'args', { s, n: 1 });
  check('call request object', eq(r.request, { op: 'call', server: 'echo', tool: 'args', args: { s, n: 1 } }), show(r.request));
  check('request is one line', r.raw.endsWith('\n') && r.raw.split('\n').length === 2, show(r.raw));

  // Errors.
  await rejects('denied', () => call('err', 'denied'), gantry.ToolDenied, 'denied', 'err.denied: denied by policy', 'err', 'denied');
  await rejects('budget', () => call('err', 'budget_exceeded'), gantry.BudgetExceeded, 'budget_exceeded', null, 'err', 'budget_exceeded');
  await rejects('timeout', () => call('err', 'timeout'), gantry.ToolTimeout, 'timeout', 'err.timeout: no answer within 30s', 'err', 'timeout');
  const e = await rejects('upstream', () => call('err', 'upstream'), gantry.ToolError, 'upstream_error', 'err.upstream: boom from upstream', 'err', 'upstream');
  check('detail property', e !== null && e.detail === 'boom from upstream', show(e));
  await rejects('unknown tool', () => gantry.describe('math', 'nope'), gantry.UnknownTool, 'unknown_tool', 'math.nope: unknown tool math.nope', 'math', 'nope');
  await rejects('unknown server', () => gantry.listTools('nope'), gantry.UnknownTool, 'unknown_server', 'nope: unknown server nope', 'nope', null);
  await rejects('unknown server call', () => call('nope', 'x'), gantry.UnknownTool, 'unknown_server', null, 'nope', 'x');
  await rejects('closed without reply', () => call('drop', 'now'), gantry.ToolError, 'unavailable',
    'drop.now: code mode is not available in this job: the bridge closed the connection without a response', 'drop', 'now');
  await rejects('partial reply', () => call('drop', 'partial'), gantry.ToolError, 'unavailable', null, 'drop', 'partial');
  await rejects('invalid reply', () => call('bad', 'json'), gantry.ToolError, 'unavailable', null, 'bad', 'json');
  await rejects('response over 64 MiB', () => call('big', 'response'), gantry.ToolError, 'too_large', null, 'big', 'response');
  await rejects('request over 1 MiB', () => call('echo', 'args', { s: 'x'.repeat(1 << 20) }), gantry.ToolError, 'too_large', null, 'echo', 'args');
  await rejects('unserializable args', () => call('echo', 'args', { n: 1n }), gantry.ToolError, 'bad_request', null, 'echo', 'args');
  try {
    await call('echo', 'args', 5);
    failures.push('non-object args: no TypeError');
  } catch (err) {
    check('non-object args', err instanceof TypeError, show(err));
  }

  // Bridge unavailable.
  try {
    process.env.GANTRY_BRIDGE = bridge + '.missing';
    const m = await rejects('socket missing', () => gantry.listServers(), gantry.ToolError, 'unavailable');
    check('socket missing message', m !== null && m.message.startsWith('code mode is not available in this job: '), m && m.message);
    delete process.env.GANTRY_BRIDGE;
    await rejects('GANTRY_BRIDGE unset', () => call('math', 'add', { a: 1, b: 2 }), gantry.ToolError, 'unavailable',
      'math.add: code mode is not available in this job: GANTRY_BRIDGE is not set', 'math', 'add');
  } finally {
    process.env.GANTRY_BRIDGE = bridge;
  }

  // Concurrency: sync.wait only answers once 10 calls are in flight at the same time.
  const settled = await Promise.allSettled(Array.from({ length: 10 }, (_, i) => call('sync', 'wait', { n: i })));
  check('10 concurrent calls', settled.every((x, i) => x.status === 'fulfilled' && eq(x.value, { n: i })), show(settled));
}

(async () => {
  if (!process.env.GANTRY_BRIDGE) {
    process.stderr.write('FAIL node: GANTRY_BRIDGE is not set\n');
    process.exit(2);
  }
  try {
    await run();
  } catch (err) {
    failures.push(`unexpected exception: ${err && err.stack ? err.stack : show(err)}`);
  }
  if (failures.length) {
    for (const f of failures) process.stderr.write(`FAIL node: ${f}\n`);
    process.exit(1);
  }
  process.stdout.write('ok node\n');
})();

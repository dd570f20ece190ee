'use strict';
/**
 * Call tools of the job's MCP servers from Node ("code mode").
 *
 *   const gantry = require('gantry');
 *   await gantry.listServers();                    // [{name, description, transport, tools}]
 *   await gantry.searchTools('weather', { limit: 5 });
 *   await gantry.describe('weather', 'forecast');  // full tool object with schemas
 *   const r = await gantry.call('weather', 'forecast', { city: 'Oslo', days: 2 });
 *
 * call() resolves to the tool's structured result if it has one, else its text (a
 * string), else the raw MCP content blocks (an array). Failures reject with a
 * ToolError (subclasses ToolDenied, BudgetExceeded, ToolTimeout, UnknownTool); .code
 * names the reason.
 */

const net = require('net');

const MAX_REQUEST = 1 << 20; // the bridge reads at most 1 MiB per request line
const MAX_RESPONSE = 64 << 20;

/**
 * A tool call or lookup failed. Properties: code (the bridge's reason, e.g.
 * "upstream_error", "bad_request", "too_large", "unavailable"), server, tool, detail
 * (the bare message) and message (detail prefixed with "server.tool: " when known).
 */
class ToolError extends Error {
  constructor(code, message, server, tool) {
    const prefix = server && tool ? `${server}.${tool}: ` : server ? `${server}: ` : '';
    super(prefix + message);
    this.name = new.target.name;
    this.code = code;
    this.detail = message;
    this.server = server === undefined ? null : server;
    this.tool = tool === undefined ? null : tool;
  }
}
/** The job's policy does not allow this call (code "denied"). */
class ToolDenied extends ToolError {}
/** The job's tool-call budget is used up (code "budget_exceeded"). */
class BudgetExceeded extends ToolError {}
/** The tool did not answer in time (code "timeout"). */
class ToolTimeout extends ToolError {}
/** No such server or tool in this job (code "unknown_server" or "unknown_tool"). */
class UnknownTool extends ToolError {}

const CLASSES = {
  denied: ToolDenied,
  budget_exceeded: BudgetExceeded,
  timeout: ToolTimeout,
  unknown_server: UnknownTool,
  unknown_tool: UnknownTool,
};

function toolError(code, message, server, tool) {
  const C = Object.prototype.hasOwnProperty.call(CLASSES, code) ? CLASSES[code] : ToolError;
  return new C(code, message, server, tool);
}

function unavailable(why, server, tool) {
  return new ToolError('unavailable', 'code mode is not available in this job: ' + why, server, tool);
}

/** Send one request on a new connection; resolve to its result or reject with ToolError. */
function request(req, server, tool) {
  return new Promise((resolve, reject) => {
    let line;
    try {
      line = JSON.stringify(req) + '\n';
    } catch (e) {
      reject(new ToolError('bad_request', `arguments are not JSON-serializable: ${e.message}`, server, tool));
      return;
    }
    const size = Buffer.byteLength(line);
    if (size > MAX_REQUEST) {
      reject(new ToolError('too_large', `request is ${size} bytes, more than the bridge's limit of ${MAX_REQUEST}`, server, tool));
      return;
    }
    const path = process.env.GANTRY_BRIDGE;
    if (!path) {
      reject(unavailable('GANTRY_BRIDGE is not set', server, tool));
      return;
    }
    const chunks = [];
    let total = 0;
    let done = false;
    const sock = net.createConnection({ path });
    const finish = (err, value) => {
      if (done) return;
      done = true;
      sock.destroy();
      if (err) reject(err);
      else resolve(value);
    };
    sock.on('connect', () => sock.write(line));
    sock.on('data', (chunk) => {
      if (done) return;
      const nl = chunk.indexOf(10);
      if (nl < 0) {
        chunks.push(chunk);
        total += chunk.length;
        if (total > MAX_RESPONSE) finish(new ToolError('too_large', `response is larger than ${MAX_RESPONSE} bytes`, server, tool));
        return;
      }
      chunks.push(chunk.subarray(0, nl));
      const text = Buffer.concat(chunks).toString('utf8');
      let resp;
      try {
        resp = JSON.parse(text);
      } catch (e) {
        finish(unavailable(`the bridge sent an invalid response: ${JSON.stringify(text.slice(0, 200))}`, server, tool));
        return;
      }
      if (resp === null || typeof resp !== 'object' || Array.isArray(resp)) {
        finish(unavailable(`the bridge sent an invalid response: ${JSON.stringify(text.slice(0, 200))}`, server, tool));
      } else if (resp.ok) {
        finish(null, resp.result === undefined ? null : resp.result);
      } else {
        const err = resp.error && typeof resp.error === 'object' ? resp.error : {};
        finish(toolError(String(err.code || 'unavailable'), String(err.message || 'unknown error'), server, tool));
      }
    });
    sock.on('end', () => finish(unavailable('the bridge closed the connection without a response', server, tool)));
    sock.on('close', () => finish(unavailable('the bridge closed the connection without a response', server, tool)));
    sock.on('error', (e) => {
      const why = e.code === 'ENOENT' || e.code === 'ECONNREFUSED'
        ? `cannot connect to the bridge at ${path} (${e.code})`
        : `bridge connection failed (${e.code || e.message})`;
      finish(unavailable(why, server, tool));
    });
  });
}

/**
 * Find tools across all servers matching query; resolves to a list of tool objects.
 * detail: "name" | "description" (default) | "full"; limit (default 10) caps the results.
 */
function searchTools(query, { detail = 'description', limit = 10 } = {}) {
  return request({ op: 'search', query, detail, limit });
}

/** Resolves to the job's servers: [{name, description, transport, tools}]. */
function listServers() {
  return request({ op: 'servers' });
}

/** Resolves to one tool object in full detail, including input and output schemas. */
function describe(server, tool) {
  return request({ op: 'describe', server, tool }, server, tool);
}

/** Resolves to the tool objects of one server at the given detail (default "description"). */
function listTools(server, { detail = 'description' } = {}) {
  return request({ op: 'tools', server, detail }, server);
}

/**
 * Call server's tool with args (an object). Resolves to the structured result if the
 * tool gave one; else, if every content block is text, their texts joined with "\n";
 * else the array of content blocks. Rejects with ToolError (or a subclass).
 */
async function call(server, tool, args) {
  if (args === undefined || args === null) args = {};
  if (typeof args !== 'object' || Array.isArray(args)) {
    throw new TypeError(`gantry.call: args must be an object, not ${Array.isArray(args) ? 'array' : typeof args}`);
  }
  const result = await request({ op: 'call', server, tool, args }, server, tool);
  if (result === null || typeof result !== 'object' || Array.isArray(result)) return result;
  if (result.structured !== undefined && result.structured !== null) return result.structured;
  const content = Array.isArray(result.content) ? result.content : [];
  if (content.every((b) => b && typeof b === 'object' && b.type === 'text')) {
    return content.map((b) => (b.text === undefined ? '' : String(b.text))).join('\n');
  }
  return content;
}

module.exports = {
  searchTools,
  listServers,
  describe,
  listTools,
  call,
  search_tools: searchTools,
  list_servers: listServers,
  list_tools: listTools,
  ToolError,
  ToolDenied,
  BudgetExceeded,
  ToolTimeout,
  UnknownTool,
};

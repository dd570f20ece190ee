// Retries and errors, against a small local HTTP server standing in for
// gantry (the real server is exercised by client.test.ts).
import assert from "node:assert/strict";
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";

import { ConnectionFailed, ERRORS_BY_CODE, ERROR_CODES, Gantry, InvalidArgument, NotFound, Unavailable, type JobInput } from "../src/index.js";

type Reply = [number, Record<string, string>, unknown];

async function fake(script: Reply[]) {
  const requests: Array<{ method: string; url: string; body: string; at: number }> = [];
  const server = createServer(async (req: IncomingMessage, res) => {
    let body = "";
    for await (const chunk of req) body += chunk;
    requests.push({ method: req.method ?? "", url: req.url ?? "", body, at: Date.now() });
    const [status, headers, out] = script.shift() ?? [500, {}, {}];
    res.writeHead(status, { "Content-Type": "application/json", ...headers });
    res.end(JSON.stringify(out));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, requests, close: () => new Promise((r) => server.close(r)) };
}

const err = (code: string, message: string, field?: string) => ({ error: { code, message, field } });

test("a retry honours Retry-After and keeps the idempotency key", async () => {
  const f = await fake([[503, { "Retry-After": "1" }, err("unavailable", "queue down")], [202, {}, { id: "job_x", status: "queued" }]]);
  try {
    const job = await new Gantry({ url: f.url, apiKey: "gk_test" }).submit({ language: "python", code: "print(1)" });
    assert.equal(job.id, "job_x");
    const [a, b] = f.requests;
    assert.ok(b.at - a.at >= 950, `retried after ${b.at - a.at} ms, before Retry-After`);
    const ka = JSON.parse(a.body).idempotency_key;
    assert.match(ka, /^ts-/);
    assert.equal(JSON.parse(b.body).idempotency_key, ka);
  } finally {
    await f.close();
  }
});

test("what is not idempotent is not retried", async () => {
  const f = await fake([[503, {}, err("unavailable", "down")], [201, {}, {}]]);
  try {
    await assert.rejects(new Gantry({ url: f.url, apiKey: "gk_test" }).createSession(), Unavailable);
    assert.equal(f.requests.length, 1);
  } finally {
    await f.close();
  }
});

test("typed errors carry the API's error body", async () => {
  const f = await fake([[400, {}, err("invalid_argument", "language is required", "language")], [404, {}, err("not_found", "job not found")]]);
  try {
    const g = new Gantry({ url: f.url, apiKey: "gk_test" });
    await assert.rejects(g.submit({ code: "x" } as JobInput), (e: unknown) => {
      assert.ok(e instanceof InvalidArgument);
      assert.deepEqual([e.status, e.code, e.field, e.message], [400, "invalid_argument", "language", "language is required"]);
      return true;
    });
    await assert.rejects(g.getJob("job_y"), NotFound);
  } finally {
    await f.close();
  }
});

test("every API error code has a class", () => {
  assert.deepEqual(Object.keys(ERRORS_BY_CODE).sort(), [...ERROR_CODES].sort());
});

test("an unreachable server is a ConnectionFailed naming it", async () => {
  const g = new Gantry({ url: "http://127.0.0.1:1", apiKey: "gk_test", maxRetries: 0 });
  await assert.rejects(g.getJob("job_x"), (e: unknown) => e instanceof ConnectionFailed && /cannot reach gantry at http:\/\/127\.0\.0\.1:1/.test(e.message));
});

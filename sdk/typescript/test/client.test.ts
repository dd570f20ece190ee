// The client against a real gantry: `gantry dev` (GANTRY_URL,
// GANTRY_API_KEY). `make test` runs it (test/sdk_test.go starts gantry dev);
// without a gantry it is skipped, or fails under GANTRY_TEST_REQUIRE=1.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";

import { ConnectionFailed, Gantry, InvalidArgument, NotFound, Unauthenticated, verifyWebhook, type JobInput, type LogEvent } from "../src/index.js";

// A request the types forbid, to see the server refuse it.
const unchecked = (r: object) => r as JobInput;

const URL_ = process.env.GANTRY_URL;
const KEY = process.env.GANTRY_API_KEY;
const REQUIRE = process.env.GANTRY_TEST_REQUIRE === "1";
if (REQUIRE && !(URL_ && KEY)) throw new Error("GANTRY_TEST_REQUIRE=1 but GANTRY_URL or GANTRY_API_KEY is not set");
const skip = !(URL_ && KEY) ? "set GANTRY_URL and GANTRY_API_KEY to a gantry (gantry dev)" : false;

describe("against gantry", { skip }, () => {
  const g = () => new Gantry({ url: URL_, apiKey: KEY });

  test("execute", async () => {
    const job = await g().execute({ language: "python", code: "print(6*7)" });
    assert.deepEqual([job.status, job.exit_code, job.stdout], ["succeeded", 0, "42\n"]);
  });

  test("submit with files and env, then wait", async () => {
    const c = g();
    let job = await c.submit({
      language: "bash", code: "cat a.txt; od -An -tx1 b.bin | tr -d ' \\n'; echo; echo $SEED",
      files: { "a.txt": "text\n", "b.bin": new Uint8Array([0, 255]) }, env: { SEED: "7" },
    });
    assert.equal(job.status, "queued");
    job = await c.wait(job.id, { timeoutMs: 120_000 });
    assert.equal(job.stdout, "text\n00ff\n7\n");
  });

  test("wait times out; cancel", async () => {
    const c = g();
    const job = await c.submit({ language: "bash", code: "sleep 30" });
    await assert.rejects(c.wait(job.id, { timeoutMs: 1000 }), /timed out/);
    await c.cancel(job.id);
    assert.equal((await c.wait(job.id, { timeoutMs: 60_000 })).status, "cancelled");
  });

  test("logs stream live", async () => {
    const c = g();
    const job = await c.submit({
      language: "python",
      code: "import sys, time\nprint('one', flush=True)\ntime.sleep(1.5)\nprint('two', file=sys.stderr, flush=True)\ntime.sleep(0.5)\nprint('three')\n",
    });
    const events: LogEvent[] = [];
    for await (const ev of c.logs(job.id)) {
      if (events.length === 0) assert.equal((await c.getJob(job.id)).status, "running", "the first chunk came after the job ended");
      events.push(ev);
    }
    const text = (s: string) => events.map((e) => (e.stream === s && "text" in e ? e.text : "")).join("");
    assert.equal(text("stdout"), "one\nthree\n");
    assert.equal(text("stderr"), "two\n");
    const last = events.at(-1)!;
    assert.ok(last.stream === "status" && last.status.status === "succeeded");
  });

  test("artifacts", async () => {
    const c = g();
    const job = await c.execute({
      language: "python",
      code: "import os\nos.makedirs('out/d', exist_ok=True)\nopen('out/d/x.bin', 'wb').write(bytes(range(256)))\nopen('out/y.txt', 'w').write('y')\n",
    });
    assert.deepEqual(job.artifacts.map((a) => a.path).sort(), ["out/d/x.bin", "out/y.txt"]);
    assert.equal(new TextDecoder().decode(await c.downloadArtifact(job.id, "out/y.txt")), "y");
    const dir = await mkdtemp(join(tmpdir(), "gantry-ts-"));
    try {
      assert.equal((await c.downloadArtifacts(job, dir)).length, 2);
      assert.deepEqual([...(await readFile(join(dir, "out", "d", "x.bin")))], Array.from({ length: 256 }, (_, i) => i));
    } finally {
      await rm(dir, { recursive: true });
    }
  });

  test("sessions and files", async () => {
    const c = g();
    const s = await c.createSession({ language: "python", ttl_seconds: 600 });
    try {
      await c.writeFile(s.id, "in/data.json", '{"n": 41}');
      const job = await c.execute({
        language: "python", session_id: s.id,
        code: "import json\nn = json.load(open('in/data.json'))['n']\nopen('answer.txt', 'w').write(str(n + 1))\n",
      });
      assert.equal(job.status, "succeeded", job.stderr);
      assert.equal(new TextDecoder().decode(await c.readFile(s.id, "answer.txt")), "42");
      assert.equal(new TextDecoder().decode(await c.readFile(s.id, "in/data.json")), '{"n": 41}');
      assert.ok((await c.listFiles(s.id)).files.some((f) => f.path === "answer.txt"));
      await c.deleteFile(s.id, "answer.txt");
      await assert.rejects(c.readFile(s.id, "answer.txt"), NotFound);
    } finally {
      await c.closeSession(s.id);
    }
    await assert.rejects(c.getSession(s.id), NotFound);
  });

  test("stateful session", async () => {
    const c = g();
    const s = await c.createSession({ language: "python", stateful: true });
    try {
      assert.equal(s.stateful, true);
      const first = await c.execute({ language: "python", session_id: s.id, code: "import math\nr = 2" });
      assert.equal(first.live_state, "new", first.stderr);
      const job = await c.execute({ language: "python", session_id: s.id, code: "round(math.pi * r ** 2, 2)" });
      assert.equal(job.live_state, "kept");
      assert.equal(job.value?.["text/plain"], "12.57");
    } finally {
      await c.closeSession(s.id);
    }
  });

  test("skills", async () => {
    const c = g();
    const name = "ts-sdk-" + Math.random().toString(16).slice(2, 10);
    const md = `---\nname: ${name}\ndescription: Convert furlongs to metres for the TypeScript SDK test.\n---\n# Furlongs\n`;
    const saved = await c.saveSkill(name, md, { "helpers.py": "F = 201.168\n", "assets/x.bin": new Uint8Array([0, 1]) });
    assert.deepEqual([saved.name, saved.version], [name, 1]);
    assert.ok((await c.listSkills("furlongs")).some((s) => s.name === name));
    assert.deepEqual((await c.getSkill(name)).files.map((f) => f.path).sort(), ["assets/x.bin", "helpers.py"]);
    const zip = await c.downloadSkill(name);
    assert.equal(String.fromCharCode(zip[0], zip[1]), "PK");
    assert.deepEqual((await c.skillVersions(name)).versions.map((v) => v.version), [1]);
    await c.deleteSkill(name);
    await assert.rejects(c.getSkill(name), NotFound);
  });

  test("batch", async () => {
    const c = g();
    const b = await c.submitBatch([{ language: "python", code: "print(1)" }, unchecked({ language: "cobol", code: "x" })]);
    assert.deepEqual(b.jobs.map((i) => i.status), [202, 400]);
    assert.equal(b.jobs[1].error?.field, "language");
    assert.deepEqual((await c.listJobs({ batchId: b.batch_id })).jobs.map((j) => j.id), [b.jobs[0].job!.id]);
  });

  test("search history", async () => {
    const c = g();
    const run = randomUUID();
    const before = new Date(Date.now() - 5000);
    const ok = await c.execute({ language: "python", code: "print(1)", metadata: { run, kind: "ok" }, env: { TOKEN: "s3cret" } });
    const bad = await c.execute({ language: "bash", code: "exit 3", metadata: { run, kind: "bad" } });
    assert.deepEqual([ok.status, bad.status], ["succeeded", "failed"]);
    const ids = (p: { jobs: { id: string }[] }) => p.jobs.map((j) => j.id);
    assert.deepEqual(ids(await c.listJobs({ metadata: { run } })), [bad.id, ok.id]);
    assert.deepEqual(ids(await c.listJobs({ metadata: { run }, status: ["failed", "error"] })), [bad.id]);
    assert.deepEqual(ids(await c.listJobs({ metadata: { run, kind: "ok" }, language: "python", createdAfter: before })), [ok.id]);
    assert.deepEqual(ids(await c.listJobs({ metadata: { run }, createdBefore: before })), []);
    const page = await c.listJobs({ metadata: { run, kind: "ok" }, includeSpec: true });
    assert.deepEqual([page.jobs[0].spec?.code, page.jobs[0].spec?.env_names], ["print(1)", ["TOKEN"]]);
    assert.ok(!JSON.stringify(page).includes("s3cret"));
    assert.deepEqual((await c.getJob(ok.id, { includeSpec: true })).spec?.env_names, ["TOKEN"]);
    await assert.rejects(c.listJobs({ status: "done" as never }), (e: unknown) => e instanceof InvalidArgument && e.field === "status");
  });

  test("errors", async () => {
    await assert.rejects(g().submit(unchecked({ language: "cobol", code: "x" })), (e: unknown) => e instanceof InvalidArgument && e.field === "language");
    await assert.rejects(g().getJob("job_" + "0".repeat(26)), NotFound);
    await assert.rejects(new Gantry({ url: URL_, apiKey: "gk_not_a_real_key_0000000" }).listJobs(), Unauthenticated);
    await assert.rejects(new Gantry({ url: "http://127.0.0.1:1", apiKey: KEY, maxRetries: 0 }).listJobs(), ConnectionFailed);
  });

  test("webhook", async () => {
    const c = g();
    let resolve!: (v: { headers: Record<string, string | string[] | undefined>; body: string }) => void;
    const got = new Promise<{ headers: Record<string, string | string[] | undefined>; body: string }>((r) => (resolve = r));
    const server = createServer(async (req, res) => {
      let body = "";
      for await (const chunk of req) body += chunk;
      res.writeHead(204).end();
      resolve({ headers: req.headers, body });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    try {
      const port = (server.address() as AddressInfo).port;
      const job = await c.submit({ language: "python", code: "print('hook')", webhook_url: `http://127.0.0.1:${port}/hook` });
      const msg = await got;
      const event = await verifyWebhook(await c.webhookSecret(), msg.headers, msg.body);
      assert.deepEqual([event.type, event.data.id, event.data.stdout], ["job.finished", job.id, "hook\n"]);
    } finally {
      server.close();
    }
  });
});

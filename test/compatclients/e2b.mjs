// Drives E2B's SDKs, unmodified (npm e2b and @e2b/code-interpreter), against
// an E2B-compatible server: E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY
// point them at it, as a user would. argv[2] names the scenario; it prints
// one JSON object of what the SDK calls returned (or threw), for
// test/e2b_test.go to check. OTHER_E2B_API_KEY is another tenant's key.
import { Sandbox as CodeSandbox } from "@e2b/code-interpreter";
import { ALL_TRAFFIC, Sandbox } from "e2b";

// thrown names an error the way the test reads it.
const thrown = (e) => ({ error: e?.constructor?.name ?? "Error", message: String(e?.message ?? e), exitCode: e?.exitCode });

async function attempt(fn) {
  try {
    return await fn();
  } catch (e) {
    return thrown(e);
  }
}

const isPNG = (b64) => typeof b64 === "string" && Buffer.from(b64, "base64").subarray(0, 8).equals(Buffer.from("\x89PNG\r\n\x1a\n", "latin1"));

const scenarios = {
  // runCode: state across calls, the last expression's value, streamed
  // output, a plot, a DataFrame, an error.
  async code() {
    const sbx = await CodeSandbox.create();
    const out = { sandboxId: sbx.sandboxId };
    const first = await sbx.runCode("x = 41\nx + 1");
    out.first = { text: first.text, main: first.results.map((r) => r.isMainResult), error: first.error ?? null };
    const second = await sbx.runCode("x += 1\nprint('x is', x)\nx");
    out.second = { text: second.text, stdout: second.logs.stdout };
    const chunks = [];
    const started = Date.now();
    const streamed = await sbx.runCode("import time\nprint('a', flush=True)\ntime.sleep(2)\nprint('b')", {
      onStdout: (m) => chunks.push({ line: m.line, ms: Date.now() - started }),
    });
    out.streamed = { chunks, ms: Date.now() - started, stdout: streamed.logs.stdout };
    const plot = await sbx.runCode("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()");
    out.plot = { results: plot.results.map((r) => ({ png: isPNG(r.png), text: r.text, main: r.isMainResult, formats: r.formats() })) };
    const df = await sbx.runCode("import pandas as pd\npd.DataFrame({'a': [1, 2]})");
    out.df = { text: df.text, html: (df.results[0]?.html ?? "").includes("<table") };
    const err = await sbx.runCode("def f():\n    return 1 / 0\nf()");
    out.error = err.error ? { name: err.error.name, value: err.error.value, traceback: err.error.traceback } : null;
    out.afterError = (await sbx.runCode("x")).text;
    // JavaScript and TypeScript: the default contexts, and one made.
    const js = async (code, opts) => {
      const e = await sbx.runCode(code, opts);
      return { text: e.text ?? null, stdout: e.logs.stdout, error: e.error ? `${e.error.name}: ${e.error.value}` : null };
    };
    out.js = [
      await js("const n = 20; console.log('from js'); n + 1", { language: "js" }),
      await js("n * 2", { language: "javascript" }),
      await js("null.x", { language: "js" }),
      await js("let t: number = 5; t * 3", { language: "ts" }),
    ];
    const ctx = await sbx.createCodeContext({ language: "js" });
    out.madeContext = { language: ctx.language, cwd: ctx.cwd };
    out.inContext = [await js("var own = 'mine'; typeof n", { context: ctx }), await js("own", { context: ctx })];
    out.contexts = (await sbx.listCodeContexts()).map((c) => c.language).sort();
    await sbx.restartCodeContext(ctx);
    out.afterRestart = await js("typeof own", { context: ctx });
    await sbx.removeCodeContext(ctx);
    out.removed = await attempt(() => sbx.runCode("1", { context: ctx }));
    out.pythonContext = await attempt(() => sbx.createCodeContext({ language: "python" }));
    out.killed = await sbx.kill();
    return out;
  },

  // commands.run in the foreground, in the background, one that fails,
  // stdin, kill, list; files.write/read/list, seen by code and commands.
  async commands() {
    const sbx = await CodeSandbox.create({ envs: { SANDBOX_WIDE: "everywhere" } });
    const out = { sandboxId: sbx.sandboxId };
    const fg = await sbx.commands.run("echo hello; echo oops >&2; echo $SANDBOX_WIDE $HOME; pwd");
    out.foreground = { stdout: fg.stdout, stderr: fg.stderr, exitCode: fg.exitCode };
    const seen = [];
    const bg = await sbx.commands.run("sleep 1; echo done", { background: true, onStdout: (d) => seen.push(d) });
    out.backgroundPid = bg.pid;
    out.listed = (await sbx.commands.list()).map((p) => ({ pid: p.pid, cmd: p.cmd, args: p.args }));
    // While it runs, other calls are answered.
    out.meanwhile = (await sbx.commands.run("echo meanwhile")).stdout;
    const done = await bg.wait();
    out.background = { stdout: done.stdout, exitCode: done.exitCode, seen };
    out.failing = await attempt(() => sbx.commands.run("echo partial; exit 3"));
    out.failingIsExitError = out.failing.error === "CommandExitError";
    const withStdin = await sbx.commands.run("read line; echo got $line", { background: true, stdin: true });
    await withStdin.sendStdin("hi\n");
    out.stdin = (await withStdin.wait()).stdout;
    const sleeper = await sbx.commands.run("sleep 300", { background: true });
    out.killedCommand = await sleeper.kill();
    out.afterKill = await attempt(() => sleeper.wait());
    out.root = await attempt(() => sbx.commands.run("id", { user: "root" }));

    await sbx.files.write("/home/user/data.txt", "hello files");
    await sbx.files.write("sub/dir/nested.txt", "nested");
    out.read = await sbx.files.read("/home/user/data.txt");
    out.list = (await sbx.files.list("/home/user")).map((e) => `${e.name}:${e.type}`).sort();
    out.nested = await sbx.files.read("/home/user/sub/dir/nested.txt");
    out.codeSees = (await sbx.runCode("open('/home/user/data.txt').read() + ' ' + open('data.txt').read()")).text;
    out.commandSees = (await sbx.commands.run("cat data.txt")).stdout;
    await sbx.commands.run("echo from a command > made.txt");
    out.madeByCommand = await sbx.files.read("made.txt");
    out.tmp = await sbx.files.write("/tmp/scratch.txt", "in tmp").then(() => sbx.files.read("/tmp/scratch.txt"), thrown);
    out.exists = [await sbx.files.exists("data.txt"), await sbx.files.exists("nope.txt")];
    out.missing = await attempt(() => sbx.files.read("nope.txt"));
    out.makeDir = [await sbx.files.makeDir("newdir"), await sbx.files.makeDir("newdir")];
    out.renamed = (await sbx.files.rename("data.txt", "renamed.txt")).path;
    await sbx.files.remove("renamed.txt");
    out.afterRemove = await sbx.files.exists("renamed.txt");
    out.envInCode = (await sbx.runCode("import os\nos.environ['SANDBOX_WIDE']")).text;
    out.callEnv = (await sbx.runCode("os.environ['CALL_ENV']", { envs: { CALL_ENV: "for this call" } })).text;

    // Bytes and streams both ways (a stream is sent raw, not as a form).
    const bytes = Uint8Array.from({ length: 300_000 }, (_, i) => (i * 7) % 256);
    await sbx.files.write("bin/data.bin", bytes.buffer);
    const back = await sbx.files.read("bin/data.bin", { format: "bytes" });
    out.bytesRoundTrip = back.length === bytes.length && back.every((b, i) => b === bytes[i]);
    await sbx.files.write("streamed.txt", new Blob(["a stream"]).stream());
    const chunks = [];
    for await (const c of await sbx.files.read("streamed.txt", { format: "stream" })) chunks.push(Buffer.from(c));
    out.streamed = Buffer.concat(chunks).toString();
    const multi = await sbx.files.write([{ path: "m1.txt", data: "one" }, { path: "m2.txt", data: "two" }]);
    out.multi = multi.map((e) => e.path);
    const info = await sbx.files.getInfo("bin/data.bin");
    out.fileInfo = { name: info.name, type: info.type, size: info.size, path: info.path };
    out.deep = (await sbx.files.list("/home/user", { depth: 2 })).map((e) => e.path).filter((p) => p.includes("/bin"));

    // Following a command from elsewhere, and closing its stdin.
    const cat = await sbx.commands.run("cat; echo end", { background: true, stdin: true });
    const follower = await sbx.commands.connect(cat.pid);
    await sbx.commands.sendStdin(cat.pid, "typed\n");
    await sbx.commands.closeStdin(cat.pid);
    const followed = await follower.wait();
    out.connectCommand = { stdout: followed.stdout, exitCode: followed.exitCode };
    out.stderrSeen = [];
    await sbx.commands.run("echo to-err >&2", { onStderr: (d) => out.stderrSeen.push(d) });
    await sbx.kill();
    return out;
  },

  // Sandbox.connect to a sandbox made elsewhere; list with a metadata
  // filter; getInfo; setTimeout; kill; what a killed sandbox answers.
  async lifecycle() {
    const tag = `run-${Date.now()}`;
    const a = await CodeSandbox.create({ metadata: { test: tag }, timeoutMs: 120_000 });
    const out = { sandboxId: a.sandboxId };
    await a.runCode("y = 7");
    const b = await CodeSandbox.connect(a.sandboxId);
    out.connected = (await b.runCode("y * 6")).text;
    const info = await a.getInfo();
    out.info = { sandboxId: info.sandboxId, metadata: info.metadata, state: info.state, templateId: info.templateId };
    await a.setTimeout(600_000);
    out.endAfterTimeout = (await a.getInfo()).endAt.getTime() - Date.now();
    const page = await Sandbox.list({ query: { metadata: { test: tag } } }).nextItems();
    out.listed = page.map((s) => s.sandboxId);
    out.running = await a.isRunning();
    // Internet access asked for, under a tenant whose allow-list is
    // empty: the sandbox is made, and reaches nothing.
    out.network = await attempt(async () => {
      const s = await CodeSandbox.create({ allowInternetAccess: true });
      const info = await s.getInfo();
      await s.kill();
      return info.allowInternetAccess;
    });
    out.template = await attempt(() => CodeSandbox.create("no-such-template"));
    out.killed = await a.kill();
    out.runningAfterKill = await a.isRunning();
    out.codeAfterKill = await attempt(() => a.runCode("1"));
    out.commandAfterKill = await attempt(() => a.commands.run("true"));
    out.killAgain = await Sandbox.kill(a.sandboxId);
    out.connectAfterKill = await attempt(() => CodeSandbox.connect(a.sandboxId));
    // A command's wait ends when its sandbox is killed, even without a
    // timeout of its own (it waited forever before).
    const c = await Sandbox.create({ timeoutMs: 120_000 });
    const handle = await c.commands.run("sleep 1000", { background: true, timeoutMs: 0 });
    await c.kill();
    out.waitAfterKill = await attempt(() => Promise.race([handle.wait(),
      new Promise((_, reject) => setTimeout(() => reject(new Error("still waiting a minute after the kill")), 60_000))]));
    return out;
  },

  // Per-sandbox egress under the tenant's allow-list (NET_TLS, NET_PLAIN
  // name localhost servers on it, NET_PLAIN_IP the plain one by address):
  // allowOut/denyOut by name and address, a header set at the proxy over
  // HTTPS and HTTP for code, commands and a background process, the
  // secret nowhere in the sandbox, updateNetwork, allowInternetAccess,
  // and another tenant (no allow-list) reaching nothing.
  async network() {
    const { NET_TLS, NET_PLAIN, NET_PLAIN_IP, NET_SECRET } = process.env;
    // Loopback names go past the proxy by NO_PROXY (the sandbox's own
    // loopback); these servers are the runner's, so the script drops it.
    const FETCH = `import os, sys, urllib.request, urllib.error
for k in ("no_proxy", "NO_PROXY"):
    os.environ.pop(k, None)
try:
    r = urllib.request.urlopen(sys.argv[1], timeout=20).read().decode()
except urllib.error.HTTPError as e:
    r = f"{e.code} {e.read().decode().strip()}"
except Exception as e:
    r = f"error {type(e).__name__}: {e}"
print(r)
`;
    const cell = async (sbx, u) => {
      const e = await sbx.runCode(`import sys\nsys.argv = ["fetch", ${JSON.stringify(u)}]\nexec(open("/home/user/fetch.py").read())`);
      return (e.logs.stdout.join("") + (e.error ? `${e.error.name}: ${e.error.value}` : "")).trim();
    };
    const run = async (sbx, u) => {
      const r = await attempt(() => sbx.commands.run(`python3 /home/user/fetch.py '${u}'`));
      return r.stdout !== undefined ? r.stdout.trim() : r;
    };
    const out = {};
    const rules = { localhost: [{ transform: { headers: { "X-Api-Key": NET_SECRET } } }] };
    const sbx = await CodeSandbox.create({ network: { allowOut: ["localhost"], denyOut: [ALL_TRAFFIC], rules } });
    await sbx.files.write("/home/user/fetch.py", FETCH);
    out.cellTLS = await cell(sbx, `${NET_TLS}/check`);
    out.cellPlain = await cell(sbx, `${NET_PLAIN}/check`);
    out.cellDenied = await cell(sbx, `${NET_PLAIN_IP}/check`);
    out.cmdTLS = await run(sbx, `${NET_TLS}/check`);
    out.cmdDenied = await run(sbx, `${NET_PLAIN_IP}/check`);
    const bg = await sbx.commands.run(`sleep 1; python3 /home/user/fetch.py '${NET_TLS}/check' > /tmp/bg.txt`, { background: true });
    await bg.wait();
    out.background = (await sbx.files.read("/tmp/bg.txt")).trim();
    // Where the secret could be: every process's environment and command
    // line, and the files the sandbox can write or reads its program from.
    const env = await sbx.commands.run("env");
    const cellEnv = (await sbx.runCode("import os\nprint('\\n'.join(f'{k}={v}' for k, v in os.environ.items()))")).logs.stdout.join("");
    const dump = await sbx.commands.run(
      "{ cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline; find /tmp /workspace /home/user /var/tmp /dev/shm -type f -size -8M -print0 | xargs -0 cat; } 2>/dev/null | base64 -w0",
      { timeoutMs: 120_000 },
    );
    const haystack = [env.stdout, cellEnv, Buffer.from(dump.stdout, "base64").toString("latin1")];
    out.dumpBytes = haystack[2].length;
    out.leaked = haystack.some((h) => h.includes(NET_SECRET));
    out.caVars = ["SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"].filter((k) => env.stdout.includes(`${k}=`));
    const info = await sbx.getInfo();
    out.info = { allowInternetAccess: info.allowInternetAccess, network: info.network };
    await sbx.updateNetwork({ denyOut: ["localhost"] });
    out.afterUpdate = { cmdIP: await run(sbx, `${NET_PLAIN_IP}/check`), cmdTLS: await run(sbx, `${NET_TLS}/check`), cellIP: await cell(sbx, `${NET_PLAIN_IP}/check`) };
    await sbx.kill();

    const deny = await CodeSandbox.create({ network: { denyOut: ["localhost"] } });
    await deny.files.write("/home/user/fetch.py", FETCH);
    out.denyName = { name: await cell(deny, `${NET_PLAIN}/check`), ip: await cell(deny, `${NET_PLAIN_IP}/check`) };
    await deny.kill();
    const off = await CodeSandbox.create({ allowInternetAccess: false });
    await off.files.write("/home/user/fetch.py", FETCH);
    out.noInternet = await cell(off, `${NET_PLAIN_IP}/check`);
    await off.kill();
    const theirs = await CodeSandbox.create({ apiKey: process.env.OTHER_E2B_API_KEY, allowInternetAccess: true, network: { rules } });
    await theirs.files.write("/home/user/fetch.py", FETCH);
    out.otherTenant = await cell(theirs, `${NET_TLS}/check`);
    await theirs.kill();
    return out;
  },

  // pause() with its memory, getInfo and list while paused, a call to it
  // refused (no autoResume), connect() resuming it with its variables,
  // files and processes.
  async pause() {
    const sbx = await CodeSandbox.create({ timeoutMs: 300_000 });
    const out = { sandboxId: sbx.sandboxId };
    await sbx.runCode("import subprocess\nx = 41\nsleeper = subprocess.Popen(['sleep', '600'])");
    await sbx.files.write("/home/user/kept.txt", "kept");
    let t = Date.now();
    out.paused = await sbx.pause();
    out.pauseMs = Date.now() - t;
    out.pausedAgain = await sbx.pause();
    out.state = (await sbx.getInfo()).state;
    out.listedPaused = (await Sandbox.list({ query: { state: ["paused"] } }).nextItems()).map((s) => s.sandboxId);
    out.listedRunning = (await Sandbox.list({ query: { state: ["running"] } }).nextItems()).map((s) => s.sandboxId);
    out.callWhilePaused = await attempt(() => sbx.commands.run("true"));
    out.lifecycle = (await sbx.getInfo()).lifecycle;
    t = Date.now();
    const back = await CodeSandbox.connect(sbx.sandboxId, { timeoutMs: 300_000 });
    const cell = await back.runCode("x += 1\nprint(sleeper.poll() is None)\nx");
    out.resumeMs = Date.now() - t;
    out.afterResume = { text: cell.text, stdout: cell.logs.stdout };
    out.file = await back.files.read("/home/user/kept.txt");
    out.stateAfter = (await back.getInfo()).state;
    // The first sandbox object works again too: same id, same token.
    out.sameObject = (await sbx.runCode("x")).text;
    out.pauseNoMemory = await attempt(() => back.pause({ keepMemory: false }));
    await back.kill();
    return out;
  },

  // lifecycle: onTimeout 'pause' with autoResume (a call resumes it) and
  // without (a call is refused until connect()).
  async autopause() {
    const auto = await CodeSandbox.create({ timeoutMs: 10_000, lifecycle: { onTimeout: "pause", autoResume: true } });
    const manual = await CodeSandbox.create({ timeoutMs: 10_000, lifecycle: { onTimeout: { action: "pause", keepMemory: true } } });
    const out = { auto: auto.sandboxId, manual: manual.sandboxId };
    await auto.runCode("y = 5");
    await manual.runCode("y = 6");
    out.lifecycles = [(await auto.getInfo()).lifecycle, (await manual.getInfo()).lifecycle];
    // Wait for both to be paused by their timeout.
    const deadline = Date.now() + 120_000;
    const states = async () => Promise.all([auto, manual].map((s) => s.getInfo().then((i) => i.state, () => "unknown")));
    for (out.states = await states(); out.states.some((s) => s !== "paused") && Date.now() < deadline; out.states = await states()) {
      await new Promise((r) => setTimeout(r, 500));
    }
    out.autoCell = (await attempt(async () => (await auto.runCode("y * 2")).text)) ?? null;
    out.autoState = (await auto.getInfo()).state;
    out.manualCall = await attempt(() => manual.runCode("y"));
    out.manualState = (await manual.getInfo()).state;
    const resumed = await CodeSandbox.connect(manual.sandboxId);
    out.manualAfterConnect = (await resumed.runCode("y * 2")).text;
    out.filesystemOnly = await attempt(() => CodeSandbox.create({ lifecycle: { onTimeout: { action: "pause", keepMemory: false } } }));
    await auto.kill();
    await manual.kill();
    return out;
  },

  // createSnapshot, Sandbox.create(snapshotId) and by name, listSnapshots
  // (all, and a sandbox's), deleteSnapshot.
  async snapshot() {
    const sbx = await CodeSandbox.create();
    const out = { sandboxId: sbx.sandboxId };
    await sbx.runCode("z = 'at the snapshot'");
    await sbx.files.write("/home/user/snap.txt", "snapped");
    const name = `snap-${Date.now()}`;
    let t = Date.now();
    const snap = await sbx.createSnapshot({ name });
    out.snapshotMs = Date.now() - t;
    out.snapshot = snap;
    await sbx.runCode("z = 'after it'");
    t = Date.now();
    const from = await CodeSandbox.create(snap.snapshotId);
    out.fromSnapshot = (await from.runCode("z")).text;
    out.restoreMs = Date.now() - t;
    out.fileFrom = await from.files.read("/home/user/snap.txt");
    out.fromTemplate = (await from.getInfo()).templateId;
    const byName = await CodeSandbox.create(name);
    out.byName = (await byName.runCode("z")).text;
    out.original = (await sbx.runCode("z")).text;
    out.listed = (await Sandbox.listSnapshots().nextItems()).map((s) => s.snapshotId);
    out.listedOfSandbox = (await sbx.listSnapshots().nextItems()).map((s) => s.snapshotId);
    out.listedOfOther = (await from.listSnapshots().nextItems()).map((s) => s.snapshotId);
    out.otherTenant = {
      create: await attempt(() => CodeSandbox.create(snap.snapshotId, { apiKey: process.env.OTHER_E2B_API_KEY })),
      list: (await Sandbox.listSnapshots({ apiKey: process.env.OTHER_E2B_API_KEY }).nextItems()).map((s) => s.snapshotId),
      delete: await Sandbox.deleteSnapshot(snap.snapshotId, { apiKey: process.env.OTHER_E2B_API_KEY }),
      snapshot: await attempt(() => Sandbox.createSnapshot(sbx.sandboxId, { apiKey: process.env.OTHER_E2B_API_KEY })),
    };
    out.deleted = await Sandbox.deleteSnapshot(snap.snapshotId);
    out.deletedAgain = await Sandbox.deleteSnapshot(snap.snapshotId);
    out.createAfterDelete = await attempt(() => CodeSandbox.create(snap.snapshotId));
    for (const s of [sbx, from, byName]) await s.kill();
    return out;
  },

  // fork({count: 2}): each fork goes on from the sandbox's state, apart
  // from it and from the other.
  async fork() {
    const sbx = await CodeSandbox.create();
    const out = { sandboxId: sbx.sandboxId };
    await sbx.runCode("v = 'parent'");
    await sbx.files.write("/home/user/shared.txt", "from the parent");
    let t = Date.now();
    const forks = await sbx.fork({ count: 2, timeoutMs: 300_000 });
    out.forkMs = Date.now() - t;
    out.forks = forks.map((f) => (f instanceof Error ? thrown(f) : f.sandboxId));
    const [a, b] = forks;
    out.inForks = [(await a.runCode("v")).text, (await b.runCode("v")).text];
    await a.runCode("v = 'a'");
    await a.files.write("/home/user/only-a.txt", "a");
    await b.runCode("v = 'b'");
    await b.commands.run("echo b > /tmp/only-b.txt");
    out.values = [(await sbx.runCode("v")).text, (await a.runCode("v")).text, (await b.runCode("v")).text];
    const has = async (s, p) => (await s.commands.run(`test -e ${p} && echo yes || echo no`)).stdout.trim();
    out.onlyA = [await has(sbx, "/home/user/only-a.txt"), await has(a, "/home/user/only-a.txt"), await has(b, "/home/user/only-a.txt")];
    out.onlyB = [await has(sbx, "/tmp/only-b.txt"), await has(a, "/tmp/only-b.txt"), await has(b, "/tmp/only-b.txt")];
    out.shared = await b.files.read("/home/user/shared.txt");
    out.tooMany = await attempt(() => sbx.fork({ count: 1000 }));
    t = Date.now();
    const four = await Sandbox.fork(sbx.sandboxId, { count: 4, timeoutMs: 60_000 });
    out.fork4Ms = Date.now() - t;
    out.four = four.map((f) => (f instanceof Error ? thrown(f) : "sandbox"));
    out.otherTenant = {
      fork: await attempt(() => Sandbox.fork(sbx.sandboxId, { count: 1, apiKey: process.env.OTHER_E2B_API_KEY })),
      pause: await attempt(() => Sandbox.pause(sbx.sandboxId, { apiKey: process.env.OTHER_E2B_API_KEY })),
      connect: await attempt(() => Sandbox.connect(sbx.sandboxId, { apiKey: process.env.OTHER_E2B_API_KEY })),
    };
    for (const s of [sbx, a, b, ...four.filter((f) => !(f instanceof Error))]) await s.kill();
    return out;
  },

  // Another tenant's key and token get nothing of a sandbox.
  async tenants() {
    const other = process.env.OTHER_E2B_API_KEY;
    const mine = await CodeSandbox.create();
    await mine.runCode("secret = 'mine'");
    const theirs = await CodeSandbox.create({ apiKey: other });
    const out = { mine: mine.sandboxId, theirs: theirs.sandboxId };
    out.connect = await attempt(() => CodeSandbox.connect(mine.sandboxId, { apiKey: other }));
    out.info = await attempt(() => Sandbox.getInfo(mine.sandboxId, { apiKey: other }));
    out.kill = await attempt(() => Sandbox.kill(mine.sandboxId, { apiKey: other }));
    out.list = (await Sandbox.list({ apiKey: other }).nextItems()).map((s) => s.sandboxId);
    // Their sandbox's token, presented for mine.
    const forged = new CodeSandbox({ sandboxId: mine.sandboxId, envdAccessToken: theirs.envdAccessToken, trafficAccessToken: theirs.envdAccessToken,
      envdVersion: "0.5.7", apiKey: other });
    out.forgedCode = await attempt(() => forged.runCode("secret"));
    out.forgedCommand = await attempt(() => forged.commands.run("cat /proc/self/environ"));
    out.forgedFile = await attempt(() => forged.files.read("/home/user/x"));
    out.noToken = await fetch(`${process.env.E2B_SANDBOX_URL}/health`, { headers: { "E2b-Sandbox-Id": mine.sandboxId } }).then((r) => r.status);
    out.stillMine = (await mine.runCode("secret")).text;
    // A sandbox's token, just used inside it, is no API key.
    const token = mine.envdAccessToken;
    const base = process.env.E2B_API_URL.replace(/\/compat\/e2b$/, "");
    out.tokenAsKey = [
      await fetch(`${base}/v1/jobs`, { headers: { Authorization: `Bearer ${token}` } }).then((r) => r.status),
      await fetch(`${process.env.E2B_API_URL}/sandboxes`, { headers: { "X-API-Key": token } }).then((r) => r.status),
    ];
    await mine.kill();
    await theirs.kill();
    return out;
  },
};

const name = process.argv[2];
if (!scenarios[name]) {
  console.error(`unknown scenario ${name}`);
  process.exit(2);
}
let result;
try {
  result = await scenarios[name]();
} catch (e) {
  result = { fatal: thrown(e), stack: String(e?.stack ?? "") };
}
// The SDKs leave request timers behind that would hold the process for a
// minute: the scenario is done.
process.stdout.write(JSON.stringify(result), () => process.exit(0));

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
    out.pause = await attempt(() => a.pause());
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

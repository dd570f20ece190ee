// gantry's JavaScript kernel: a Node process of a stateful session's live
// sandbox (jskernel.go) that runs cells in one global scope, one after
// another. It reads one JSON request a line on stdin ({"id", "path",
// "env"}), runs the file at path as a script of this process (so that
// top-level declarations stay for the next cells, as in Node's REPL),
// TypeScript first stripped of its types by esbuild when the kernel was
// started with "typescript", and writes around what the cell itself
// writes "\x1e<id>:start\n" and "\x1e<id>:end:<json>\x1e\n", on stderr
// and then on stdout. Stdout's JSON holds the cell's exit code
// (process.exitCode as the cell left it, 1 for an error) and the value of
// its last expression ({"value": {"text/plain": ...}}) or its error
// ({"error": {"name", "value", "traceback"}}, told on stderr too); stderr's
// is {}. An id is
// the agent's and unguessable: what a cell prints cannot end another's.
// The kernel's own names are its function's, out of the cells' reach.
(() => {
  "use strict";
  const fs = require("node:fs");
  const Module = require("node:module");
  const vm = require("node:vm");
  const util = require("node:util");
  const readline = require("node:readline");
  const { spawnSync } = require("node:child_process");

  const typescript = process.argv.includes("typescript");
  const RS = "\x1e";
  // Cells run as scripts of this process: what they require, they find.
  globalThis.require = require;

  function transpile(code) {
    const r = spawnSync("esbuild", ["--loader=ts", "--log-level=error"], { input: code, encoding: "utf8" });
    if (r.status !== 0) {
      const e = new SyntaxError((r.stderr || "esbuild failed").trim());
      e.name = "SyntaxError";
      throw e;
    }
    return r.stdout;
  }

  function render(value) {
    if (value === undefined) return null;
    const bundle = { "text/plain": typeof value === "string" ? JSON.stringify(value) : util.inspect(value, { depth: 4 }) };
    if (value !== null && typeof value === "object") {
      try {
        const json = JSON.parse(JSON.stringify(value));
        if (json !== null && typeof json === "object") bundle["application/json"] = json;
      } catch {}
    }
    return bundle;
  }

  function failure(e) {
    if (e instanceof Error) {
      // The cell's frames, not the kernel's.
      const lines = String(e.stack || e).split("\n");
      const cut = lines.findIndex((l) => l.includes("node:vm") || l.includes("[eval]"));
      return { name: e.name, value: e.message, traceback: (cut > 0 ? lines.slice(0, cut) : lines).join("\n") };
    }
    return { name: "Error", value: util.inspect(e), traceback: util.inspect(e) };
  }

  // A cell's variables are the environment's while it runs; what was
  // there before comes back after.
  async function run(req) {
    const saved = {};
    for (const [k, v] of Object.entries(req.env || {})) {
      saved[k] = process.env[k];
      process.env[k] = String(v);
    }
    // NODE_PATH (code mode's wrappers) counts for the cell's requires.
    Module._initPaths();
    try {
      let code = fs.readFileSync(String(req.path), "utf8");
      if (typescript) code = transpile(code);
      let value = vm.runInThisContext(code, { filename: "<cell>", displayErrors: false });
      if (value && typeof value.then === "function") value = await value;
      return { value: render(value) };
    } finally {
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
      Module._initPaths();
    }
  }

  const queue = [];
  let busy = false;

  async function next() {
    if (busy) return;
    busy = true;
    while (queue.length > 0) {
      const req = queue.shift();
      process.stderr.write(`${RS}${req.id}:start\n`);
      process.stdout.write(`${RS}${req.id}:start\n`);
      process.exitCode = undefined;
      let out;
      try {
        out = await run(req);
      } catch (e) {
        out = { error: failure(e) };
      }
      // An error is told on stderr too, as Node tells an uncaught one.
      if (out.error) process.stderr.write(`${out.error.traceback || out.error.name + ": " + out.error.value}\n`);
      out.code = out.error ? 1 : Number(process.exitCode) || 0;
      process.exitCode = undefined;
      let text;
      try {
        text = JSON.stringify(out);
      } catch (e) {
        text = JSON.stringify({ code: 1, error: failure(e) });
      }
      process.stderr.write(`${RS}${req.id}:end:{}${RS}\n`);
      process.stdout.write(`${RS}${req.id}:end:${text}${RS}\n`);
    }
    busy = false;
  }

  readline.createInterface({ input: process.stdin, terminal: false }).on("line", (line) => {
    let req;
    try {
      req = JSON.parse(line);
    } catch {
      return;
    }
    if (typeof req.id !== "string") return;
    queue.push(req);
    next();
  });
})();

// gantry's spare Node (nodespare.go): started ahead of time in a job's
// fresh bubblewrap sandbox, it pays Node's start-up before the job exists,
// then waits on stdin for its one job: a header (4-byte big-endian length,
// then JSON: {"build", "main", "args", "env", "source_maps"}), followed by
// the job's stdin. It runs the program in this process as
// `node [--enable-source-maps] <main> <args>` would, after the build step
// (esbuild, for TypeScript) if there is one. The job's environment
// replaces this process's whole; nothing of this script stays in the
// program's reach (it runs in a function, and what `node -e` put on the
// global object is taken off).
(() => {
  "use strict";
  const fs = require("node:fs");
  const Module = require("node:module");
  const { spawnSync } = require("node:child_process");

  function read(n) {
    const buf = Buffer.alloc(n);
    let got = 0;
    while (got < n) {
      let k;
      try {
        k = fs.readSync(0, buf, got, n - got, null);
      } catch (e) {
        if (e.code === "EAGAIN") continue;
        throw e;
      }
      if (k === 0) process.exit(0); // the agent went away before a job came
      got += k;
    }
    return buf;
  }

  // Everything written before this line is not the job's output.
  fs.writeSync(2, "\0gantry-ready\n");
  const job = JSON.parse(read(read(4).readUInt32BE(0)).toString("utf8"));
  // The job's environment, then PWD as the sandbox's making set it, last
  // (as a Node started in the sandbox finds it).
  const pwd = process.env.PWD;
  for (const k of Object.keys(process.env)) delete process.env[k];
  for (const kv of job.env || []) {
    const i = kv.indexOf("=");
    if (i > 0) process.env[kv.slice(0, i)] = kv.slice(i + 1);
  }
  if (pwd !== undefined) {
    delete process.env.PWD;
    process.env.PWD = pwd;
  }
  // Where require looks, from the job's NODE_PATH and HOME, as Node
  // works it out as it starts.
  Module._initPaths();
  if (job.build) {
    const r = spawnSync(job.build[0], job.build.slice(1), { stdio: ["ignore", "inherit", "inherit"] });
    if (r.error) {
      process.stderr.write(`gantry: cannot run ${job.build[0]}: ${r.error.message}\n`);
      process.exit(127);
    }
    if (r.status !== 0) process.exit(r.status === null ? 1 : r.status);
  }
  if (job.source_maps) {
    process.setSourceMapsEnabled(true);
    process.execArgv = ["--enable-source-maps"];
  } else {
    process.execArgv = [];
  }
  // `node -e` put its module's names and the built-in modules (as the
  // REPL has them) on the global object; a program run from a file has
  // neither.
  for (const k of ["require", "module", "exports", "__filename", "__dirname"]) delete globalThis[k];
  for (const k of Module.builtinModules) {
    if (k !== "process" && k !== "console" && Object.prototype.hasOwnProperty.call(globalThis, k)) delete globalThis[k];
  }
  delete process._eval;
  process.argv = [process.execPath, job.main, ...(job.args || [])];
  Module.runMain();
})();

// Drives npm's piston-client, unmodified, against a Piston-compatible
// server: argv[2] is the server (piston-client's `server` option), stdin a
// JSON array of calls, each [method, ...arguments] of the client; prints a
// JSON array of what each call returned.
import piston from "piston-client";

const chunks = [];
for await (const c of process.stdin) chunks.push(c);
const calls = JSON.parse(Buffer.concat(chunks).toString());
const client = piston({ server: process.argv[2] });
const out = [];
for (const [method, ...args] of calls) {
  const res = await client[method](...args);
  // piston-client reports a failure as {success: false, error}.
  if (res && res.error instanceof Error) res.error = String(res.error);
  out.push(res);
}
process.stdout.write(JSON.stringify(out));

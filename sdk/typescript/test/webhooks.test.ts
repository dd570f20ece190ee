import assert from "node:assert/strict";
import { test } from "node:test";

import { WebhookVerificationError, signWebhook, verifyWebhook } from "../src/index.js";

// The example of the Standard Webhooks reference libraries.
const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const MSG_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek";
const TIMESTAMP = 1614265330;
const BODY = '{"test": 2432232314}';
const SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

const headers = (sig = SIGNATURE) => ({ "webhook-id": MSG_ID, "webhook-timestamp": String(TIMESTAMP), "webhook-signature": sig });

test("signWebhook matches the spec's example", async () => {
  assert.equal(await signWebhook(SECRET, MSG_ID, TIMESTAMP, BODY), SIGNATURE);
});

test("verifyWebhook accepts a good message", async () => {
  assert.deepEqual(await verifyWebhook(SECRET, headers(), BODY, { now: TIMESTAMP }), { test: 2432232314 });
  // Several signatures (a rotation), Headers, bytes.
  const h = new Headers(headers("v1,AAAA " + SIGNATURE));
  await verifyWebhook(SECRET, h, new TextEncoder().encode(BODY), { now: TIMESTAMP + 299 });
});

test("verifyWebhook refuses bad messages", async () => {
  const cases: Array<[string, Record<string, string>, string, number]> = [
    ["tampered body", headers(), '{"test": 1}', TIMESTAMP],
    ["wrong signature", headers("v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc="), BODY, TIMESTAMP],
    ["other scheme", headers("v2," + SIGNATURE.slice(3)), BODY, TIMESTAMP],
    ["too old", headers(), BODY, TIMESTAMP + 301],
    ["missing header", { "webhook-id": MSG_ID }, BODY, TIMESTAMP],
  ];
  for (const [name, h, body, now] of cases) {
    await assert.rejects(verifyWebhook(SECRET, h, body, { now }), WebhookVerificationError, name);
  }
});

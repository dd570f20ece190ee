import { webcrypto } from "./crypto.js";
import { WebhookVerificationError } from "./errors.js";
import type { WebhookEvent } from "./types.js";

/** How far a message's timestamp may be from now, in seconds. */
export const TOLERANCE_SECONDS = 300;

const encoder = new TextEncoder();

async function subtle() {
  return (await webcrypto()).subtle;
}

function fromBase64(s: string): Uint8Array {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

export function toBase64(b: Uint8Array): string {
  let bin = "";
  for (let i = 0; i < b.length; i += 0x8000) bin += String.fromCharCode(...b.subarray(i, i + 0x8000));
  return btoa(bin);
}

/** The v1 signature of a message, as the webhook-signature header has it. */
export async function signWebhook(secret: string, msgId: string, timestamp: number, body: string | Uint8Array): Promise<string> {
  const key = fromBase64(secret.startsWith("whsec_") ? secret.slice(6) : secret);
  const s = await subtle();
  const k = await s.importKey("raw", key, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const head = encoder.encode(`${msgId}.${timestamp}.`);
  const bytes = typeof body === "string" ? encoder.encode(body) : body;
  const msg = new Uint8Array(head.length + bytes.length);
  msg.set(head);
  msg.set(bytes, head.length);
  return "v1," + toBase64(new Uint8Array(await s.sign("HMAC", k, msg)));
}

type HeaderSource = Headers | Record<string, string | string[] | undefined>;

function header(h: HeaderSource, name: string): string {
  if (typeof (h as Headers).get === "function") return (h as Headers).get(name) ?? "";
  for (const [k, v] of Object.entries(h)) {
    if (k.toLowerCase() === name) return Array.isArray(v) ? v.join(" ") : (v ?? "");
  }
  return "";
}

function equal(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let d = 0;
  for (let i = 0; i < a.length; i++) d |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return d === 0;
}

/**
 * Checks a webhook message and returns its event. `secret` is the tenant's
 * `whsec_...` secret (`Gantry.webhookSecret()`), `headers` the request's
 * headers (a Headers or Node's IncomingHttpHeaders), `body` its raw bytes
 * or text, exactly as received. Throws WebhookVerificationError when a
 * header is missing, the timestamp is more than `tolerance` seconds from
 * now, or no v1 signature matches.
 */
export async function verifyWebhook(
  secret: string,
  headers: HeaderSource,
  body: string | Uint8Array,
  opts: { now?: number; tolerance?: number } = {},
): Promise<WebhookEvent> {
  const id = header(headers, "webhook-id");
  const ts = header(headers, "webhook-timestamp");
  const sigs = header(headers, "webhook-signature");
  if (!id || !ts || !sigs) throw new WebhookVerificationError("missing webhook-id, webhook-timestamp or webhook-signature");
  const sent = Number(ts);
  if (!/^\d+$/.test(ts)) throw new WebhookVerificationError("webhook-timestamp is not a number of seconds");
  const now = opts.now ?? Date.now() / 1000;
  if (Math.abs(now - sent) > (opts.tolerance ?? TOLERANCE_SECONDS)) {
    throw new WebhookVerificationError("webhook-timestamp is too far from now");
  }
  let want: string;
  try {
    want = await signWebhook(secret, id, sent, body);
  } catch {
    throw new WebhookVerificationError("the secret is not whsec_ followed by base64");
  }
  for (const sig of sigs.split(/\s+/)) {
    if (sig.startsWith("v1,") && equal(sig, want)) {
      const text = typeof body === "string" ? body : new TextDecoder().decode(body);
      return JSON.parse(text) as WebhookEvent;
    }
  }
  throw new WebhookVerificationError("no valid signature");
}

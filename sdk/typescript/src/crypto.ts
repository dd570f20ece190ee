type WebCrypto = typeof globalThis.crypto;

/** Web Crypto: the global one, or Node 18's (which has no global). */
export async function webcrypto(): Promise<WebCrypto> {
  if (globalThis.crypto?.subtle) return globalThis.crypto;
  const { webcrypto } = await import("node:crypto");
  return webcrypto as WebCrypto;
}

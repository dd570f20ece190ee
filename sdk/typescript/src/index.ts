/**
 * gantry-client: a client of gantry's HTTP API (fetch-based ESM, Node 18+).
 *
 *     import { Gantry } from "gantry-client";
 *     const g = new Gantry();   // GANTRY_URL, GANTRY_API_KEY
 *     const job = await g.execute({ language: "python", code: "print(6*7)" });
 *     console.log(job.status, job.stdout);
 *
 * The types of the API's bodies are generated from its OpenAPI document.
 */
export * from "./client.js";
export * from "./errors.js";
export * from "./types.js";
export { signWebhook, verifyWebhook, TOLERANCE_SECONDS } from "./webhooks.js";

import { ConnectionFailed, GantryError, errorFor } from "./errors.js";
import type {
  ArtifactManifest, BatchResponse, EnvironmentList, FileList, InputFile, Job, JobList, JobRequest, JobStatus, LanguageList,
  LogStatusEvent, PresignedURL, Session, SessionList, SessionRequest, Settings, Skill, SkillSummary, SkillVersions,
  WebhookSecret,
} from "./types.js";
import { webcrypto } from "./crypto.js";
import { toBase64 } from "./webhooks.js";

/** The gantry `gantry dev` serves. */
export const DEFAULT_URL = "http://127.0.0.1:8080";

export interface GantryOptions {
  /** The gantry's URL (default: GANTRY_URL, else http://127.0.0.1:8080). */
  url?: string;
  /** An API key (default: GANTRY_API_KEY). */
  apiKey?: string;
  /** Retries of calls that are safe to repeat (default 4). */
  maxRetries?: number;
  /** How long one call may take, in milliseconds (default 90 s; long waits add theirs). */
  timeoutMs?: number;
  /** The fetch to use (default: the global one). */
  fetch?: typeof fetch;
}

/** A job request; `files` may also map paths to text or bytes. */
export type JobInput = Omit<JobRequest, "files"> & { files?: InputFile[] | Record<string, string | Uint8Array> };

/** One event of a job's log stream: output, then, last, its status. */
export type LogEvent =
  | { stream: "stdout" | "stderr"; text: string }
  | { stream: "status"; status: LogStatusEvent };

/** The filters of listJobs and iterJobs: every one given must hold. */
export interface JobFilter {
  /** Any of these statuses. */
  status?: JobStatus | JobStatus[];
  /** Any of these languages. */
  language?: string | string[];
  /** Created at or after this time (a Date or RFC 3339). */
  createdAfter?: Date | string;
  /** Created strictly before this time (a Date or RFC 3339). */
  createdBefore?: Date | string;
  /** Every pair must be in the job's metadata. */
  metadata?: Record<string, string>;
  sessionId?: string;
  batchId?: string;
  /** Add what each job ran (`spec`: env names, never values). */
  includeSpec?: boolean;
  limit?: number;
}

const csv = (v: string | string[] | undefined) => (Array.isArray(v) ? v.join(",") : v);
const when = (v: Date | string | undefined) => (v instanceof Date ? v.toISOString() : v);

const TERMINAL = new Set<JobStatus>(["succeeded", "failed", "timed_out", "cancelled", "error"]);

interface Call {
  method: string;
  path: string;
  query?: Record<string, string | number | undefined>;
  json?: unknown;
  body?: Uint8Array | string;
  contentType?: string;
  accept?: string;
  /** Calls that are safe to repeat are retried. */
  idempotent?: boolean;
  timeoutMs?: number;
  /** The body as bytes, whatever its type. */
  raw?: boolean;
  /** The response itself, unread. */
  stream?: boolean;
}

function env(name: string): string | undefined {
  return typeof process !== "undefined" ? process.env?.[name] : undefined;
}

const enc = (s: string) => encodeURIComponent(s);
const encPath = (p: string) => p.split("/").map(encodeURIComponent).join("/");

async function randomKey(): Promise<string> {
  const b = new Uint8Array(16);
  (await webcrypto()).getRandomValues(b);
  return "ts-" + Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A client of one gantry. Calls that are safe to repeat (reads, deletes,
 * cancels, and submissions, which always carry an idempotency key) are
 * retried on connection failures, 429, 502, 503 and 504, waiting as the
 * server's Retry-After says, else with exponential backoff.
 *
 *     const g = new Gantry();   // GANTRY_URL, GANTRY_API_KEY
 *     const job = await g.execute({ language: "python", code: "print(6*7)" });
 */
export class Gantry {
  readonly url: string;
  readonly maxRetries: number;
  readonly timeoutMs: number;
  #key: string;
  #fetch: typeof fetch;

  constructor(opts: GantryOptions = {}) {
    this.url = (opts.url ?? env("GANTRY_URL") ?? DEFAULT_URL).replace(/\/+$/, "");
    const key = opts.apiKey ?? env("GANTRY_API_KEY");
    if (!key) throw new Error("no API key: pass apiKey or set GANTRY_API_KEY");
    this.#key = key;
    this.maxRetries = opts.maxRetries ?? 4;
    this.timeoutMs = opts.timeoutMs ?? 90_000;
    this.#fetch = opts.fetch ?? globalThis.fetch.bind(globalThis);
  }

  // -- transport ------------------------------------------------------------

  async #call<T>(c: Call): Promise<T> {
    let url = this.url + c.path;
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(c.query ?? {})) if (v !== undefined) q.set(k, String(v));
    if ([...q].length) url += "?" + q;
    const headers: Record<string, string> = { Authorization: "Bearer " + this.#key };
    let body = c.body;
    let contentType = c.contentType;
    if (c.json !== undefined) {
      body = JSON.stringify(c.json);
      contentType = "application/json";
    }
    if (contentType) headers["Content-Type"] = contentType;
    if (c.accept) headers["Accept"] = c.accept;
    for (let attempt = 0; ; attempt++) {
      const ctl = new AbortController();
      const timer = c.stream ? undefined : setTimeout(() => ctl.abort(), c.timeoutMs ?? this.timeoutMs);
      let resp: Response;
      try {
        resp = await this.#fetch(url, { method: c.method, headers, body, signal: ctl.signal, redirect: "manual" });
      } catch (e) {
        clearTimeout(timer);
        if (c.idempotent && attempt < this.maxRetries) {
          await sleep(backoff(attempt));
          continue;
        }
        const cause = (e as { cause?: { code?: string; message?: string } }).cause;
        const why = ctl.signal.aborted ? "timed out" : (cause?.code ?? cause?.message ?? String(e));
        throw new ConnectionFailed(`cannot reach gantry at ${this.url}: ${why}`, { cause: e });
      }
      try {
        if (resp.status >= 300) {
          const err = await readError(resp);
          if (c.idempotent && attempt < this.maxRetries && [429, 502, 503, 504].includes(resp.status)) {
            await sleep(err.retryAfter !== undefined ? Math.min(err.retryAfter, 60) * 1000 : backoff(attempt));
            continue;
          }
          throw err;
        }
        if (c.stream) return resp as unknown as T;
        if (c.raw) return new Uint8Array(await resp.arrayBuffer()) as unknown as T;
        const text = await resp.text();
        if ((resp.headers.get("content-type") ?? "").startsWith("application/json")) {
          return (text ? JSON.parse(text) : undefined) as T;
        }
        return text as unknown as T;
      } catch (e) {
        if (e instanceof GantryError) throw e;
        if (c.idempotent && attempt < this.maxRetries) {
          await sleep(backoff(attempt));
          continue;
        }
        throw new ConnectionFailed(`reading the answer of ${c.method} ${c.path} failed: ${e}`, { cause: e });
      } finally {
        clearTimeout(timer);
      }
    }
  }

  // -- jobs -----------------------------------------------------------------

  static async #request(req: JobInput): Promise<JobRequest> {
    const out: JobRequest = { ...req, files: undefined } as JobRequest;
    if (req.files && !Array.isArray(req.files)) {
      out.files = Object.entries(req.files).map(([path, content]) =>
        typeof content === "string" ? { path, content } : { path, content: toBase64(content), encoding: "base64" as const },
      );
    } else if (req.files) {
      out.files = req.files;
    } else {
      delete out.files;
    }
    // A key makes the submission safe to retry after a lost answer.
    out.idempotency_key ??= await randomKey();
    return out;
  }

  /** Queue a job and return it (status queued) at once. */
  async submit(req: JobInput): Promise<Job> {
    return this.#call({ method: "POST", path: "/v1/jobs", json: await Gantry.#request(req), idempotent: true });
  }

  /** Run a job and wait: the finished job, or the running one when `waitSeconds` ran out. */
  async execute(req: JobInput, opts: { waitSeconds?: number } = {}): Promise<Job> {
    const wait = opts.waitSeconds;
    return this.#call({
      method: "POST", path: "/v1/execute", json: await Gantry.#request(req), idempotent: true,
      query: { wait: wait === undefined ? undefined : `${wait}s` },
      timeoutMs: ((wait ?? 960) + 30) * 1000,
    });
  }

  /** Queue several jobs at once; each item is the queued job (status 202) or its error body. */
  async submitBatch(jobs: JobInput[]): Promise<BatchResponse> {
    const items = await Promise.all(jobs.map((j) => Gantry.#request(j)));
    return this.#call({ method: "POST", path: "/v1/jobs/batch", json: { jobs: items }, idempotent: true });
  }

  /**
   * The job; with `waitSeconds` (at most 60), long-polls until it finishes.
   * `includeSpec` adds `spec`: what it ran (env names, never values).
   */
  getJob(id: string, opts: { waitSeconds?: number; includeSpec?: boolean } = {}): Promise<Job> {
    const wait = opts.waitSeconds;
    return this.#call({
      method: "GET", path: "/v1/jobs/" + enc(id), idempotent: true,
      query: { wait: wait ? `${wait}s` : undefined, include: opts.includeSpec ? "spec" : undefined },
      timeoutMs: (wait ?? 0) * 1000 + this.timeoutMs,
    });
  }

  /** Waits until the job finishes; rejects with a timeout error after `timeoutMs`. */
  async wait(id: string, opts: { timeoutMs?: number } = {}): Promise<Job> {
    const deadline = opts.timeoutMs === undefined ? undefined : Date.now() + opts.timeoutMs;
    for (;;) {
      const left = deadline === undefined ? 50 : Math.min(50, (deadline - Date.now()) / 1000);
      const job = await this.getJob(id, { waitSeconds: Math.max(left, 0.001) });
      if (TERMINAL.has(job.status)) return job;
      if (deadline !== undefined && Date.now() >= deadline) {
        throw new Error(`timed out: job ${id} is still ${job.status} after ${opts.timeoutMs} ms`);
      }
    }
  }

  /**
   * One page of the tenant's jobs, newest first, that match every filter
   * given: `status` and `language` (one or several: any of them),
   * `createdAfter` (at or after) and `createdBefore` (strictly before),
   * `metadata` (every pair). `includeSpec` adds what each job ran (env
   * names only).
   */
  listJobs(f: JobFilter & { cursor?: string } = {}): Promise<JobList> {
    const query: Record<string, string | number | undefined> = {
      status: csv(f.status), language: csv(f.language),
      created_after: when(f.createdAfter), created_before: when(f.createdBefore),
      session_id: f.sessionId, batch_id: f.batchId, limit: f.limit, cursor: f.cursor,
      include: f.includeSpec ? "spec" : undefined,
    };
    for (const [k, v] of Object.entries(f.metadata ?? {})) query["metadata." + k] = v;
    return this.#call({ method: "GET", path: "/v1/jobs", idempotent: true, query });
  }

  /** Every job matching the filters, page after page. */
  async *iterJobs(f: JobFilter = {}): AsyncGenerator<Job> {
    let cursor: string | undefined;
    do {
      const page = await this.listJobs({ ...f, cursor });
      yield* page.jobs;
      cursor = page.next_cursor ?? undefined;
    } while (cursor);
  }

  /** Kill a running job or drop a queued one (idempotent). */
  cancel(id: string): Promise<Job> {
    return this.#call({ method: "POST", path: `/v1/jobs/${enc(id)}/cancel`, idempotent: true });
  }

  /**
   * The job's output as it comes, then its status. A broken stream is
   * opened again without repeating output.
   */
  async *logs(id: string): AsyncGenerator<LogEvent> {
    const written = { stdout: 0, stderr: 0 };
    const utf8 = new TextEncoder();
    for (let attempt = 0; ; attempt++) {
      const seen = { stdout: 0, stderr: 0 };
      try {
        const resp = await this.#call<Response>({ method: "GET", path: `/v1/jobs/${enc(id)}/logs`, accept: "text/event-stream", idempotent: true, stream: true });
        for await (const ev of sse(resp)) {
          if (ev.name === "stdout" || ev.name === "stderr") {
            const raw = utf8.encode((JSON.parse(ev.data) as { data: string }).data);
            const start = seen[ev.name];
            seen[ev.name] += raw.length;
            const skip = Math.max(written[ev.name] - start, 0);
            if (skip < raw.length) {
              written[ev.name] += raw.length - skip;
              yield { stream: ev.name, text: new TextDecoder().decode(raw.subarray(skip)) };
            }
          } else if (ev.name === "status") {
            yield { stream: "status", status: JSON.parse(ev.data) as LogStatusEvent };
            return;
          }
        }
      } catch (e) {
        if (e instanceof GantryError && !(e instanceof ConnectionFailed)) throw e;
      }
      if (attempt >= this.maxRetries) throw new ConnectionFailed(`the log stream of job ${id} broke ${attempt + 1} times`);
      await sleep(backoff(attempt));
    }
  }

  /** The files the job produced. */
  artifacts(id: string): Promise<ArtifactManifest> {
    return this.#call({ method: "GET", path: `/v1/jobs/${enc(id)}/artifacts`, idempotent: true });
  }

  /** A presigned download URL of an artifact (no credentials needed until it expires). */
  artifactUrl(id: string, path: string): Promise<PresignedURL> {
    return this.#call({ method: "GET", path: `/v1/jobs/${enc(id)}/artifacts/${encPath(path)}`, query: { redirect: "false" }, idempotent: true });
  }

  /** An artifact's bytes. */
  async downloadArtifact(id: string, path: string): Promise<Uint8Array> {
    const { url } = await this.artifactUrl(id, path);
    let resp: Response;
    try {
      resp = await this.#fetch(url);
    } catch (e) {
      throw new ConnectionFailed(`download of ${path} failed: ${e}`, { cause: e });
    }
    if (!resp.ok) throw new GantryError(`download of ${path} failed: HTTP ${resp.status}`, { status: resp.status });
    return new Uint8Array(await resp.arrayBuffer());
  }

  /** Saves every artifact of the job under `dir` (Node), each checked against its sha256; returns the paths. */
  async downloadArtifacts(job: Job | string, dir: string): Promise<string[]> {
    const j = typeof job === "string" ? await this.getJob(job) : job;
    const fs = await import("node:fs/promises");
    const nodePath = await import("node:path");
    const root = nodePath.resolve(dir);
    const out: string[] = [];
    for (const a of j.artifacts) {
      const dest = nodePath.resolve(root, ...a.path.split("/"));
      if (!dest.startsWith(root + nodePath.sep)) throw new GantryError(`artifact path ${a.path} leaves ${dir}`);
      const data = await this.downloadArtifact(j.id, a.path);
      const sum = new Uint8Array(await (await webcrypto()).subtle.digest("SHA-256", data));
      const hex = Array.from(sum, (x) => x.toString(16).padStart(2, "0")).join("");
      if (hex !== a.sha256) throw new GantryError(`artifact ${a.path}: the bytes do not match its sha256`);
      await fs.mkdir(nodePath.dirname(dest), { recursive: true });
      await fs.writeFile(dest, data);
      out.push(dest);
    }
    return out;
  }

  // -- sessions and their files ---------------------------------------------

  /** A stateful workspace: pass its id as session_id to run jobs in it. */
  createSession(req: Partial<SessionRequest> = {}): Promise<Session> {
    return this.#call({ method: "POST", path: "/v1/sessions", json: { language: "python", ...req } });
  }

  getSession(id: string): Promise<Session> {
    return this.#call({ method: "GET", path: "/v1/sessions/" + enc(id), idempotent: true });
  }

  listSessions(f: { limit?: number; cursor?: string } = {}): Promise<SessionList> {
    return this.#call({ method: "GET", path: "/v1/sessions", query: f, idempotent: true });
  }

  /** Stops the session's job, drops its queued ones and deletes its files. */
  async closeSession(id: string): Promise<void> {
    await this.#call({ method: "DELETE", path: "/v1/sessions/" + enc(id), idempotent: true });
  }

  listFiles(sessionId: string, path?: string): Promise<FileList> {
    return this.#call({ method: "GET", path: `/v1/sessions/${enc(sessionId)}/files`, query: { path }, idempotent: true });
  }

  readFile(sessionId: string, path: string): Promise<Uint8Array> {
    return this.#call({ method: "GET", path: `/v1/sessions/${enc(sessionId)}/files/${encPath(path)}`, idempotent: true, raw: true });
  }

  async writeFile(sessionId: string, path: string, content: string | Uint8Array): Promise<void> {
    await this.#call({
      method: "PUT", path: `/v1/sessions/${enc(sessionId)}/files/${encPath(path)}`, idempotent: true,
      body: content, contentType: "application/octet-stream",
    });
  }

  async deleteFile(sessionId: string, path: string): Promise<void> {
    await this.#call({ method: "DELETE", path: `/v1/sessions/${enc(sessionId)}/files/${encPath(path)}`, idempotent: true });
  }

  // -- skills ---------------------------------------------------------------

  /** The tenant's skills and the built-ins; with `q`, ranked by relevance. */
  async listSkills(q?: string, opts: { limit?: number } = {}): Promise<SkillSummary[]> {
    const r = await this.#call<{ skills: SkillSummary[] }>({ method: "GET", path: "/v1/skills", query: { q, limit: opts.limit }, idempotent: true });
    return r.skills;
  }

  getSkill(name: string, opts: { version?: number } = {}): Promise<Skill> {
    return this.#call({ method: "GET", path: "/v1/skills/" + enc(name), query: { version: opts.version }, idempotent: true });
  }

  /** Saves a new version of a skill from its SKILL.md text and files. */
  saveSkill(name: string, skillMd: string, files: Record<string, string | Uint8Array> = {}): Promise<Skill> {
    const list = Object.entries(files).map(([path, c]) =>
      typeof c === "string" ? { path, content: c } : { path, content: toBase64(c), encoding: "base64" },
    );
    return this.#call({ method: "PUT", path: "/v1/skills/" + enc(name), json: { skill_md: skillMd, files: list } });
  }

  /** Saves a new version of a skill from a zip or tar of its folder. */
  saveSkillArchive(name: string, archive: Uint8Array, format: "zip" | "tar" = "zip"): Promise<Skill> {
    return this.#call({
      method: "PUT", path: "/v1/skills/" + enc(name), body: archive,
      contentType: format === "zip" ? "application/zip" : "application/x-tar",
    });
  }

  /** The skill's folder as a zip or tar archive. */
  downloadSkill(name: string, opts: { format?: "zip" | "tar"; version?: number } = {}): Promise<Uint8Array> {
    return this.#call({
      method: "GET", path: "/v1/skills/" + enc(name), query: { format: opts.format ?? "zip", version: opts.version },
      idempotent: true, raw: true,
    });
  }

  skillVersions(name: string): Promise<SkillVersions> {
    return this.#call({ method: "GET", path: `/v1/skills/${enc(name)}/versions`, idempotent: true });
  }

  async deleteSkill(name: string): Promise<void> {
    await this.#call({ method: "DELETE", path: "/v1/skills/" + enc(name), idempotent: true });
  }

  // -- settings and webhooks ------------------------------------------------

  settings(): Promise<Settings> {
    return this.#call({ method: "GET", path: "/v1/settings", idempotent: true });
  }

  /** Changes settings, e.g. `{ webhook_url: "https://..." }` ("" removes the default webhook). */
  updateSettings(patch: Partial<Settings>): Promise<Settings> {
    return this.#call({ method: "PATCH", path: "/v1/settings", json: patch, idempotent: true });
  }

  /** The `whsec_...` secret that signs the tenant's webhooks. */
  async webhookSecret(): Promise<string> {
    return (await this.#call<WebhookSecret>({ method: "GET", path: "/v1/settings/webhook-secret", idempotent: true })).secret;
  }

  /** A new webhook secret; the old one goes on signing for a day. */
  rotateWebhookSecret(): Promise<WebhookSecret> {
    return this.#call({ method: "POST", path: "/v1/settings/webhook-secret/rotate" });
  }

  languages(): Promise<LanguageList> {
    return this.#call({ method: "GET", path: "/v1/languages", idempotent: true });
  }

  /** The environments (sandbox images) this tenant's jobs may name in `environment`. */
  environments(): Promise<EnvironmentList> {
    return this.#call({ method: "GET", path: "/v1/environments", idempotent: true });
  }
}

/** The wait before retry n+1: 0.5 s doubling up to 8 s, with jitter. */
function backoff(n: number): number {
  const d = Math.min(500 * 2 ** n, 8000);
  return d / 2 + Math.random() * (d / 2);
}

async function readError(resp: Response): Promise<GantryError> {
  const text = await resp.text().catch(() => "");
  const ra = resp.headers.get("retry-after");
  const retryAfter = ra && /^\d+$/.test(ra.trim()) ? Number(ra) : undefined;
  try {
    const e = (JSON.parse(text) as { error: { code: string; message: string; field?: string } }).error;
    if (e && typeof e.message === "string") return errorFor(resp.status, e.code, e.message, e.field, retryAfter);
  } catch {
    // not the API's error body
  }
  return errorFor(resp.status, "", `HTTP ${resp.status}: ${text.slice(0, 200)}`, undefined, retryAfter);
}

/** The events of a server-sent event stream. */
async function* sse(resp: Response): AsyncGenerator<{ name: string; data: string }> {
  if (!resp.body) return;
  const reader = resp.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  let name = "";
  let data: string[] = [];
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += dec.decode(value, { stream: true });
      let nl: number;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl).replace(/\r$/, "");
        buf = buf.slice(nl + 1);
        if (line === "") {
          if (name || data.length) yield { name, data: data.join("\n") };
          name = "";
          data = [];
        } else if (line.startsWith(":")) {
          continue;
        } else if (line.startsWith("event:")) {
          name = line.slice(6).trim();
        } else if (line.startsWith("data:")) {
          data.push(line.slice(5).replace(/^ /, ""));
        }
      }
    }
  } finally {
    reader.releaseLock();
    await resp.body.cancel().catch(() => undefined);
  }
}

import type { ErrorCode } from "./types.js";

/**
 * A request gantry refused or could not serve. `status` is the HTTP status
 * (0 when the server could not be reached), `code` the API's error code,
 * `field` the request field at fault (if any), `retryAfter` the server's
 * Retry-After in seconds (if it sent one).
 */
export class GantryError extends Error {
  readonly status: number;
  readonly code: string;
  readonly field?: string;
  readonly retryAfter?: number;

  constructor(message: string, opts: { status?: number; code?: string; field?: string; retryAfter?: number; cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = new.target.name;
    this.status = opts.status ?? 0;
    this.code = opts.code ?? "";
    this.field = opts.field;
    this.retryAfter = opts.retryAfter;
  }
}

/** 400: the request is malformed or breaks a limit; `field` names it. */
export class InvalidArgument extends GantryError {}
/** 401: the API key is missing, invalid or revoked. */
export class Unauthenticated extends GantryError {}
/** 404: no such object for this tenant. */
export class NotFound extends GantryError {}
/** 409: e.g. an idempotency key reused for a different request. */
export class Conflict extends GantryError {}
/** 408: the request body did not arrive in time. */
export class RequestTimeout extends GantryError {}
/** 413: the request body is larger than the server allows. */
export class PayloadTooLarge extends GantryError {}
/** 429: too many requests; retry after `retryAfter` seconds. */
export class RateLimited extends GantryError {}
/** 503: a dependency (database, queue) is unavailable, or a feature is off. */
export class Unavailable extends GantryError {}
/** 502/504: an upstream MCP server failed (code mode). */
export class UpstreamError extends GantryError {}
/** 500: an unexpected failure on the server. */
export class InternalError extends GantryError {}
/** The server could not be reached (refused, timed out, DNS). */
export class ConnectionFailed extends GantryError {}
/** A webhook message whose signature or timestamp does not check out. */
export class WebhookVerificationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "WebhookVerificationError";
  }
}

type ErrorClass = new (message: string, opts?: ConstructorParameters<typeof GantryError>[1]) => GantryError;

/** The error class of each API error code. */
export const ERRORS_BY_CODE: Record<ErrorCode, ErrorClass> = {
  invalid_argument: InvalidArgument,
  unauthenticated: Unauthenticated,
  not_found: NotFound,
  conflict: Conflict,
  request_timeout: RequestTimeout,
  payload_too_large: PayloadTooLarge,
  rate_limited: RateLimited,
  unavailable: Unavailable,
  upstream_error: UpstreamError,
  internal: InternalError,
};

const BY_STATUS: Record<number, ErrorClass> = {
  400: InvalidArgument, 401: Unauthenticated, 404: NotFound, 408: RequestTimeout, 409: Conflict,
  413: PayloadTooLarge, 429: RateLimited, 500: InternalError, 502: UpstreamError, 503: Unavailable,
  504: UpstreamError,
};

/** The error for an API error body (or a bare status). */
export function errorFor(status: number, code: string, message: string, field?: string, retryAfter?: number): GantryError {
  const cls = (ERRORS_BY_CODE as Record<string, ErrorClass>)[code] ?? BY_STATUS[status] ?? GantryError;
  return new cls(message, { status, code, field, retryAfter });
}

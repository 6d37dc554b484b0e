// Errors are values with stable codes, made here and mapped to HTTP here (../shared/DESIGN.md,
// "Protocol essentials"). docs/protocol.md documents each one.

import { ERROR_STATUS, type ErrorCode } from "./protocol/errors";

export interface ErrorBody {
  code: ErrorCode;
  message: string;
  [detail: string]: unknown;
}

/** Thrown inside the Worker; the app's error handler turns it into the JSON error answer. */
export class DocketError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
  }
  get status(): number {
    return ERROR_STATUS[this.code];
  }
  toBody(): ErrorBody {
    return { ...this.details, code: this.code, message: this.message };
  }
}

/**
 * A refusal that says when to try again (`retry_after_ms`) says it in `Retry-After` too, in whole
 * seconds, at least 1.
 */
export function errorResponse(err: DocketError): Response {
  const response = Response.json({ error: err.toBody() }, { status: err.status });
  const retryAfterMs = err.details.retry_after_ms;
  if (typeof retryAfterMs === "number") response.headers.set("Retry-After", String(Math.max(1, Math.ceil(retryAfterMs / 1_000))));
  return response;
}

/** A refusal crosses Durable Object RPC as a plain value, never as a thrown error. */
export type Refusal = { error: ErrorBody };

export function refusal(code: ErrorCode, message: string, details: Record<string, unknown> = {}): Refusal {
  return { error: { ...details, code, message } };
}

export function isRefusal(value: unknown): value is Refusal {
  return typeof value === "object" && value !== null && "error" in value;
}

/** A DocketError made in a Durable Object, as the refusal that crosses RPC (refusalError turns it back). */
export function asRefusal(err: DocketError): Refusal {
  return { error: err.toBody() };
}

/** A refusal that came back from a Durable Object, as the DocketError to throw. */
export function refusalError(value: Refusal): DocketError {
  const { code, message, ...details } = value.error;
  return new DocketError(code, message, details);
}

/** Rethrows a refusal that came back from a Durable Object as a DocketError. */
export function unwrap<T>(value: T): Exclude<T, Refusal> {
  if (isRefusal(value)) throw refusalError(value);
  return value as Exclude<T, Refusal>;
}

// One operation of the HTTP API, described once from the contract's schemas (src/protocol/): the
// description goes into the OpenAPI document (hono-openapi reads it off the middleware), and the
// same description checks every answer the route gives when CONTRACT_CHECK asks for it.

import type { MiddlewareHandler } from "hono";
import { resolver, uniqueSymbol, type DescribeRouteOptions } from "hono-openapi";
import { z } from "zod";
import type { AppEnv } from "../app-types";
import { CREDENTIAL_CHECK, type Auth } from "../auth";
import { DocketError, errorResponse } from "../errors";
import { log } from "../lib/log";
import { ERROR_STATUS, type ErrorCode } from "../protocol/errors";


export interface OperationSpec {
  /** A stable operationId, lowerCamelCase: what generated clients name the call. */
  id: string;
  summary: string;
  description?: string;
  tag: string;
  auth: Auth;
  /** Each success status and its body; `schema` absent means no body. */
  responses: Record<number, { description: string; schema?: z.ZodType; contentType?: string }>;
  /** The route's own refusals, beyond the ones every call of its kind may get (`commonErrors`). */
  errors?: ErrorCode[];
  /** Headers the call reads, such as Idempotency-Key. */
  headers?: { name: string; description: string; required?: boolean }[];
}

/** The security scheme of each credential, named in the document's components. */
export const SECURITY_SCHEME: Record<Exclude<Auth, "none">, string> = {
  member: "memberToken",
  admin: "memberToken",
  machine: "machineToken",
  claim: "machineToken",
  registration: "registrationToken",
  attempt: "attemptToken",
  operator: "adminSecret",
};

/** The refusals any call may meet, from its credential and its input, whatever the route does. */
export function commonErrors(spec: Pick<OperationSpec, "auth">): ErrorCode[] {
  const codes: ErrorCode[] = ["invalid_request", "payload_too_large", "rate_limited", "internal"];
  if (spec.auth !== "none") codes.push("unauthorized");
  if (spec.auth === "admin" || spec.auth === "operator") codes.push("forbidden");
  return codes;
}

/** Every error code of the operation, grouped by HTTP status. */
export function errorsByStatus(spec: OperationSpec): Map<number, ErrorCode[]> {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of new Set([...commonErrors(spec), ...(spec.errors ?? [])])) {
    const status = ERROR_STATUS[code];
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  return byStatus;
}

function errorSchema(codes: ErrorCode[]) {
  return z.object({ error: z.looseObject({ code: z.enum(codes as [ErrorCode, ...ErrorCode[]]), message: z.string() }) });
}

function describe(spec: OperationSpec): DescribeRouteOptions {
  const responses: NonNullable<DescribeRouteOptions["responses"]> = {};
  for (const [status, answer] of Object.entries(spec.responses)) {
    responses[status] = answer.schema
      ? { description: answer.description, content: { [answer.contentType ?? "application/json"]: { schema: resolver(answer.schema) } } }
      : { description: answer.description };
  }
  for (const [status, codes] of errorsByStatus(spec)) {
    responses[String(status)] = {
      description: `Refused: ${codes.join(", ")} (docs/protocol.md, "Errors").`,
      content: { "application/json": { schema: resolver(errorSchema(codes)) } },
    };
  }
  return {
    operationId: spec.id,
    summary: spec.summary,
    description: spec.description,
    tags: [spec.tag],
    security: spec.auth === "none" ? [] : [{ [SECURITY_SCHEME[spec.auth]]: [] }],
    parameters: spec.headers?.map((h) => ({ in: "header", name: h.name, description: h.description, required: h.required ?? false, schema: { type: "string" } })),
    responses,
  };
}

/** What is wrong with an answer by the operation's description, or null when it keeps it. */
async function violation(spec: OperationSpec, res: Response): Promise<string | null> {
  const status = res.status;
  if (status >= 400) {
    const codes = errorsByStatus(spec).get(status);
    if (!codes) return `status ${status} is not in the document`;
    const body = await res.clone().json().catch(() => null);
    const parsed = errorSchema(codes).safeParse(body);
    return parsed.success ? null : `error answer ${status} is not in the document: ${JSON.stringify(body).slice(0, 300)}`;
  }
  const answer = spec.responses[status];
  if (!answer) return `status ${status} is not in the document`;
  if (!answer.schema || (answer.contentType ?? "application/json") !== "application/json") return null;
  const body = await res.clone().json().catch(() => undefined);
  const parsed = answer.schema.safeParse(body);
  if (parsed.success) return null;
  const issue = parsed.error.issues[0];
  return `answer ${status} does not match its schema at ${issue.path.join(".") || "(body)"}: ${issue.message}`;
}

/**
 * The route's description as a middleware, first in the route's chain: it checks the credential
 * the description names (src/auth.ts), so a route declares its credential once, and the answers of
 * the route's validation and handler are checked against the description. A refused credential's
 * answer (unauthorized, forbidden, rate_limited) is one commonErrors lists for that credential.
 * With CONTRACT_CHECK=enforce (the test suites) an answer the document does not describe becomes a
 * 500 naming the difference; with "log" it is logged.
 */
export function operation(spec: OperationSpec): MiddlewareHandler<AppEnv> {
  const credential = spec.auth === "none" ? null : CREDENTIAL_CHECK[spec.auth];
  const middleware: MiddlewareHandler<AppEnv> = async (c, next) => {
    if (credential) await credential(c, next);
    else await next();
    const mode = c.get("config").contractCheck;
    if (mode === "off") return;
    const problem = await violation(spec, c.res);
    if (!problem) return;
    log("contract.violation", { operation: spec.id, method: c.req.method, path: c.req.path, status: c.res.status, reason: problem });
    if (mode === "enforce") {
      c.res = undefined as unknown as Response;
      c.res = errorResponse(new DocketError("internal", `contract violation in ${spec.id}: ${problem}`));
    }
  };
  return Object.assign(middleware, { [uniqueSymbol]: { spec: describe(spec) }, operationSpec: spec });
}

// Validation at the edge of every route: handlers receive typed data, and bad input is a 400
// invalid_request naming the field, never a 500 (../shared/DESIGN.md, "Protocol essentials").

import { zValidator } from "@hono/zod-validator";
import type { Context, HonoRequest, ValidationTargets } from "hono";
import type { AppEnv } from "./app-types";
import { z } from "zod";
import { BOUND_CEILINGS, parseVersion, type Config } from "./config";
import { DocketError } from "./errors";

/** The field an issue names; one about the whole input (an unknown key, say) names the input itself. */
export function fieldOf(issue: z.core.$ZodIssue | undefined, whole = "body"): string {
  if (!issue || issue.path.length === 0) return whole;
  return issue.path.map(String).join(".");
}

export function invalid(error: z.ZodError, where: string): DocketError {
  const issue = error.issues[0];
  const field = fieldOf(issue, where);
  const what = field === where ? where : `${where} ${field}`;
  return new DocketError("invalid_request", `${what}: ${issue?.message ?? "is invalid"}`, { field });
}

const JSON_MEDIA_TYPE = /^application\/([\w.-]+\+)?json$/i;

/**
 * zValidator whose failures throw invalid_request instead of answering in its own format. A JSON
 * body must say so: the validator would read a body under another Content-Type as {}, so such a
 * body is refused here instead of being ignored (an empty body still counts as {}). `bounds`
 * checks the configured limits (src/bounds.ts) on the parsed value.
 */
export function validate<T extends z.ZodType, Target extends keyof ValidationTargets>(
  target: Target,
  schema: T,
  bounds?: (config: Config, data: z.infer<T>) => void,
) {
  const check = zValidator(target, schema, (result, c) => {
    if (!result.success) throw invalid(result.error as unknown as z.ZodError, target === "json" ? "body" : target);
    // The app's first middleware sets the config (src/app.ts); the hook's context is not typed with it.
    if (bounds) bounds((c as unknown as Context<AppEnv>).get("config"), result.data as z.infer<T>);
  });
  if (target !== "json") return check;
  const jsonOnly: typeof check = async (c, next) => {
    await refuseBodyThatIsNotJson(c.req);
    return check(c, next);
  };
  return jsonOnly;
}

/** Refuses a non-empty body sent under another Content-Type than JSON (the text stays readable). */
export async function refuseBodyThatIsNotJson(req: HonoRequest): Promise<void> {
  const mediaType = (req.header("Content-Type") ?? "").split(";")[0].trim();
  if (!JSON_MEDIA_TYPE.test(mediaType) && (await req.text()).trim() !== "") {
    throw new DocketError("invalid_request", "body: send JSON with Content-Type: application/json", { field: "Content-Type" });
  }
}

/** An Idempotency-Key (docs/protocol.md, "Idempotency"): 1–200 printable ASCII characters without spaces. */
export const idempotencyKey = z.string().min(1).max(200).regex(/^[\x21-\x7e]+$/, "must be printable ASCII without spaces");

/**
 * The Idempotency-Key header of a request, or null without one; a malformed key is 400
 * invalid_request naming the header. `schema` narrows the rule where the key becomes an id.
 */
export function idempotencyKeyOf(req: HonoRequest, schema: z.ZodType<string> = idempotencyKey): string | null {
  const header = req.header("Idempotency-Key");
  if (header === undefined) return null;
  const parsed = schema.safeParse(header);
  if (!parsed.success) {
    throw new DocketError("invalid_request", `header Idempotency-Key: ${parsed.error.issues[0].message}`, { field: "Idempotency-Key" });
  }
  return parsed.data;
}

/** Reusable field schemas. */
export const runIdParam = z.string().regex(/^run_[0-9a-f]{24}$/, "must be a run id like run_<24 hex digits>");
export const attemptParam = z.coerce.number().int().min(1).max(1_000_000);
// A version that is not semver is a malformed call (400), not an old runner (426).
export const cliVersion = z.string().min(1).max(64).refine((v) => parseVersion(v) !== null, "must be a semantic version like 1.2.3");
export const protocolList = z.array(z.string().min(1).max(32)).min(1).max(16);
export const labelList = z
  .array(z.string().min(1).max(64).regex(/^[A-Za-z0-9_.:\/-]+$/, "labels are letters, digits and _ . : / -"))
  .max(BOUND_CEILINGS.labelsMax);
/** A record with at most `max` keys (a schema's hard ceiling; the configured bound is in src/bounds.ts). */
export const atMostKeys = (max: number) => (record: Record<string, unknown>) => Object.keys(record).length <= max;

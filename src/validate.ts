// Validation at the edge of every route: handlers receive typed data, and bad input is a 400
// invalid_request naming the field, never a 500 (../shared/DESIGN.md, "Protocol essentials").

import type { Context, HonoRequest, ValidationTargets } from "hono";
import { resolver, uniqueSymbol, validator } from "hono-openapi";
import { z } from "zod";
import type { AppEnv } from "./app-types";
import type { Config } from "./config";
import { DocketError } from "./errors";
import { idempotencyKey } from "./protocol/common";

/** A validation issue, as every Standard Schema library reports it. */
interface Issue {
  readonly message: string;
  readonly path?: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> | undefined;
}

/** The field an issue names; one about the whole input (an unknown key, say) names the input itself. */
export function fieldOf(issue: Issue | undefined, whole = "body"): string {
  if (!issue?.path || issue.path.length === 0) return whole;
  return issue.path.map((p) => String(typeof p === "object" ? p.key : p)).join(".");
}

export function invalid(issues: readonly Issue[], where: string): DocketError {
  const issue = issues[0];
  const field = fieldOf(issue, where);
  const what = field === where ? where : `${where} ${field}`;
  return new DocketError("invalid_request", `${what}: ${issue?.message ?? "is invalid"}`, { field });
}

const JSON_MEDIA_TYPE = /^application\/([\w.-]+\+)?json$/i;

/**
 * The contract's validator (hono-openapi's, which also puts the schema in the OpenAPI document)
 * whose failures throw invalid_request instead of answering in its own format. A JSON
 * body must say so: the validator would read a body under another Content-Type as {}, so such a
 * body is refused here instead of being ignored. An empty body counts as {} under any Content-Type
 * (docs/protocol.md), and where the schema accepts {} the document marks the body optional. `bounds`
 * checks the configured limits (src/bounds.ts) on the parsed value.
 */
export function validate<T extends z.ZodType, Target extends keyof ValidationTargets>(
  target: Target,
  schema: T,
  bounds?: (config: Config, data: z.infer<T>) => void,
) {
  const accept = (result: { success: true; data: unknown } | { success: false; error: readonly Issue[] }, c: Context) => {
    if (!result.success) throw invalid(result.error, target === "json" ? "body" : target);
    // The app's first middleware sets the config (src/app.ts); the hook's context is not typed with it.
    if (bounds) bounds((c as unknown as Context<AppEnv>).get("config"), result.data as z.infer<T>);
  };
  const check = validator(target, schema, accept);
  if (target !== "json") return check;
  const jsonOnly: typeof check = async (c, next) => {
    await refuseBodyThatIsNotJson(c.req);
    if ((await c.req.text()).trim() !== "") return check(c, next);
    // An empty body is {}; the validator would refuse it as malformed JSON.
    const parsed = schema.safeParse({});
    accept(parsed.success ? { success: true, data: parsed.data } : { success: false, error: parsed.error.issues }, c);
    c.req.addValidatedData("json", parsed.data as object);
    await next();
  };
  // The schema stays attached, so the OpenAPI document still shows the body: optional where {} will do.
  const spec = schema.safeParse({}).success
    ? { spec: { requestBody: { required: false, content: { "application/json": { schema: resolver(schema) } } } } }
    : (check as unknown as Record<symbol, unknown>)[uniqueSymbol];
  return Object.assign(jsonOnly, { [uniqueSymbol]: spec });
}

/** Refuses a non-empty body sent under another Content-Type than JSON (the text stays readable). */
export async function refuseBodyThatIsNotJson(req: HonoRequest): Promise<void> {
  const mediaType = (req.header("Content-Type") ?? "").split(";")[0].trim();
  if (!JSON_MEDIA_TYPE.test(mediaType) && (await req.text()).trim() !== "") {
    throw new DocketError("invalid_request", "body: send JSON with Content-Type: application/json", { field: "Content-Type" });
  }
}

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

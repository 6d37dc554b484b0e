// Field schemas every part of the contract uses: ids, versions, labels, the Idempotency-Key and
// the one pagination style of every list (docs/protocol.md, "Lists" and "Idempotency").

import { z } from "zod";
import { BOUND_CEILINGS } from "./bounds.js";
import { parseVersion } from "./version.js";

/** An id with its prefix, like run_<24 hex digits>. */
export const prefixedId = (prefix: string, what: string) =>
  z.string().regex(new RegExp(`^${prefix}_[0-9a-f]{24}$`), `must be ${what} id like ${prefix}_<24 hex digits>`);

export const runId = prefixedId("run", "a run");
export const machineId = prefixedId("mch", "a machine");
export const tokenId = prefixedId("tok", "a token");
export const orgId = prefixedId("org", "an organization");

/** An attempt number in a path. */
export const attemptNumber = z.coerce.number().int().min(1).max(1_000_000);

/** A version that is not semver is a malformed call (400), not an old runner (426). */
export const cliVersion = z.string().min(1).max(64).refine((v) => parseVersion(v) !== null, "must be a semantic version like 1.2.3");
export const protocolList = z.array(z.string().min(1).max(32)).min(1).max(16);
export const label = z.string().min(1).max(64).regex(/^[A-Za-z0-9_.:\/-]+$/, "labels are letters, digits and _ . : / -");
export const labelList = z.array(label).max(BOUND_CEILINGS.labelsMax);

/** An Idempotency-Key (docs/protocol.md, "Idempotency"): 1–200 printable ASCII characters without spaces. */
export const idempotencyKey = z.string().min(1).max(200).regex(/^[\x21-\x7e]+$/, "must be printable ASCII without spaces");

/** A time in milliseconds since the Unix epoch. */
export const epochMs = z.number().int();

const CURSOR_MESSAGE = "must be a cursor from a previous page's next_cursor";

/** A keyset cursor over rows whose ids match `id` (a regex source, such as `run_[0-9a-f]{24}`). */
export const keysetCursor = (id: string) => z.string().regex(new RegExp(`^\\d{1,15}\\.${id}$`), CURSOR_MESSAGE);

/** A sequence-number cursor. */
export const seqCursor = z.string().regex(/^\d{1,15}$/, CURSOR_MESSAGE);

/** `limit` (1–`max`) and `cursor` (checked by `cursor`), the query fields of every list. */
export function pageQuery(cursor: z.ZodString, max = 200) {
  return { limit: z.coerce.number().int().min(1).max(max).optional(), cursor: cursor.optional() };
}

/** A page of a list: its items under `key`, and the cursor of the next page (null on the last). */
export function page<K extends string, T extends z.ZodType>(key: K, item: T) {
  return z.object({ [key]: z.array(item), next_cursor: z.string().nullable() } as { [P in K]: z.ZodArray<T> } & { next_cursor: z.ZodNullable<z.ZodString> });
}

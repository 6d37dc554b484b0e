// D1's refusal of a duplicate key, as a write that keeps a name unique sees it.

import { errorChain } from "./error-causes";

/** True for D1's UNIQUE constraint failure, which drizzle wraps in its own error (the original is its cause). */
export function isUniqueViolation(err: unknown): boolean {
  return errorChain(err).some((e) => String((e as Error).message ?? e).includes("UNIQUE constraint failed"));
}

// D1's refusal of a duplicate key, as a write that keeps a name unique sees it.

/** True for D1's UNIQUE constraint failure, which drizzle wraps in its own error (the original is its cause). */
export function isUniqueViolation(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if (String((e as Error).message ?? e).includes("UNIQUE constraint failed")) return true;
  }
  return false;
}

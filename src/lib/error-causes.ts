// An error and the errors under it (`cause`): drizzle wraps D1's own refusal in its "Failed query: …"
// error (the statement and its parameters), so why a statement failed is the cause, not the message.

/** How deep a chain is followed: a cycle or a very deep chain stops here. */
const CAUSES_MAX = 5;

/** `err`, then its cause, then that one's, at most CAUSES_MAX in all. */
export function errorChain(err: unknown): unknown[] {
  const chain: unknown[] = [];
  for (let e: unknown = err; e !== undefined && e !== null && chain.length < CAUSES_MAX; e = (e as { cause?: unknown }).cause) chain.push(e);
  return chain;
}

/** The innermost cause's text (D1's "no such column …", say), or null when `err` has no cause. */
export function rootCause(err: unknown): string | null {
  const chain = errorChain(err);
  return chain.length > 1 ? String(chain[chain.length - 1]) : null;
}

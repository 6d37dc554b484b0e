// Conditional GitHub reads (GitHub REST docs, "Best practices": a `304 Not Modified` answer to
// If-None-Match / If-Modified-Since does not count against the rate limit). A read reconciliation
// repeats keeps its validator and the compact part of its answer in the installation's ledger
// (usage-store.ts); the next read sends the validator back and, on 304, reuses what it kept.

import { toGitHubError, type GitHubClient } from "./client";
import type { GitHubLedger } from "./ledger";

export interface ConditionalAnswer<T> {
  data: T;
  link: string | undefined;
}

/**
 * GET `route` with the validator of the last answer, if the ledger holds one; `compact` keeps what
 * the caller reads of a fresh answer, and that is what a 304 answers again. Without a ledger the
 * read is plain. A failure is a GitHubError naming `what`.
 */
export async function conditionalGet<T>(
  client: GitHubClient,
  ledger: GitHubLedger | null,
  what: string,
  route: string,
  params: Record<string, unknown>,
  compact: (data: unknown) => T,
): Promise<ConditionalAnswer<T>> {
  const url = client.request.endpoint(route, params).url;
  const cached = ledger ? await ledger.cached(url) : null;
  const validator = cached?.etag ? { "if-none-match": cached.etag } : cached?.lastModified ? { "if-modified-since": cached.lastModified } : {};
  let response;
  try {
    response = await client.request(route, { ...params, headers: validator });
  } catch (err) {
    if (cached && ledger && (err as { status?: unknown }).status === 304) {
      await ledger.revalidated(url, cached);
      return { data: cached.body as T, link: cached.link ?? undefined };
    }
    throw toGitHubError(err, what);
  }
  const data = compact(response.data);
  const headers = response.headers as Record<string, string | undefined>;
  const etag = headers.etag ?? null;
  const lastModified = headers["last-modified"] ?? null;
  if (ledger && (etag !== null || lastModified !== null)) {
    await ledger.remember(url, { etag, lastModified, link: headers.link ?? null, body: data, validatedAtMs: Date.now() });
  }
  return { data, link: headers.link };
}

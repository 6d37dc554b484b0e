// What a GitHub client reports of its traffic, and what a conditional read keeps, for one project
// on its App installation (conditional.ts reads through it; usage-store.ts keeps it in D1).

import type { Headroom } from "../provider";

export interface CachedAnswer {
  etag: string | null;
  lastModified: string | null;
  /** The Link header, so a page read from the ledger still knows its next and last pages. */
  link: string | null;
  body: unknown;
  validatedAtMs: number;
}

/** One HTTP answer of GitHub as the budget sees it. */
export interface ObservedAnswer {
  /** GitHub counts every answer against the installation's limit but a 304. */
  counted: boolean;
  headroom: Headroom | null;
}

/** One project's ledger of its installation's GitHub traffic (d1GitHubLedger in production). */
export interface GitHubLedger {
  cached(url: string): Promise<CachedAnswer | null>;
  remember(url: string, answer: CachedAnswer): Promise<void>;
  /** A 304 proved `answer` current. */
  revalidated(url: string, answer: CachedAnswer): Promise<void>;
  observe(answer: ObservedAnswer): Promise<void>;
  /** The rate limit the latest answer stated (this one's, else the last one recorded), or null before any. */
  headroom(): Promise<Headroom | null>;
}

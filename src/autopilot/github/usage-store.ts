// What Docket keeps of its traffic with one GitHub App installation, in D1 (src/db/github-schema.ts):
// the validators and compact answers of repeated reads (at most GITHUB_CACHE_ENTRIES_MAX per
// installation, each kept GITHUB_CACHE_TTL_MS after it was last validated), the rate limit GitHub
// last stated, and the requests GitHub counted, per project and minute, for the last hour.

import { and, desc, eq, gt, lt, sql, sum } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import type { Config } from "../../config";
import { githubHttpCache, githubRateLimits, githubRequestCounts } from "../../db/github-schema";
import type { Headroom } from "../provider";
import type { GitHubLedger } from "./ledger";

const HOUR_MS = 3_600_000;
const MINUTE_MS = 60_000;

/** An installation's key: GitHub's rate limit is per installation of an App on one GitHub (its API root). */
export function installationKey(githubApiUrl: string, installationId: string): string {
  return `${githubApiUrl.replace(/\/+$/, "")}|${installationId}`;
}

/** The ledger of one project's requests through its installation. */
export function d1GitHubLedger(db: D1Database, project: { id: string; githubApiUrl: string; installationId: string }, config: Config): GitHubLedger {
  const orm = drizzle(db);
  const key = installationKey(project.githubApiUrl, project.installationId);
  let last: Headroom | null = null;
  const entry = and(eq(githubHttpCache.installationKey, key), eq(githubHttpCache.url, sql.placeholder("url")));
  const lookup = orm.select().from(githubHttpCache).where(entry).prepare();
  return {
    headroom: async () => last ?? (last = await storedHeadroom(db, project.githubApiUrl, project.installationId)),
    async cached(url) {
      const row = await lookup.get({ url });
      if (!row || row.validatedAtMs < Date.now() - config.githubCacheTtlMs) return null;
      return { etag: row.etag, lastModified: row.lastModified, link: row.link, body: JSON.parse(row.body), validatedAtMs: row.validatedAtMs };
    },
    async remember(url, answer) {
      const row = { installationKey: key, url, ...answer, body: JSON.stringify(answer.body) };
      await orm.batch([
        orm.insert(githubHttpCache).values(row).onConflictDoUpdate({ target: [githubHttpCache.installationKey, githubHttpCache.url], set: row }),
        ...pruneCache(orm, key, config),
      ]);
    },
    async revalidated(url, answer) {
      // A 304 proves the entry current; its age is refreshed now and then, not on every read.
      if (Date.now() - answer.validatedAtMs < config.githubCacheTtlMs / 4) return;
      await orm.update(githubHttpCache).set({ validatedAtMs: Date.now() }).where(and(eq(githubHttpCache.installationKey, key), eq(githubHttpCache.url, url)));
    },
    async observe(answer) {
      last = answer.headroom ?? last;
      // A 304 changes neither the count nor the remaining budget: nothing to write.
      if (!answer.counted) return;
      await orm.batch([...countRequest(orm, key, project.id), ...(answer.headroom ? [rateLimitUpsert(orm, key, answer.headroom)] : [])]);
    },
  };
}

type Orm = ReturnType<typeof drizzle>;

/** Entries past the installation's count bound (the least recently validated) and past their TTL. */
function pruneCache(orm: Orm, key: string, config: Config) {
  const newest = orm
    .select({ at: githubHttpCache.validatedAtMs })
    .from(githubHttpCache)
    .where(eq(githubHttpCache.installationKey, key))
    .orderBy(desc(githubHttpCache.validatedAtMs))
    .limit(1)
    .offset(config.githubCacheEntriesMax);
  return [
    orm.delete(githubHttpCache).where(and(eq(githubHttpCache.installationKey, key), sql`${githubHttpCache.validatedAtMs} <= (${newest})`)),
    orm.delete(githubHttpCache).where(and(eq(githubHttpCache.installationKey, key), lt(githubHttpCache.validatedAtMs, Date.now() - config.githubCacheTtlMs))),
  ] as const;
}

/** One more counted request in this minute's row; rows older than an hour are dropped as they pass. */
function countRequest(orm: Orm, key: string, projectId: string) {
  const minuteMs = Math.floor(Date.now() / MINUTE_MS) * MINUTE_MS;
  return [
    orm
      .insert(githubRequestCounts)
      .values({ installationKey: key, projectId, minuteMs, counted: 1 })
      .onConflictDoUpdate({
        target: [githubRequestCounts.installationKey, githubRequestCounts.projectId, githubRequestCounts.minuteMs],
        set: { counted: sql`${githubRequestCounts.counted} + 1` },
      }),
    orm.delete(githubRequestCounts).where(and(eq(githubRequestCounts.installationKey, key), lt(githubRequestCounts.minuteMs, minuteMs - HOUR_MS))),
  ] as const;
}

function rateLimitUpsert(orm: Orm, key: string, headroom: Headroom) {
  const row = { installationKey: key, remaining: headroom.remaining, limit: headroom.limit, resetAtMs: headroom.resetAtMs, observedAtMs: Date.now() };
  return orm.insert(githubRateLimits).values(row).onConflictDoUpdate({ target: githubRateLimits.installationKey, set: row });
}

/** The installation's rate limit as GitHub last stated it; null when none was seen. */
export async function storedHeadroom(db: D1Database, githubApiUrl: string, installationId: string): Promise<Headroom | null> {
  const row = await drizzle(db).select().from(githubRateLimits).where(eq(githubRateLimits.installationKey, installationKey(githubApiUrl, installationId))).get();
  if (!row) return null;
  return { remaining: row.remaining, limit: row.limit, resetAtMs: row.resetAtMs };
}

/** Requests GitHub counted for the project in the last hour (every answer but a 304). */
export async function countedLastHour(db: D1Database, projectId: string): Promise<number> {
  const minuteMs = Math.floor(Date.now() / MINUTE_MS) * MINUTE_MS;
  const row = await drizzle(db)
    .select({ total: sum(githubRequestCounts.counted) })
    .from(githubRequestCounts)
    .where(and(eq(githubRequestCounts.projectId, projectId), gt(githubRequestCounts.minuteMs, minuteMs - HOUR_MS)))
    .get();
  return Number(row?.total ?? 0);
}

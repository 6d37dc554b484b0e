import { index, integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core";

// What Docket keeps of its GitHub traffic, per App installation (src/autopilot/github/usage-store.ts).
// An installation is keyed by its API root and id (`https://api.github.com|123`): its rate limit is
// GitHub's, shared by every project that names it.
//
// D1 rather than a per-installation Durable Object: the cache is read and written by whichever
// Worker invocation talks to GitHub, a lost write costs one uncounted-then-counted re-read at most,
// and the request count is a sum of per-minute rows, so nothing needs one serialized counter.

// The validators of GitHub reads reconciliation repeats (an issue, its blockers, its events, a page
// of ready issues): sent back as If-None-Match / If-Modified-Since, so an unchanged answer is a 304
// that GitHub does not count. `body` is the compact part of the answer the provider reads.
export const githubHttpCache = sqliteTable(
  "github_http_cache",
  {
    installationKey: text("installation_key").notNull(),
    url: text("url").notNull(),
    etag: text("etag"),
    lastModified: text("last_modified"),
    link: text("link"),
    body: text("body").notNull(), // JSON
    validatedAtMs: integer("validated_at_ms").notNull(),
  },
  (t) => [primaryKey({ columns: [t.installationKey, t.url] }), index("github_http_cache_age").on(t.installationKey, t.validatedAtMs)],
);

// The installation's rate limit as GitHub's last answer stated it (x-ratelimit-*).
export const githubRateLimits = sqliteTable("github_rate_limits", {
  installationKey: text("installation_key").primaryKey(),
  remaining: integer("remaining").notNull(),
  limit: integer("limit_total").notNull(),
  resetAtMs: integer("reset_at_ms").notNull(),
  observedAtMs: integer("observed_at_ms").notNull(),
});

// Requests GitHub counted (every answer but a 304), per installation, project and minute.
export const githubRequestCounts = sqliteTable(
  "github_request_counts",
  {
    installationKey: text("installation_key").notNull(),
    projectId: text("project_id").notNull(),
    minuteMs: integer("minute_ms").notNull(),
    counted: integer("counted").notNull(),
  },
  (t) => [primaryKey({ columns: [t.installationKey, t.projectId, t.minuteMs] }), index("github_request_counts_project").on(t.projectId, t.minuteMs)],
);
